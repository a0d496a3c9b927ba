package lua

import (
	"fmt"

	"github.com/yuin/gopher-lua/ast"
)

// ReplyCap is the most elements a redis.call reply may have in a script
// that walks or measures replies (Vote.CapsReplies): what the analysis
// counts a for … in loop's turns and a table's length as.
const ReplyCap = iterMax

// The work of a script is the most loop turns it may make in all: each
// loop's turns (checker.turns: its bound, or iterMax for a for … in)
// times the turns of the loops around it, and each call of a function of
// the script counted as that function's own work times the turns of the
// loops it is made in. A call the analysis cannot follow counts as the
// costliest function used as a value (as recursion reads such calls); a
// function passed to a library counts once per call for pcall and xpcall,
// and as often as iterMax elements make it called for the others
// (table.sort's comparator, string.gsub's replacement). With a metatable,
// any turn may call the costliest function once more. Recursion is
// refused before this runs, so every count ends.

// sortCalls is how often table.sort or string.gsub may call the function
// passed to them, over iterMax elements (n log2 n for the sort).
const sortCalls = iterMax * 14

// workShape is what the work of a script is counted from, made once by
// the analysis and read by every run's check (Vote.CheckRun, when the
// count depends on ARGV numbers).
type workShape struct {
	chunk      []ast.Stmt
	r          *resolver
	turns      map[ast.Stmt]bexpr
	escaped    []*ast.FunctionExpr // functions used as values
	metatables bool
}

func newWorkShape(chunk []ast.Stmt, r *resolver, turns map[ast.Stmt]bexpr) *workShape {
	ws := &workShape{chunk: chunk, r: r, turns: turns}
	walk(chunk, func(n any) {
		switch n := n.(type) {
		case *ast.FunctionExpr:
			if b := r.fnOf[n]; b == nil || b.escaped || len(b.sources) != 1 {
				ws.escaped = append(ws.escaped, n)
			}
		case *ast.IdentExpr:
			if n.Value == "setmetatable" && r.uses[n] == nil {
				ws.metatables = true
			}
		}
	})
	return ws
}

// check counts the work with what a brings, and refuses more
// than workMax at the loop where the count passed it.
func (ws *workShape) check(a *runArgs) *Problem {
	w := &workCount{workShape: ws, args: a, fn: map[*ast.FunctionExpr]float64{}}
	if w.stmts(ws.chunk, 1) <= workMax {
		return nil
	}
	return &Problem{Line: w.line, Reason: fmt.Sprintf("the script's loops may turn more than %d times in all (loops nested in loops multiply, and so do calls of functions that loop), which would hold every backend", workMax)}
}

// workCount is one count of a script's work.
type workCount struct {
	*workShape
	args *runArgs
	fn   map[*ast.FunctionExpr]float64 // each function's work, once counted
	line int                           // where the count first passed workMax
}

// note adds n turns of the loop on line to total, recording the line
// where the count first passes workMax.
func (w *workCount) note(total *float64, n float64, line int) {
	*total += n
	if *total > workMax && w.line == 0 {
		w.line = line
	}
}

// stmts is the work of running stmts m times.
func (w *workCount) stmts(stmts []ast.Stmt, m float64) float64 {
	total := 0.0
	walkTree(stmts, func(n any, _ int) (ast.Expr, action) {
		switch n := n.(type) {
		case *ast.FunctionExpr:
			return nil, walkSkip // defined, not run
		case *ast.NumberForStmt:
			k := w.turns[n].eval(w.args)
			w.note(&total, m*k, n.Line())
			total += w.exprs([]ast.Expr{n.Init, n.Limit, n.Step}, m)
			total += w.body(n.Stmts, m*k, n.Line())
			return nil, walkSkip
		case *ast.GenericForStmt:
			k := w.turns[n].eval(w.args)
			w.note(&total, m*k, n.Line())
			total += w.exprs(n.Exprs, m)
			total += w.body(n.Stmts, m*k, n.Line())
			return nil, walkSkip
		case *ast.FuncCallExpr:
			w.note(&total, m*w.callee(n), n.Line())
		}
		return nil, walkOn
	})
	return total
}

// body is the work of a loop's body run m times (with a metatable, each
// turn may call the costliest function once more).
func (w *workCount) body(stmts []ast.Stmt, m float64, line int) float64 {
	total := w.stmts(stmts, m)
	if w.metatables {
		w.note(&total, m*w.anyFunction(), line)
	}
	return total
}

// exprs is the work of evaluating es m times (the calls in them).
func (w *workCount) exprs(es []ast.Expr, m float64) float64 {
	var stmts []ast.Stmt
	for _, e := range es {
		if e != nil {
			stmts = append(stmts, &ast.ReturnStmt{Exprs: []ast.Expr{e}})
		}
	}
	return w.stmts(stmts, m)
}

// callee is the work of one call: of the function called, when it is one
// of the script's, or of the functions a library is given.
func (w *workCount) callee(call *ast.FuncCallExpr) float64 {
	if fn := w.named(call.Func); fn != nil {
		return w.function(fn)
	}
	lib, name := w.library(call.Func)
	if !lib {
		return w.anyFunction() // through a field, a parameter, a method
	}
	work := 0.0
	for _, a := range call.Args {
		if fn := w.named(a); fn != nil {
			times := float64(sortCalls)
			if name == "pcall" || name == "xpcall" {
				times = 1
			}
			work += times * w.function(fn)
		}
	}
	return work
}

// function is fn's work when called once.
func (w *workCount) function(fn *ast.FunctionExpr) float64 {
	if v, ok := w.fn[fn]; ok {
		return v
	}
	w.fn[fn] = 0 // a cycle would be recursion, refused before
	v := w.stmts(fn.Stmts, 1)
	w.fn[fn] = v
	return v
}

// anyFunction is the work of the costliest function used as a value.
func (w *workCount) anyFunction() float64 {
	most := 0.0
	for _, fn := range w.escaped {
		most = max(most, w.function(fn))
	}
	return most
}

// named is the script's function that e names, as recursion reads it.
func (w *workCount) named(e ast.Expr) *ast.FunctionExpr {
	switch e := e.(type) {
	case *ast.FunctionExpr:
		return e
	case *ast.IdentExpr:
		if b := w.r.uses[e]; b != nil && b.fn != nil && len(b.sources) == 1 {
			return b.fn
		}
	}
	return nil
}

// library reports a call of a global library function (pcall,
// table.sort, redis.call …), with its name.
func (w *workCount) library(f ast.Expr) (bool, string) {
	switch f := f.(type) {
	case *ast.IdentExpr:
		return w.r.uses[f] == nil && libraries[f.Value], f.Value
	case *ast.AttrGetExpr:
		id, ok := f.Object.(*ast.IdentExpr)
		k, _ := f.Key.(*ast.StringExpr)
		name := ""
		if k != nil {
			name = k.Value
		}
		return ok && w.r.uses[id] == nil && libraries[id.Value], name
	}
	return false, ""
}
