package lua

import (
	"reflect"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// ReplyOrder is how a vote compares the elements of an array reply across
// backends.
type ReplyOrder uint8

const (
	// InOrder: element by element (the default, and the safe one: a reply
	// compared in order can disagree where it need not, never agree where
	// it should not).
	InOrder ReplyOrder = iota
	// AnyOrder: as a multiset. The reply of SMEMBERS, SINTER, SUNION,
	// SDIFF, HKEYS or HVALS: its order is the backend's hash table order,
	// which differs between masters holding the same members.
	AnyOrder
	// PairsAnyOrder: as field/value pairs in any order (HGETALL).
	PairsAnyOrder
)

// ReplyShape says how a vote compares a script's reply: Order for an array
// reply, and for an InOrder array built by a table constructor the shapes
// of its elements by position (Elems; later elements are InOrder).
type ReplyShape struct {
	Order ReplyOrder
	Elems []ReplyShape
}

// unorderedReplies are the allow-listed commands whose array reply has no
// order that two backends share.
var unorderedReplies = map[string]ReplyOrder{
	"SMEMBERS": AnyOrder, "SINTER": AnyOrder, "SUNION": AnyOrder, "SDIFF": AnyOrder,
	"HKEYS": AnyOrder, "HVALS": AnyOrder, "HGETALL": PairsAnyOrder,
}

// maxShapeDepth bounds following locals and nested tables.
const maxShapeDepth = 8

// replyShape is the shape of what the chunk returns, joined over its
// return statements (not those of functions it defines): an unordered
// command's reply returned directly, through a local bound once to it, or
// as an element of a returned table constructor. Anything else is InOrder.
func replyShape(chunk []ast.Stmt, r *resolver) ReplyShape {
	var out *ReplyShape
	returns(chunk, func(es []ast.Expr) {
		if len(es) == 0 {
			return
		}
		out = joinShapes(out, exprShape(es[0], r, 0))
	})
	if out == nil {
		return ReplyShape{}
	}
	return *out
}

// returns calls f with the values of each return statement of stmts and
// the blocks within them, not entering function bodies.
func returns(stmts []ast.Stmt, f func([]ast.Expr)) {
	for _, s := range stmts {
		switch s := s.(type) {
		case *ast.ReturnStmt:
			f(s.Exprs)
		case *ast.DoBlockStmt:
			returns(s.Stmts, f)
		case *ast.WhileStmt:
			returns(s.Stmts, f)
		case *ast.RepeatStmt:
			returns(s.Stmts, f)
		case *ast.IfStmt:
			returns(s.Then, f)
			returns(s.Else, f)
		case *ast.NumberForStmt:
			returns(s.Stmts, f)
		case *ast.GenericForStmt:
			returns(s.Stmts, f)
		}
	}
}

// exprShape is the shape of the value e yields, or nil when it is no
// array (a literal, nil) or an empty table, which any shape compares alike.
func exprShape(e ast.Expr, r *resolver, depth int) *ReplyShape {
	if depth > maxShapeDepth {
		return &ReplyShape{}
	}
	switch e := e.(type) {
	case *ast.NilExpr, *ast.FalseExpr, *ast.TrueExpr, *ast.NumberExpr, *ast.StringExpr:
		return nil
	case *ast.FuncCallExpr:
		if k := r.exprProv(e.Func).kind; (k == pCall || k == pPCall) && len(e.Args) > 0 {
			if p := r.exprProv(e.Args[0]); p.kind == pLit {
				return &ReplyShape{Order: unorderedReplies[strings.ToUpper(p.s)]}
			}
		}
	case *ast.IdentExpr:
		// A local bound once, to a call's reply (one bound to a table
		// may be filled later: in order).
		if b := r.uses[e]; b != nil && len(b.sources) == 1 && b.sources[0].kind == srcExpr && b.fn == nil {
			if c, ok := b.sources[0].expr.(*ast.FuncCallExpr); ok {
				return exprShape(c, r, depth+1)
			}
		}
	case *ast.TableExpr:
		if len(e.Fields) == 0 {
			return nil
		}
		out := &ReplyShape{}
		for i, f := range e.Fields {
			if f.Key != nil {
				return &ReplyShape{}
			}
			if s := exprShape(f.Value, r, depth+1); s != nil && !reflect.DeepEqual(*s, ReplyShape{}) {
				out.Elems = append(out.Elems, make([]ReplyShape, i+1-len(out.Elems))...)
				out.Elems[i] = *s
			}
		}
		return out
	}
	return &ReplyShape{}
}

// returnedCalls are the calls of stmts whose reply is returned by the
// chunk as it stands, as an element (at any depth) of a returned table
// constructor, or through a local bound once to it and used nowhere but
// there: the only places an unordered reply may be used.
func returnedCalls(stmts []ast.Stmt, r *resolver) map[*ast.FuncCallExpr]bool {
	out := map[*ast.FuncCallExpr]bool{}
	idents := map[*ast.IdentExpr]bool{}
	var mark func(e ast.Expr)
	mark = func(e ast.Expr) {
		switch e := e.(type) {
		case *ast.FuncCallExpr:
			out[e] = true
		case *ast.IdentExpr:
			idents[e] = true
		case *ast.TableExpr:
			for _, f := range e.Fields {
				if f.Key == nil {
					mark(f.Value)
				}
			}
		}
	}
	returns(stmts, func(es []ast.Expr) {
		for _, e := range es {
			mark(e)
		}
	})
	// A local whose every use is returned passes its call on.
	onlyReturned := map[*binding]bool{}
	for id, b := range r.uses {
		if seen, ok := onlyReturned[b]; !ok || seen {
			onlyReturned[b] = idents[id]
		}
	}
	for b, ok := range onlyReturned {
		if !ok || b == nil || len(b.sources) != 1 || b.sources[0].kind != srcExpr || b.fn != nil {
			continue
		}
		if c, isCall := b.sources[0].expr.(*ast.FuncCallExpr); isCall {
			out[c] = true
		}
	}
	return out
}

// joinShapes is a shape for a value that may be a or b: the same shape,
// or InOrder.
func joinShapes(a, b *ReplyShape) *ReplyShape {
	switch {
	case a == nil:
		return b
	case b == nil || reflect.DeepEqual(a, b):
		return a
	}
	return &ReplyShape{}
}
