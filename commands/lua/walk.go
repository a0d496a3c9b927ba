package lua

import "github.com/yuin/gopher-lua/ast"

// action is what a visitor tells the walk to do after a node.
type action uint8

const (
	walkOn   action = iota // visit the node's children
	walkSkip               // not its children
	walkStop               // nothing more
)

// visitor sees a statement or an expression, at a depth (1 for the chunk's
// statements, one more per level of nesting), before its children. For an
// expression it may return a replacement, whose children are walked then.
type visitor func(n any, depth int) (ast.Expr, action)

// walker is the one walk of the syntax tree that the passes without scopes
// share: the depth limit, the rewrite of .., the loop and recursion checks.
// (The resolver and the checker walk it themselves: they keep scopes and
// the context of each expression.)
type walker struct {
	f    visitor
	stop bool
}

// walkTree walks stmts depth first with f.
func walkTree(stmts []ast.Stmt, f visitor) { (&walker{f: f}).stmts(stmts, 1) }

// walk calls f with every statement and expression of stmts.
func walk(stmts []ast.Stmt, f func(n any)) {
	walkTree(stmts, func(n any, _ int) (ast.Expr, action) { f(n); return nil, walkOn })
}

func (w *walker) visit(n any, d int) (ast.Expr, bool) {
	r, act := w.f(n, d)
	w.stop = act == walkStop
	return r, act == walkOn
}

func (w *walker) expr(p *ast.Expr, d int) {
	if *p == nil || w.stop {
		return
	}
	r, on := w.visit(*p, d)
	if r != nil {
		*p = r
	}
	if !on {
		return
	}
	d++
	switch e := (*p).(type) {
	case *ast.AttrGetExpr:
		w.expr(&e.Object, d)
		w.expr(&e.Key, d)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			w.expr(&f.Key, d)
			w.expr(&f.Value, d)
		}
	case *ast.FuncCallExpr:
		w.expr(&e.Func, d)
		w.expr(&e.Receiver, d)
		w.exprs(e.Args, d)
	case *ast.FunctionExpr:
		w.stmts(e.Stmts, d)
	default:
		for _, o := range operands(e) {
			w.expr(o, d)
		}
	}
}

// operands are an operator expression's operands, by address (none for
// any other expression).
func operands(e ast.Expr) []*ast.Expr {
	switch e := e.(type) {
	case *ast.LogicalOpExpr:
		return []*ast.Expr{&e.Lhs, &e.Rhs}
	case *ast.RelationalOpExpr:
		return []*ast.Expr{&e.Lhs, &e.Rhs}
	case *ast.StringConcatOpExpr:
		return []*ast.Expr{&e.Lhs, &e.Rhs}
	case *ast.ArithmeticOpExpr:
		return []*ast.Expr{&e.Lhs, &e.Rhs}
	case *ast.UnaryMinusOpExpr:
		return []*ast.Expr{&e.Expr}
	case *ast.UnaryNotOpExpr:
		return []*ast.Expr{&e.Expr}
	case *ast.UnaryLenOpExpr:
		return []*ast.Expr{&e.Expr}
	}
	return nil
}

func (w *walker) exprs(es []ast.Expr, d int) {
	for i := range es {
		w.expr(&es[i], d)
	}
}

func (w *walker) stmts(ss []ast.Stmt, d int) {
	for _, s := range ss {
		if w.stop {
			return
		}
		if _, on := w.visit(s, d); !on {
			continue
		}
		switch s := s.(type) {
		case *ast.AssignStmt:
			w.exprs(s.Lhs, d+1)
			w.exprs(s.Rhs, d+1)
		case *ast.LocalAssignStmt:
			w.exprs(s.Exprs, d+1)
		case *ast.FuncCallStmt:
			w.expr(&s.Expr, d+1)
		case *ast.DoBlockStmt:
			w.stmts(s.Stmts, d+1)
		case *ast.WhileStmt:
			w.expr(&s.Condition, d+1)
			w.stmts(s.Stmts, d+1)
		case *ast.RepeatStmt:
			w.stmts(s.Stmts, d+1)
			w.expr(&s.Condition, d+1)
		case *ast.IfStmt:
			w.expr(&s.Condition, d+1)
			w.stmts(s.Then, d+1)
			w.stmts(s.Else, d+1)
		case *ast.NumberForStmt:
			w.expr(&s.Init, d+1)
			w.expr(&s.Limit, d+1)
			w.expr(&s.Step, d+1)
			w.stmts(s.Stmts, d+1)
		case *ast.GenericForStmt:
			w.exprs(s.Exprs, d+1)
			w.stmts(s.Stmts, d+1)
		case *ast.FuncDefStmt:
			w.expr(&s.Name.Func, d+1)
			w.expr(&s.Name.Receiver, d+1)
			var fn ast.Expr = s.Func
			w.expr(&fn, d+1)
		case *ast.ReturnStmt:
			w.exprs(s.Exprs, d+1)
		}
	}
}
