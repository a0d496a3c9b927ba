package lua

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// A script by vote runs on every backend, and Redis never stops a script by
// itself: a loop that does not end holds every backend until SCRIPT KILL
// (the proxy sends it past script_timeout, redlock/scriptkill.go), and a
// script that already wrote cannot be killed. So every loop must have a
// bound the analysis sees:
//   - while and repeat loops are refused (their condition may never change);
//   - a numeric for loop's start and limit are each made of literals, #x
//     (bounded by what exists), and numbers from ARGV that CheckRun
//     requires to be at most loopArgMax on each run, added or subtracted
//     (through tonumber, math.floor, math.ceil, math.abs and locals that
//     only hold such values); its step is a non-zero literal; and with those
//     at their largest it makes at most loopMax turns;
//   - a for … in loop walks ipairs, pairs or next over a table it does not
//     add to, or string.gmatch;
//   - no function may call itself, directly or through others (calls the
//     analysis cannot follow may reach any function used as a value);
//   - and all the loops together make at most workMax turns (work.go):
//     loops nested in loops multiply, a function called in a loop turns
//     its loops as often. A table's length, and the turns of a for … in
//     loop, count as iterMax each; a script that walks or measures a table
//     that is not KEYS, ARGV or its own (a reply) gets the replies of its
//     redis.call capped at iterMax elements on the backends (CapsReplies),
//     so that what the count assumed holds when it runs.
//
// A script that already wrote cannot be killed, so this bound, not
// script_timeout, is what limits its run on every backend.
const (
	loopArgMax = 1_000_000 // largest ARGV number a loop bound may take
	iterMax    = 10_000    // turns of a for … in loop, and a table's length, as counted
	workMax    = 1_000_000 // most loop turns of a script, all loops together
)

// loopNumber is a number as Lua's tonumber reads it, restricted to plain
// decimal and hexadecimal integers (strtod also takes inf, nan and hex
// floats, which are no bound).
var loopNumber = regexp.MustCompile(`^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$|^\s*[-+]?0[xX][0-9a-fA-F]+\s*$`)

// loopArg is an ARGV element that bounds a loop.
type loopArg struct{ n, line int }

// checkLoopArgs checks the ARGV elements that bound loops.
func (v *Vote) checkLoopArgs(argv []string) *Problem {
	for _, a := range v.loopArgs {
		if a.n > len(argv) {
			continue // nil: the loop raises an error on the backend
		}
		s := argv[a.n-1]
		if f, ok := parseLoopNumber(s); !ok || math.Abs(f) > loopArgMax {
			return &Problem{Line: a.line, Reason: fmt.Sprintf("ARGV[%d] = %q bounds a loop; it must be a number of at most %d", a.n, s, loopArgMax)}
		}
	}
	return nil
}

func parseLoopNumber(s string) (float64, bool) {
	if !loopNumber.MatchString(s) {
		return 0, false
	}
	t := strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		return f, true
	}
	n, err := strconv.ParseInt(t, 0, 64)
	return float64(n), err == nil
}

// noBound is the reason for refusing a loop the analysis cannot bound.
func noBound(what string) string {
	return what + ": it could hold every backend; by vote, loop with for over literals, #x or ARGV numbers, or over ipairs, pairs or string.gmatch"
}

// loop checks that a loop statement has a bound.
func (c *checker) loop(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.WhileStmt:
		c.fail(s.Line(), "%s", noBound("a while loop has no bound the analysis can see"))
	case *ast.RepeatStmt:
		c.fail(s.Line(), "%s", noBound("a repeat loop has no bound the analysis can see"))
	case *ast.NumberForStmt:
		step := 1.0
		if s.Step != nil {
			v, ok := literalNumber(s.Step)
			if !ok || v == 0 {
				c.fail(s.Line(), "%s", noBound("the loop's step is not a non-zero number literal"))
				return
			}
			step = math.Abs(v)
		}
		from, ok1 := c.bound(s.Init)
		to, ok2 := c.bound(s.Limit)
		if !ok1 || !ok2 {
			c.fail(s.Line(), "%s", noBound("the loop's start or limit has no bound the analysis can see"))
			return
		}
		c.turns[s] = loopTurns{from: from, to: to, step: step}
	case *ast.GenericForStmt:
		t, turns, ok := c.iterated(s.Exprs)
		if !ok {
			c.fail(s.Line(), "%s", noBound("the loop's iterator is not ipairs, pairs, next or string.gmatch"))
			return
		}
		c.turns[s] = turns
		if t != nil && c.grows(s, t) {
			c.fail(s.Line(), "%s", noBound("the loop adds to the table it walks"))
		}
	}
}

// loopTurns is the most turns of a numeric for loop.
type loopTurns struct {
	from, to bexpr
	step     float64
}

func (t loopTurns) eval(a *runArgs) float64 {
	return math.Floor((t.from.eval(a)+t.to.eval(a))/t.step) + 1
}

// literalNumber reads a number literal, possibly negated.
func literalNumber(e ast.Expr) (float64, bool) {
	switch e := e.(type) {
	case *ast.NumberExpr:
		if f, err := strconv.ParseFloat(e.Value, 64); err == nil {
			return f, true
		}
		n, err := strconv.ParseInt(e.Value, 0, 64)
		return float64(n), err == nil
	case *ast.UnaryMinusOpExpr:
		f, ok := literalNumber(e.Expr)
		return -f, ok
	}
	return 0, false
}

// boundOf is a local's bound, once worked out (busy while it is).
type boundOf struct {
	v        bexpr
	ok, busy bool
}

// A bexpr is the largest absolute value a loop bound (or a loop's turns)
// may take, as a formula of what a run brings: the ARGV numbers it reads
// and the lengths of KEYS and ARGV. The analysis evaluates it at the
// largest (runArgs.worst), each run with its own (Vote.CheckRun).
type bexpr interface {
	eval(a *runArgs) float64
}

// runArgs is what a run brings to the count.
type runArgs struct {
	num        func(n int) float64 // |ARGV[n]| as a number
	keys, argv float64             // #KEYS, #ARGV
}

// worstArgs is every ARGV number at loopArgMax and KEYS and ARGV of
// iterMax elements; zeroArgs is nothing at all.
var (
	worstArgs = &runArgs{num: func(int) float64 { return loopArgMax }, keys: iterMax, argv: iterMax}
	zeroArgs  = &runArgs{num: func(int) float64 { return 0 }}
)

type (
	bConst float64  // a literal, or the length of a table (iterMax)
	bArg   int      // |ARGV[n]|
	bLen   provKind // #KEYS (pKeys) or #ARGV (pArgv)
	bSum   [2]bexpr
	bMax   []bexpr // a local that may hold any of them
)

func (b bConst) eval(*runArgs) float64 { return float64(b) }
func (b bArg) eval(a *runArgs) float64 { return a.num(int(b)) }
func (b bSum) eval(a *runArgs) float64 { return b[0].eval(a) + b[1].eval(a) }
func (b bLen) eval(a *runArgs) float64 {
	if provKind(b) == pKeys {
		return a.keys
	}
	return a.argv
}
func (b bMax) eval(a *runArgs) float64 {
	m := 0.0
	for _, e := range b {
		m = max(m, e.eval(a))
	}
	return m
}

// lengthOf is the bound of #t, or of the turns of a loop over t.
func (c *checker) lengthOf(t ast.Expr) bexpr {
	c.walksData(t)
	switch k := c.r.exprProv(t).kind; k {
	case pKeys, pArgv:
		return bLen(k)
	}
	return bConst(iterMax)
}

// bound is the largest absolute value e may take as a loop bound (a length
// counts iterMax), or false. ARGV elements it reads are noted for
// CheckRun.
func (c *checker) bound(e ast.Expr) (bexpr, bool) {
	if v, ok := literalNumber(e); ok {
		return bConst(math.Abs(v)), true
	}
	switch e := e.(type) {
	case *ast.UnaryLenOpExpr:
		return c.lengthOf(e.Expr), true
	case *ast.UnaryMinusOpExpr:
		return c.bound(e.Expr)
	case *ast.ArithmeticOpExpr:
		if e.Operator != "+" && e.Operator != "-" {
			return nil, false
		}
		l, ok1 := c.bound(e.Lhs)
		r, ok2 := c.bound(e.Rhs)
		return bSum{l, r}, ok1 && ok2
	case *ast.AttrGetExpr:
		if p := c.r.exprProv(e); p.kind == pArg {
			c.vote.loopArgs = append(c.vote.loopArgs, loopArg{n: p.n, line: c.line})
			return bArg(p.n), true
		}
	case *ast.FuncCallExpr:
		if len(e.Args) != 1 {
			return nil, false
		}
		if c.r.global(e.Func, "tonumber") || c.libCall(e.Func, "math", "floor", "abs") {
			return c.bound(e.Args[0])
		}
		if c.libCall(e.Func, "math", "ceil") {
			v, ok := c.bound(e.Args[0])
			return bSum{v, bConst(1)}, ok
		}
	case *ast.IdentExpr:
		if b := c.r.uses[e]; b != nil {
			return c.localBound(b)
		}
	}
	return nil, false
}

// localBound is the bound of every value a local may hold (none when it
// depends on itself: n = n + 1).
func (c *checker) localBound(b *binding) (bexpr, bool) {
	if m := c.bounds[b]; m != nil {
		return m.v, m.ok && !m.busy
	}
	m := &boundOf{busy: true}
	c.bounds[b] = m
	defer func() { m.busy = false }()
	if b.anon || (b.owner != nil && b.owner.escaped) {
		return nil, false // a parameter of a function called from anywhere
	}
	srcs := slices.Clone(b.forRange)
	for i, s := range b.sources {
		switch {
		case i == 0 && b.forRange != nil:
			// the loop's own srcOther
		case s.kind != srcExpr:
			return nil, false
		default:
			srcs = append(srcs, s.expr)
		}
	}
	var all bMax
	for _, s := range srcs {
		v, ok := c.bound(s)
		if !ok {
			return nil, false
		}
		all = append(all, v)
	}
	m.v, m.ok = all, len(srcs) > 0
	return m.v, m.ok
}

// libCall reports whether f is lib.name (for one of names) of the global
// library lib.
func (c *checker) libCall(f ast.Expr, lib string, names ...string) bool {
	a, ok := f.(*ast.AttrGetExpr)
	if !ok || !c.r.global(a.Object, lib) {
		return false
	}
	k, ok := a.Key.(*ast.StringExpr)
	if !ok {
		return false
	}
	for _, n := range names {
		if k.Value == n {
			return true
		}
	}
	return false
}

// iterated checks a for … in loop's iterator: ipairs(t), pairs(t), next, t
// or string.gmatch. It returns t's local binding, when there is one, and
// the loop's most turns.
func (c *checker) iterated(es []ast.Expr) (*binding, bexpr, bool) {
	var t ast.Expr
	switch {
	case len(es) == 1:
		call, ok := es[0].(*ast.FuncCallExpr)
		switch {
		case !ok:
			return nil, nil, false
		case call.Func == nil: // s:gmatch(p), on a string (not a table's own gmatch)
			k := c.r.exprProv(call.Receiver).kind
			c.vote.CapsReplies = true // a string from a reply: as long as the data
			return nil, bConst(iterMax), call.Method == "gmatch" && (k == pArg || k == pLit || k == pKey || k == pDerived)
		case c.libCall(call.Func, "string", "gmatch"):
			c.vote.CapsReplies = true
			return nil, bConst(iterMax), true
		case (c.r.global(call.Func, "ipairs") || c.r.global(call.Func, "pairs")) && len(call.Args) == 1:
			t = call.Args[0]
		default:
			return nil, nil, false
		}
	case len(es) == 2 || len(es) == 3:
		if !c.r.global(es[0], "next") {
			return nil, nil, false
		}
		t = es[1]
	default:
		return nil, nil, false
	}
	return c.local(t), c.lengthOf(t), true
}

// walksData notes a table walked or measured: unless it is KEYS, ARGV or a
// table the script built, it may be a reply, whose length the backends
// must then cap (Vote.CapsReplies).
func (c *checker) walksData(t ast.Expr) {
	switch c.r.exprProv(t).kind {
	case pKeys, pArgv, pLit:
	default:
		if _, built := t.(*ast.TableExpr); !built {
			c.vote.CapsReplies = true
		}
	}
}

// grows reports whether the body of loop may add to the table held by t:
// an assignment to t[…] (but to t[k] for the loop's own key k, which
// changes a field that exists), or t passed to table.insert or rawset.
// (Through another name the analysis does not see it.)
func (c *checker) grows(loop *ast.GenericForStmt, t *binding) bool {
	ownKey := func(e ast.Expr) bool {
		id, ok := e.(*ast.IdentExpr)
		b := c.r.uses[id]
		return ok && b != nil && b.name == loop.Names[0] && len(b.sources) == 1 && b.sources[0].kind == srcOther
	}
	found := false
	walk(loop.Stmts, func(n any) {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if a, ok := l.(*ast.AttrGetExpr); ok && c.local(a.Object) == t && !ownKey(a.Key) {
					found = true
				}
			}
		case *ast.FuncCallExpr:
			if (c.libCall(n.Func, "table", "insert") || c.r.global(n.Func, "rawset")) &&
				len(n.Args) > 0 && c.local(n.Args[0]) == t {
				found = true
			}
		}
	})
	return found
}

// libraries are the globals whose functions call no function of the
// script, but the ones passed to them (pcall(f), table.sort(t, f),
// string.gsub(s, p, f)).
var libraries = map[string]bool{
	"string": true, "table": true, "math": true, "redis": true, "cjson": true, "cmsgpack": true,
	"struct": true, "bit": true, "tonumber": true, "tostring": true, "type": true, "ipairs": true,
	"pairs": true, "next": true, "unpack": true, "select": true, "error": true, "assert": true,
	"pcall": true, "xpcall": true, "rawget": true, "rawset": true, "rawequal": true, "print": true,
}

// recursion returns the line of a call through which a function of the
// script may call itself, or 0. Each function's calls lead to the local
// functions they name, to the functions passed to a library (a string's
// methods are string's functions: rewriteMethods), and, for a call the
// analysis cannot follow (through a table field, a parameter, any other
// method), to every function used as a value. With a metatable, any
// operation may call one of those.
func recursion(chunk []ast.Stmt, r *resolver) int {
	type edge struct {
		to   *ast.FunctionExpr // nil: any function used as a value
		line int
	}
	var unknown ast.FunctionExpr // stands for "any function used as a value"
	edges := map[*ast.FunctionExpr][]edge{}
	order := []*ast.FunctionExpr{&unknown} // the nodes, in the source's order
	var escaped []*ast.FunctionExpr
	named := func(e ast.Expr) *ast.FunctionExpr {
		switch e := e.(type) {
		case *ast.FunctionExpr:
			return e
		case *ast.IdentExpr:
			if b := r.uses[e]; b != nil && b.fn != nil && len(b.sources) == 1 {
				return b.fn
			}
		}
		return nil
	}
	metatables := false // setmetatable is reached: any operation may call a function
	walk(chunk, func(n any) {
		if id, ok := n.(*ast.IdentExpr); ok && id.Value == "setmetatable" && r.uses[id] == nil {
			metatables = true
		}
	})
	// calls adds the edges of one function's body (main: the chunk).
	calls := func(from *ast.FunctionExpr, body []ast.Stmt) {
		walkTree(body, func(n any, _ int) (ast.Expr, action) {
			switch n := n.(type) {
			case *ast.FunctionExpr:
				if b := r.fnOf[n]; b == nil || b.escaped || len(b.sources) != 1 {
					escaped = append(escaped, n)
				}
				return nil, walkSkip // its own calls are its own
			case *ast.FuncCallExpr:
				lib := false
				switch f := n.Func.(type) {
				case *ast.IdentExpr:
					lib = r.uses[f] == nil && libraries[f.Value]
				case *ast.AttrGetExpr:
					id, ok := f.Object.(*ast.IdentExpr)
					lib = ok && r.uses[id] == nil && libraries[id.Value]
				}
				switch fn := named(n.Func); {
				case fn != nil:
					edges[from] = append(edges[from], edge{fn, n.Line()})
				case lib:
					for i, a := range n.Args {
						if fn := named(a); fn != nil {
							edges[from] = append(edges[from], edge{fn, n.Line()})
						} else if callsArg(n, i) {
							edges[from] = append(edges[from], edge{&unknown, n.Line()})
						}
					}
				default:
					edges[from] = append(edges[from], edge{&unknown, n.Line()})
				}
			}
			return nil, walkOn
		})
	}
	calls(nil, chunk)
	walk(chunk, func(n any) {
		if fn, ok := n.(*ast.FunctionExpr); ok {
			order = append(order, fn)
			calls(fn, fn.Stmts)
			if metatables {
				edges[fn] = append(edges[fn], edge{&unknown, fn.Line()})
			}
		}
	})
	for _, fn := range escaped {
		edges[&unknown] = append(edges[&unknown], edge{fn, fn.Line()})
	}
	// A depth-first search for a cycle: state 1 on the path, 2 done.
	state := map[*ast.FunctionExpr]int{}
	var visit func(fn *ast.FunctionExpr) int
	visit = func(fn *ast.FunctionExpr) int {
		state[fn] = 1
		for _, e := range edges[fn] {
			switch state[e.to] {
			case 1:
				return e.line
			case 0:
				if line := visit(e.to); line != 0 {
					return line
				}
			}
		}
		state[fn] = 2
		return 0
	}
	for _, fn := range order {
		if state[fn] == 0 {
			if line := visit(fn); line != 0 {
				return line
			}
		}
	}
	return 0
}

// callsArg reports whether the library call n calls its i-th argument when
// that is a function: pcall's and xpcall's function, xpcall's handler,
// table.sort's comparison, gsub's replacement, table.foreach's.
func callsArg(n *ast.FuncCallExpr, i int) bool {
	name := n.Method
	switch f := n.Func.(type) {
	case *ast.IdentExpr:
		name = f.Value
	case *ast.AttrGetExpr:
		if k, ok := f.Key.(*ast.StringExpr); ok {
			name = k.Value
		}
	}
	switch name {
	case "pcall":
		return i == 0
	case "xpcall":
		return i <= 1
	case "sort", "foreach", "foreachi":
		return i == 1
	case "gsub":
		return i == 2 || n.Method != "" && i == 1
	}
	return false
}
