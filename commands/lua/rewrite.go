package lua

import (
	"fmt"

	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// compile turns the checked syntax tree into the function the sandbox runs.
func compile(chunk []ast.Stmt) (proto *glua.FunctionProto, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return glua.Compile(chunk, chunkName)
}

// rewriteConcat replaces every a .. b in the tree by a call of the
// sandbox's counting concatenation, so that no chain of .. can build
// strings past the byte budget (the interpreter's own concatenation cannot
// be metered). The call yields one value, as .. does.
func rewriteConcat(chunk []ast.Stmt) {
	var stmts func([]ast.Stmt)
	var expr func(ast.Expr) ast.Expr
	exprs := func(es []ast.Expr) {
		for i, e := range es {
			es[i] = expr(e)
		}
	}
	expr = func(e ast.Expr) ast.Expr {
		switch x := e.(type) {
		case *ast.StringConcatOpExpr:
			fn := &ast.IdentExpr{Value: concatName}
			fn.SetLine(x.Line())
			call := &ast.FuncCallExpr{Func: fn, Args: []ast.Expr{expr(x.Lhs), expr(x.Rhs)}, AdjustRet: true}
			call.SetLine(x.Line())
			call.SetLastLine(x.LastLine())
			return call
		case *ast.AttrGetExpr:
			x.Object, x.Key = expr(x.Object), expr(x.Key)
		case *ast.TableExpr:
			for _, f := range x.Fields {
				if f.Key != nil {
					f.Key = expr(f.Key)
				}
				f.Value = expr(f.Value)
			}
		case *ast.FuncCallExpr:
			if x.Func != nil {
				x.Func = expr(x.Func)
			}
			if x.Receiver != nil {
				x.Receiver = expr(x.Receiver)
			}
			exprs(x.Args)
		case *ast.LogicalOpExpr:
			x.Lhs, x.Rhs = expr(x.Lhs), expr(x.Rhs)
		case *ast.RelationalOpExpr:
			x.Lhs, x.Rhs = expr(x.Lhs), expr(x.Rhs)
		case *ast.ArithmeticOpExpr:
			x.Lhs, x.Rhs = expr(x.Lhs), expr(x.Rhs)
		case *ast.UnaryMinusOpExpr:
			x.Expr = expr(x.Expr)
		case *ast.UnaryNotOpExpr:
			x.Expr = expr(x.Expr)
		case *ast.UnaryLenOpExpr:
			x.Expr = expr(x.Expr)
		case *ast.FunctionExpr:
			stmts(x.Stmts)
		}
		return e
	}
	stmts = func(ss []ast.Stmt) {
		for _, s := range ss {
			switch s := s.(type) {
			case *ast.AssignStmt:
				exprs(s.Lhs)
				exprs(s.Rhs)
			case *ast.LocalAssignStmt:
				exprs(s.Exprs)
			case *ast.FuncCallStmt:
				s.Expr = expr(s.Expr)
			case *ast.DoBlockStmt:
				stmts(s.Stmts)
			case *ast.WhileStmt:
				s.Condition = expr(s.Condition)
				stmts(s.Stmts)
			case *ast.RepeatStmt:
				s.Condition = expr(s.Condition)
				stmts(s.Stmts)
			case *ast.IfStmt:
				s.Condition = expr(s.Condition)
				stmts(s.Then)
				stmts(s.Else)
			case *ast.NumberForStmt:
				s.Init, s.Limit = expr(s.Init), expr(s.Limit)
				if s.Step != nil {
					s.Step = expr(s.Step)
				}
				stmts(s.Stmts)
			case *ast.GenericForStmt:
				exprs(s.Exprs)
				stmts(s.Stmts)
			case *ast.FuncDefStmt:
				s.Func = expr(s.Func).(*ast.FunctionExpr)
			case *ast.ReturnStmt:
				exprs(s.Exprs)
			}
		}
	}
	stmts(chunk)
}
