package lua

import (
	"strconv"

	"github.com/yuin/gopher-lua/ast"
)

// The static pass resolves every name to its declaration (a binding) and
// works out where each value may come from (its provenance): a declared key,
// a key built by concatenation, the KEYS or ARGV tables, ARGV[n], a literal,
// the redis table or redis.call itself. A binding's provenance is the meet
// of everything assigned to it anywhere in its scope, so the result holds
// on every path through the script (flow-insensitive, hence conservative).

// provKind is the kind of a provenance.
type provKind uint8

const (
	pNone    provKind = iota // nothing yet, or nil/false
	pKey                     // an element of KEYS
	pDerived                 // a string concatenated from an element of KEYS and other values (s: a literal before it)
	pOther                   // anything else
	pKeys                    // the KEYS table
	pArgv                    // the ARGV table
	pArg                     // ARGV[n] for a literal n
	pLit                     // a string or number literal
	pRedis                   // the redis table
	pCall                    // redis.call
	pPCall                   // redis.pcall
	pFunc                    // a function expression
)

// prov is where a value may come from.
type prov struct {
	kind provKind
	n    int               // pArg: the ARGV index
	s    string            // pLit: the literal's text; pDerived: the literal the built key starts with
	fn   *ast.FunctionExpr // pFunc
}

func (p prov) keyish() bool { return p.kind == pKey || p.kind == pDerived }

// meet is the provenance of a value that may come from a or from b.
func meet(a, b prov) prov {
	switch {
	case a.kind == pNone:
		return b
	case b.kind == pNone || a == b:
		return a
	case a.keyish() && b.keyish() && a.s == b.s:
		return prov{kind: pDerived, s: a.s}
	}
	return prov{kind: pOther}
}

// sourceKind says how a value flows into a binding.
type sourceKind uint8

const (
	srcExpr   sourceKind = iota // the (first) value of expr
	srcSpread                   // a later value of a multi-value expr (unpack(KEYS))
	srcElem                     // an element of the table expr, in a pairs/ipairs loop
	srcOther                    // something the analysis does not follow
)

type source struct {
	kind sourceKind
	expr ast.Expr
}

// binding is one declared local (or parameter, or loop variable).
type binding struct {
	name    string
	prov    prov
	sources []source
	owner   *binding // a parameter's function binding, or nil
	anon    bool     // a parameter of a function not bound to a local
	fn      *ast.FunctionExpr
	params  []*binding
	escaped bool // the function is used other than by calling it by name
	// forRange: a numeric for loop's variable, between these two values
	// (and whatever the body assigns to it).
	forRange []ast.Expr
}

// resolver is the first pass: scopes, bindings, uses, direct calls.
type resolver struct {
	scopes   []map[string]*binding
	uses     map[*ast.IdentExpr]*binding
	bindings []*binding
	fnOf     map[*ast.FunctionExpr]*binding
	method   map[*ast.FunctionExpr]bool
	decls    map[*ast.LocalAssignStmt][]*binding
}

func newResolver() *resolver {
	return &resolver{uses: map[*ast.IdentExpr]*binding{}, fnOf: map[*ast.FunctionExpr]*binding{},
		method: map[*ast.FunctionExpr]bool{}, decls: map[*ast.LocalAssignStmt][]*binding{}}
}

func (r *resolver) push() { r.scopes = append(r.scopes, map[string]*binding{}) }
func (r *resolver) pop()  { r.scopes = r.scopes[:len(r.scopes)-1] }

func (r *resolver) declare(name string, srcs ...source) *binding {
	b := &binding{name: name, sources: srcs}
	r.scopes[len(r.scopes)-1][name] = b
	r.bindings = append(r.bindings, b)
	return b
}

func (r *resolver) lookup(name string) *binding {
	for i := len(r.scopes) - 1; i >= 0; i-- {
		if b := r.scopes[i][name]; b != nil {
			return b
		}
	}
	return nil
}

// global reports whether e names the global name (not shadowed by a local).
func (r *resolver) global(e ast.Expr, name string) bool {
	id, ok := e.(*ast.IdentExpr)
	return ok && id.Value == name && r.uses[id] == nil
}

// multi reports whether e yields every value it has (a call or ... last in
// a list, not in parentheses).
func multi(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.FuncCallExpr:
		return !e.AdjustRet
	case *ast.Comma3Expr:
		return !e.AdjustRet
	}
	return false
}

// listSources says what flows into n names from the expression list es.
func listSources(n int, es []ast.Expr) [][]source {
	out := make([][]source, n)
	for i := 0; i < n; i++ {
		switch {
		case i < len(es)-1 || (i == len(es)-1 && !multi(es[i])):
			out[i] = []source{{kind: srcExpr, expr: es[i]}}
		case len(es) > 0 && multi(es[len(es)-1]):
			k := srcSpread
			if i == len(es)-1 {
				k = srcExpr
			}
			out[i] = []source{{kind: k, expr: es[len(es)-1]}}
		}
	}
	return out
}

func (r *resolver) block(stmts []ast.Stmt) {
	r.push()
	r.stmts(stmts)
	r.pop()
}

func (r *resolver) stmts(stmts []ast.Stmt) {
	for _, s := range stmts {
		r.stmt(s)
	}
}

func (r *resolver) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.LocalAssignStmt:
		if len(s.Names) == 1 && len(s.Exprs) == 1 {
			if fn, ok := s.Exprs[0].(*ast.FunctionExpr); ok {
				// gopher-lua (like `local function`) makes the name visible
				// inside the body.
				b := r.declare(s.Names[0], source{kind: srcExpr, expr: fn})
				r.decls[s] = []*binding{b}
				b.fn = fn
				r.fnOf[fn] = b
				r.expr(fn, false)
				return
			}
		}
		r.exprs(s.Exprs)
		srcs := listSources(len(s.Names), s.Exprs)
		for i, name := range s.Names {
			r.decls[s] = append(r.decls[s], r.declare(name, srcs[i]...))
		}
	case *ast.AssignStmt:
		r.exprs(s.Rhs)
		srcs := listSources(len(s.Lhs), s.Rhs)
		for i, lhs := range s.Lhs {
			r.target(lhs, srcs[i])
		}
	case *ast.FuncCallStmt:
		r.expr(s.Expr, false)
	case *ast.DoBlockStmt:
		r.block(s.Stmts)
	case *ast.WhileStmt:
		r.expr(s.Condition, false)
		r.block(s.Stmts)
	case *ast.RepeatStmt:
		r.push()
		r.stmts(s.Stmts)
		r.expr(s.Condition, false)
		r.pop()
	case *ast.IfStmt:
		r.expr(s.Condition, false)
		r.block(s.Then)
		r.block(s.Else)
	case *ast.NumberForStmt:
		r.expr(s.Init, false)
		r.expr(s.Limit, false)
		if s.Step != nil {
			r.expr(s.Step, false)
		}
		r.push()
		r.declare(s.Name, source{kind: srcOther}).forRange = []ast.Expr{s.Init, s.Limit}
		r.stmts(s.Stmts)
		r.pop()
	case *ast.GenericForStmt:
		r.exprs(s.Exprs)
		var elem []source
		if len(s.Exprs) == 1 {
			if c, ok := s.Exprs[0].(*ast.FuncCallExpr); ok && len(c.Args) == 1 &&
				(r.global(c.Func, "ipairs") || r.global(c.Func, "pairs")) {
				elem = []source{{kind: srcElem, expr: c.Args[0]}}
			}
		}
		r.push()
		for i, name := range s.Names {
			if i == 1 && elem != nil {
				r.declare(name, elem...)
			} else {
				r.declare(name, source{kind: srcOther})
			}
		}
		r.stmts(s.Stmts)
		r.pop()
	case *ast.FuncDefStmt:
		if s.Name.Func != nil {
			r.target(s.Name.Func, []source{{kind: srcExpr, expr: s.Func}})
		} else {
			r.expr(s.Name.Receiver, false)
		}
		if s.Name.Receiver != nil {
			r.method[s.Func] = true // function t:m() has a first parameter, self
		}
		r.expr(s.Func, false)
	case *ast.ReturnStmt:
		r.exprs(s.Exprs)
	}
}

// target resolves an assignment target and records what flows into it.
func (r *resolver) target(e ast.Expr, srcs []source) {
	switch e := e.(type) {
	case *ast.IdentExpr:
		b := r.lookup(e.Value)
		r.uses[e] = b
		if b != nil {
			b.sources = append(b.sources, srcs...)
		}
	default:
		r.expr(e, false)
	}
}

func (r *resolver) exprs(es []ast.Expr) {
	for _, e := range es {
		r.expr(e, false)
	}
}

func (r *resolver) expr(e ast.Expr, callee bool) {
	switch e := e.(type) {
	case *ast.IdentExpr:
		b := r.lookup(e.Value)
		r.uses[e] = b
		if b != nil && b.fn != nil && !callee {
			b.escaped = true
		}
	case *ast.AttrGetExpr:
		r.expr(e.Object, false)
		r.expr(e.Key, false)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			if f.Key != nil {
				r.expr(f.Key, false)
			}
			r.expr(f.Value, false)
		}
	case *ast.FuncCallExpr:
		if e.Func != nil {
			r.expr(e.Func, true)
		} else {
			r.expr(e.Receiver, false)
		}
		r.exprs(e.Args)
		if id, ok := e.Func.(*ast.IdentExpr); ok {
			if b := r.uses[id]; b != nil && b.fn != nil {
				srcs := listSources(len(b.params), e.Args)
				for i, p := range b.params {
					p.sources = append(p.sources, srcs[i]...)
				}
			}
		}
	case *ast.LogicalOpExpr, *ast.RelationalOpExpr, *ast.StringConcatOpExpr, *ast.ArithmeticOpExpr,
		*ast.UnaryMinusOpExpr, *ast.UnaryNotOpExpr, *ast.UnaryLenOpExpr:
		for _, o := range operands(e) {
			r.expr(*o, false)
		}
	case *ast.FunctionExpr:
		owner := r.fnOf[e]
		r.push()
		names := e.ParList.Names
		if r.method[e] {
			names = append([]string{"self"}, names...)
		}
		for _, name := range names {
			p := r.declare(name)
			if owner != nil {
				p.owner = owner
				owner.params = append(owner.params, p)
			} else {
				p.anon = true
			}
		}
		r.stmts(e.Stmts)
		r.pop()
	}
}

// exprProv is the provenance of e's first value, given the bindings'
// current provenances.
func (r *resolver) exprProv(e ast.Expr) prov {
	switch e := e.(type) {
	case *ast.NilExpr, *ast.FalseExpr:
		return prov{kind: pNone}
	case *ast.NumberExpr:
		return prov{kind: pLit, s: e.Value}
	case *ast.StringExpr:
		return prov{kind: pLit, s: e.Value}
	case *ast.IdentExpr:
		if b := r.uses[e]; b != nil {
			return b.prov
		}
		switch e.Value {
		case "KEYS":
			return prov{kind: pKeys}
		case "ARGV":
			return prov{kind: pArgv}
		case "redis":
			return prov{kind: pRedis}
		}
	case *ast.AttrGetExpr:
		switch obj := r.exprProv(e.Object); obj.kind {
		case pKeys:
			return prov{kind: pKey}
		case pArgv:
			if n, ok := argIndex(e.Key); ok {
				return prov{kind: pArg, n: n}
			}
		case pRedis:
			if k, ok := e.Key.(*ast.StringExpr); ok {
				switch k.Value {
				case "call":
					return prov{kind: pCall}
				case "pcall":
					return prov{kind: pPCall}
				}
			}
		}
	case *ast.FuncCallExpr:
		return r.spreadProv(e)
	case *ast.LogicalOpExpr:
		if e.Operator == "and" {
			// x and y is y, or x when x is nil or false (never a key).
			return r.exprProv(e.Rhs)
		}
		return meet(r.exprProv(e.Lhs), r.exprProv(e.Rhs))
	case *ast.StringConcatOpExpr:
		// A built key starts with a declared key (KEYS[2] .. ':' .. id),
		// or with a string literal and then one ('{' .. KEYS[1] .. '}', a
		// hash tag): the literal is kept, so that the users' key patterns
		// and the proxy's reserved keys are checked at run time on the
		// literal followed by the declared key. Anything else before the
		// declared key ('x' .. ARGV[1] .. KEYS[1]) is not a key. (.. is
		// right-associative: 'a' .. KEYS[1] .. 'b' is 'a' .. (KEYS[1] .. 'b').)
		l, rr := r.exprProv(e.Lhs), r.exprProv(e.Rhs)
		switch {
		case l.keyish():
			return prov{kind: pDerived, s: l.s}
		case l.kind == pLit && rr.keyish():
			return prov{kind: pDerived, s: l.s + rr.s}
		case l.kind == pNone && rr.kind == pNone:
			return prov{kind: pNone}
		}
	case *ast.FunctionExpr:
		return prov{kind: pFunc, fn: e}
	}
	return prov{kind: pOther}
}

// spreadProv is the provenance of every value of a multi-value expression:
// unpack(KEYS) yields keys, anything else is not followed.
func (r *resolver) spreadProv(e ast.Expr) prov {
	if c, ok := e.(*ast.FuncCallExpr); ok && len(c.Args) >= 1 && r.global(c.Func, "unpack") &&
		r.exprProv(c.Args[0]).kind == pKeys {
		return prov{kind: pKey}
	}
	return prov{kind: pOther}
}

func (r *resolver) sourceProv(s source) prov {
	switch s.kind {
	case srcExpr:
		return r.exprProv(s.expr)
	case srcSpread:
		return r.spreadProv(s.expr)
	case srcElem:
		if r.exprProv(s.expr).kind == pKeys {
			return prov{kind: pKey}
		}
	}
	return prov{kind: pOther}
}

func (r *resolver) bindingProv(b *binding) prov {
	if b.anon || (b.owner != nil && b.owner.escaped) {
		return prov{kind: pOther}
	}
	p := prov{kind: pNone}
	for _, s := range b.sources {
		p = meet(p, r.sourceProv(s))
	}
	return p
}

// solve computes every binding's provenance. Assignments can refer to each
// other in any order, so it iterates; after a few rounds it only lets
// provenances move up the lattice, which makes it end.
func (r *resolver) solve() {
	for round := 0; round < 64; round++ {
		changed := false
		for _, b := range r.bindings {
			p := r.bindingProv(b)
			if round >= 8 {
				p = meet(b.prov, p)
			}
			if p != b.prov {
				b.prov = p
				changed = true
			}
		}
		if !changed {
			return
		}
	}
	for _, b := range r.bindings { // not settled: follow nothing
		b.prov = prov{kind: pOther}
	}
}

// argIndex reads a literal positive integer index such as the 2 of ARGV[2].
func argIndex(e ast.Expr) (int, bool) {
	n, ok := e.(*ast.NumberExpr)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || f < 1 || f > 1<<20 || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}
