package lua

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// facts are what the static pass learnt for recognition.
type facts struct {
	argvMax     int             // highest literal ARGV index read
	keysMax     int             // highest literal KEYS index read
	argvDynamic bool            // ARGV read other than by a literal index
	compared    []lit           // literals compared with something, first seen first
	literals    []lit           // the other literals
	commands    map[string]bool // literal command names, upper case
}

// lit is a literal of the script: a string, or a number's text.
type lit struct {
	s   string
	num bool
}

// checker is the second pass: the vote rules.
type checker struct {
	r       *resolver
	problem *Problem
	vote    *Vote
	facts   facts
	line    int         // of the statement being checked
	seen    map[lit]int // 1 seen, 2 seen compared
	bounds  map[*binding]*boundOf
	turns   map[ast.Stmt]bexpr // each for loop's most turns (loops.go)
	// returned are the calls whose reply is the script's own reply, as
	// it stands or as an element of a returned table (returnedCalls).
	returned map[*ast.FuncCallExpr]bool
}

// ctxKind is where an expression's value goes.
type ctxKind uint8

const (
	cValue   ctxKind = iota // anywhere
	cCallee                 // f in f(…)
	cIndexed                // t in t[k], read
	cTarget                 // t in t[k] = v
	cLen                    // #t
	cReadArg                // the table argument of ipairs, pairs, unpack, next, type…
	cPcallFn                // f in pcall(f, …)
)

// readers take a table without changing it.
var readers = map[string]bool{"ipairs": true, "pairs": true, "unpack": true, "next": true, "type": true, "select": true, "tostring": true}

// tableReaders are the read-only functions of the table library.
var tableReaders = map[string]bool{"getn": true, "concat": true, "maxn": true}

// banned globals load code, reach every global or leave the sandbox.
var banned = map[string]string{
	"load": "loads code at run time", "loadstring": "loads code at run time",
	"dofile": "loads code from a file", "loadfile": "loads code from a file",
	"require": "loads modules", "module": "defines modules", "package": "loads modules",
	"setfenv": "changes a function's globals", "getfenv": "reaches the globals table",
	"_G": "reaches the globals table", "debug": "reaches the interpreter's internals",
	"io": "reaches files", "newproxy": "creates userdata", "collectgarbage": "drives the garbage collector",
	"gcinfo": "inspects the interpreter", "os": "reaches the operating system",
}

// redisFields are the fields of the redis table a script may use.
var redisFields = map[string]bool{
	"call": true, "pcall": true, "error_reply": true, "status_reply": true, "sha1hex": true,
	"log": true, "LOG_DEBUG": true, "LOG_VERBOSE": true, "LOG_NOTICE": true, "LOG_WARNING": true,
	"replicate_commands": true, "REDIS_VERSION": true, "REDIS_VERSION_NUM": true,
	// Replication and debugger controls: no effect on what a backend answers.
	"set_repl": true, "REPL_ALL": true, "REPL_AOF": true, "REPL_REPLICA": true, "REPL_SLAVE": true,
	"REPL_NONE": true, "breakpoint": true, "debug": true,
}

func (c *checker) fail(line int, format string, a ...any) {
	if c.problem != nil {
		return
	}
	if line <= 0 {
		line = c.line
	}
	c.problem = &Problem{Line: line, Reason: fmt.Sprintf(format, a...)}
}

func (c *checker) literal(l lit, compared bool) {
	switch {
	case compared && c.seen[l] < 2:
		c.seen[l] = 2
		c.facts.compared = append(c.facts.compared, l)
	case c.seen[l] == 0:
		c.seen[l] = 1
		c.facts.literals = append(c.facts.literals, l)
	}
}

func (c *checker) stmts(stmts []ast.Stmt) {
	for _, s := range stmts {
		c.stmt(s)
	}
}

func (c *checker) local(e ast.Expr) *binding {
	if id, ok := e.(*ast.IdentExpr); ok {
		return c.r.uses[id]
	}
	return nil
}

func (c *checker) stmt(s ast.Stmt) {
	c.line = s.Line()
	switch s := s.(type) {
	case *ast.LocalAssignStmt:
		for i, e := range s.Exprs {
			var to *binding
			if i < len(s.Names) {
				to = c.r.lookupDecl(s, i)
			}
			c.bind(e, to)
		}
	case *ast.AssignStmt:
		for _, lhs := range s.Lhs {
			c.target(lhs)
		}
		for i, e := range s.Rhs {
			var to *binding
			if i < len(s.Lhs) {
				to = c.local(s.Lhs[i])
			}
			c.bind(e, to)
		}
	case *ast.FuncCallStmt:
		c.expr(s.Expr, cValue, nil)
	case *ast.DoBlockStmt:
		c.stmts(s.Stmts)
	case *ast.WhileStmt:
		c.loop(s)
		c.expr(s.Condition, cValue, nil)
		c.stmts(s.Stmts)
	case *ast.RepeatStmt:
		c.loop(s)
		c.stmts(s.Stmts)
		c.expr(s.Condition, cValue, nil)
	case *ast.IfStmt:
		c.expr(s.Condition, cValue, nil)
		c.stmts(s.Then)
		c.stmts(s.Else)
	case *ast.NumberForStmt:
		c.loop(s)
		c.expr(s.Init, cValue, nil)
		c.expr(s.Limit, cValue, nil)
		if s.Step != nil {
			c.expr(s.Step, cValue, nil)
		}
		c.stmts(s.Stmts)
	case *ast.GenericForStmt:
		c.loop(s)
		for _, e := range s.Exprs {
			c.expr(e, cValue, nil)
		}
		c.stmts(s.Stmts)
	case *ast.FuncDefStmt:
		if s.Name.Func != nil {
			c.target(s.Name.Func)
		} else {
			c.expr(s.Name.Receiver, cTarget, nil)
		}
		c.expr(s.Func, cValue, nil)
	case *ast.ReturnStmt:
		for _, e := range s.Exprs {
			c.expr(e, cValue, nil)
		}
	case *ast.LabelStmt, *ast.GotoStmt:
		c.fail(s.Line(), "goto and labels are Lua 5.2; Redis runs Lua 5.1")
	}
}

// bind checks e, whose value is assigned to the binding to (nil: not a
// local).
func (c *checker) bind(e ast.Expr, to *binding) {
	c.expr(e, cValue, to)
}

// target checks an assignment target.
func (c *checker) target(e ast.Expr) {
	switch e := e.(type) {
	case *ast.IdentExpr:
		if c.r.uses[e] == nil {
			switch e.Value {
			case "KEYS", "ARGV", "redis":
				c.fail(e.Line(), "assigns to %s; a script run by vote may only read it", e.Value)
			}
		}
	case *ast.AttrGetExpr:
		c.expr(e.Object, cTarget, nil)
		c.expr(e.Key, cValue, nil)
	default:
		c.expr(e, cValue, nil)
	}
}

func tableName(k provKind) string {
	switch k {
	case pKeys:
		return "KEYS"
	case pArgv:
		return "ARGV"
	case pCall:
		return "redis.call"
	case pPCall:
		return "redis.pcall"
	}
	return "the redis table"
}

// special checks that KEYS, ARGV, redis and redis.call flow only where the
// analysis can follow them.
func (c *checker) special(e ast.Expr, p prov, ctx ctxKind, to *binding) {
	aliased := to != nil && to.prov.kind == p.kind
	if p.kind == pArgv && ctx != cIndexed && !aliased {
		c.facts.argvDynamic = true
	}
	switch p.kind {
	case pRedis:
		if ctx == cTarget {
			c.fail(e.Line(), "changes the redis table; a script run by vote may only call it")
		} else if ctx != cIndexed && !aliased {
			c.fail(e.Line(), "uses the redis table as a value; call redis.call and redis.pcall directly or through a local that holds only them")
		}
	case pCall, pPCall:
		if ctx != cCallee && ctx != cPcallFn && !aliased {
			c.fail(e.Line(), "passes %s on as a value; call it directly, through pcall(%s, …) or through a local that holds only it", tableName(p.kind), tableName(p.kind))
		}
	case pKeys, pArgv:
		switch {
		case ctx == cTarget:
			c.fail(e.Line(), "changes %s; a script run by vote may only read it", tableName(p.kind))
		case ctx != cIndexed && ctx != cLen && ctx != cReadArg && !aliased:
			c.fail(e.Line(), "passes %s on as a value; a script run by vote may only index it, take its length, loop over it with ipairs or pairs, or unpack it", tableName(p.kind))
		}
	}
}

func (c *checker) expr(e ast.Expr, ctx ctxKind, to *binding) {
	if c.problem != nil || e == nil {
		return
	}
	p := c.r.exprProv(e)
	switch e.(type) {
	case *ast.LogicalOpExpr, *ast.FunctionExpr:
	default:
		c.special(e, p, ctx, to)
	}
	switch e := e.(type) {
	case *ast.StringExpr:
		c.literal(lit{s: e.Value}, false)
	case *ast.NumberExpr:
		c.literal(lit{s: e.Value, num: true}, false)
	case *ast.IdentExpr:
		if strings.HasPrefix(e.Value, "__rp_") {
			c.fail(e.Line(), "uses the name %s: names that begin with __rp_ are redlock-proxy's, in the run-time check of scripts by vote", e.Value)
		}
		if c.r.uses[e] == nil {
			if why, ok := banned[e.Value]; ok {
				c.fail(e.Line(), "%s %s, which a script run by vote may not do", e.Value, why)
			}
		}
	case *ast.AttrGetExpr:
		c.attr(e, ctx)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			if f.Key != nil {
				c.expr(f.Key, cValue, nil)
			}
			c.expr(f.Value, cValue, nil)
		}
	case *ast.FuncCallExpr:
		c.call(e)
	case *ast.LogicalOpExpr:
		c.expr(e.Lhs, ctx, to)
		c.expr(e.Rhs, ctx, to)
	case *ast.RelationalOpExpr:
		for _, x := range []ast.Expr{e.Lhs, e.Rhs} {
			switch l := x.(type) {
			case *ast.StringExpr:
				c.literal(lit{s: l.Value}, true)
			case *ast.NumberExpr:
				c.literal(lit{s: l.Value, num: true}, true)
			}
			c.expr(x, cReadArg, nil)
		}
	case *ast.StringConcatOpExpr, *ast.ArithmeticOpExpr, *ast.UnaryMinusOpExpr, *ast.UnaryNotOpExpr:
		for _, o := range operands(e) {
			c.expr(*o, cValue, nil)
		}
	case *ast.UnaryLenOpExpr:
		c.expr(e.Expr, cLen, nil)
	case *ast.FunctionExpr:
		line := c.line
		c.stmts(e.Stmts)
		c.line = line
	}
}

// unboundedString are the string functions whose C code grows with its
// input. The wrapper on the backends bounds them however they are
// reached (Script.Enforced in redlock/script: a string's methods too,
// through its index); the analysis refuses them early when taken from
// anything but string, whose calls it models.
var unboundedString = map[string]bool{"rep": true, "find": true, "match": true, "gmatch": true, "gsub": true}

// stringMethod is why a string method is refused.
func stringMethod(name string) string {
	return "a string's own " + name + " is not followed by the analysis (it models string." + name +
		"); write string." + name + "(s, …)"
}

func (c *checker) attr(e *ast.AttrGetExpr, ctx ctxKind) {
	key, _ := e.Key.(*ast.StringExpr)
	if key != nil && key.Value == "dump" {
		c.fail(e.Line(), "string.dump is not available to scripts run by vote")
		return
	}
	if key != nil && unboundedString[key.Value] && !c.r.global(e.Object, "string") {
		c.fail(e.Line(), "%s", stringMethod(key.Value))
		return
	}
	if c.r.global(e.Object, "os") && key != nil && key.Value == "clock" {
		// Redis 7.2 keeps os.clock (7.0 has no os at all): each backend's
		// own processor time, which no two backends share.
		c.fail(e.Line(), "os.clock reads each backend's own processor time, so the backends would answer differently")
		return
	}
	obj := cIndexed
	if ctx == cTarget {
		obj = cTarget
	}
	c.expr(e.Object, obj, nil)
	switch e.Key.(type) {
	case *ast.StringExpr, *ast.NumberExpr: // a field name or an index, not a value
	default:
		c.expr(e.Key, cValue, nil)
	}
	switch c.r.exprProv(e.Object).kind {
	case pRedis:
		if key == nil || !redisFields[key.Value] {
			name := "a computed field"
			if key != nil {
				name = key.Value
			}
			c.fail(e.Line(), "redis.%s is not available to scripts run by vote", name)
		}
	case pArgv:
		if n, ok := argIndex(e.Key); ok {
			c.facts.argvMax = max(c.facts.argvMax, n)
		} else {
			c.facts.argvDynamic = true
		}
	case pKeys:
		if n, ok := argIndex(e.Key); ok {
			c.facts.keysMax = max(c.facts.keysMax, n)
		}
	}
}

func (c *checker) call(e *ast.FuncCallExpr) {
	if e.Func == nil { // a method call, receiver:method(…)
		if e.Method == "dump" {
			c.fail(e.Line(), "string.dump is not available to scripts run by vote")
		}
		if unboundedString[e.Method] {
			c.fail(e.Line(), "%s", stringMethod(e.Method))
		}
		if c.r.exprProv(e.Receiver).kind == pRedis {
			c.fail(e.Line(), "redis:%s(…) passes the redis table as the first argument; write redis.%s(…)", e.Method, e.Method)
		}
		c.expr(e.Receiver, cValue, nil)
		for _, a := range e.Args {
			c.expr(a, cValue, nil)
		}
		return
	}
	fp := c.r.exprProv(e.Func)
	switch {
	case fp.kind == pCall || fp.kind == pPCall:
		c.expr(e.Func, cCallee, nil)
		c.site(e, fp.kind, e.Args)
		return
	case (c.r.global(e.Func, "pcall") || c.r.global(e.Func, "xpcall")) && len(e.Args) > 0:
		if k := c.r.exprProv(e.Args[0]).kind; k == pCall || k == pPCall {
			if c.r.global(e.Func, "xpcall") {
				c.fail(e.Line(), "xpcall(%s, …) calls it without arguments", tableName(k))
				return
			}
			c.expr(e.Args[0], cPcallFn, nil)
			c.site(e, k, e.Args[1:])
			return
		}
	}
	if a, ok := e.Func.(*ast.AttrGetExpr); ok && c.r.exprProv(a.Object).kind != pRedis && !c.r.global(a.Object, "string") && !c.r.global(a.Object, "table") && !c.r.global(a.Object, "math") {
		switch a.Key.(type) {
		case *ast.StringExpr, *ast.NumberExpr:
		default:
			// On a string, v[name] is a string function the analysis does
			// not follow (the wrapper bounds it as it runs).
			c.fail(e.Line(), "calls a function picked by a computed key (x[k](…)); call it by its name")
			return
		}
	}
	c.expr(e.Func, cCallee, nil)
	first := cValue
	if id, ok := e.Func.(*ast.IdentExpr); ok && c.r.uses[id] == nil && readers[id.Value] {
		first = cReadArg
	}
	if a, ok := e.Func.(*ast.AttrGetExpr); ok && c.r.global(a.Object, "table") {
		if k, ok := a.Key.(*ast.StringExpr); ok && tableReaders[k.Value] {
			first = cReadArg
		}
	}
	for i, a := range e.Args {
		if i == 0 {
			c.expr(a, first, nil)
		} else {
			c.expr(a, cValue, nil)
		}
	}
}

// site checks one call of redis.call or redis.pcall.
func (c *checker) site(e *ast.FuncCallExpr, kind provKind, args []ast.Expr) {
	fn := tableName(kind)
	line := e.Line()
	for i, a := range args {
		if i > 0 {
			c.expr(a, cValue, nil)
		}
	}
	if len(args) == 0 {
		c.fail(line, "%s() needs a command name", fn)
		return
	}
	var tail *arg
	fixed := args[1:]
	if len(fixed) > 0 && multi(fixed[len(fixed)-1]) {
		tail = &arg{keyish: c.r.spreadProv(fixed[len(fixed)-1]).keyish()}
		fixed = fixed[:len(fixed)-1]
	}
	as := make([]arg, len(fixed))
	for i, a := range fixed {
		p := c.r.exprProv(a)
		as[i] = arg{keyish: p.keyish(), isLit: p.kind == pLit}
		switch p.kind {
		case pLit:
			as[i].literal = p.s
		case pDerived:
			as[i].derived, as[i].prefix = true, p.s
		}
	}
	np := c.r.exprProv(args[0])
	switch {
	case np.kind == pLit && strings.EqualFold(np.s, "SELECT"):
		c.selectSite(line, fn, args[1:])
	case len(args) == 1 && multi(args[0]):
		c.fail(line, "%s(…) takes its command name from a function's results; name it with a string literal or an ARGV element", fn)
	case np.kind == pLit:
		c.literalSite(e, fn, np.s, as, tail)
	case np.kind == pArg:
		c.expr(args[0], cValue, nil)
		c.vote.sites = append(c.vote.sites, argSite{line: line, n: np.n, args: as, tail: tail})
		c.vote.Writes = true
		c.vote.noteWrite(line)
		// The command, hence its key positions, is known only at run
		// time: every built argument counts.
		for _, a := range as {
			c.builtKey(a)
		}
		c.facts.argvMax = max(c.facts.argvMax, np.n)
	default:
		c.expr(args[0], cValue, nil)
		c.fail(line, "%s(…) computes its command name; name it with a string literal or an ARGV element", fn)
	}
}

// builtKey notes a key argument built from a declared key.
func (c *checker) builtKey(a arg) {
	if !a.derived {
		return
	}
	c.vote.DerivedKeys = true
	if a.prefix != "" && !slices.Contains(c.vote.KeyPrefixes, a.prefix) {
		c.vote.KeyPrefixes = append(c.vote.KeyPrefixes, a.prefix)
	}
}

func (c *checker) literalSite(e *ast.FuncCallExpr, fn, name string, as []arg, tail *arg) {
	line := e.Line()
	cmd, ok := lookup(name)
	if !ok {
		// An unordered reply: the wrapper on each backend sorts it before
		// the script sees it (Script.Enforced in redlock/script), so every
		// backend's script walks it in the same order; returned as it is,
		// the vote compares it as a set (reply.go).
		cmd, ok = lookupUnordered(name)
	}
	if !ok {
		c.fail(line, "%s(%s, …): %s and cannot run by vote", fn, strconv.Quote(name), whyNot(name))
		return
	}
	if p := cmd.keys.badKey(as, tail); p != 0 {
		c.fail(line, "%s(%s, …): %s", fn, strconv.Quote(name), notFromKeys(p, cmd.name))
		return
	}
	why, store := argForm(cmd.name, as, tail)
	if why != "" {
		c.fail(line, "%s(%s, …): %s", fn, strconv.Quote(name), why)
		return
	}
	if store > 0 {
		a := argAt(as, tail, store)
		if !a.keyish {
			c.fail(line, "%s(%s, …): %s", fn, strconv.Quote(name), notFromKeys(store, cmd.name))
			return
		}
		c.builtKey(a)
	}
	c.facts.commands[cmd.name] = true
	c.vote.Writes = c.vote.Writes || cmd.flags&(fWrite|fCaches) != 0 // PFCOUNT cannot run in a read-only script
	c.vote.Publishes = c.vote.Publishes || cmd.flags&fPublish != 0
	if cmd.flags&(fWrite|fCaches|fPublish) != 0 {
		c.vote.noteWrite(line)
	}
	c.vote.ReadsTime = c.vote.ReadsTime || cmd.flags&fTime != 0
	cmd.keys.keyArgs(as, tail, c.builtKey)
}

// lookupDecl finds the binding that a local statement declared for its i-th
// name.
func (r *resolver) lookupDecl(s *ast.LocalAssignStmt, i int) *binding {
	return r.decls[s][i]
}

// checkStatic runs both passes over a parsed chunk.
func checkStatic(chunk []ast.Stmt) (*Vote, *Problem, facts, *resolver) {
	r := newResolver()
	r.push()
	r.stmts(chunk)
	r.pop()
	r.solve()
	c := &checker{r: r, vote: &Vote{}, seen: map[lit]int{}, facts: facts{commands: map[string]bool{}}, bounds: map[*binding]*boundOf{}, turns: map[ast.Stmt]bexpr{}, returned: returnedCalls(chunk, r)}
	c.stmts(chunk)
	if line := recursion(chunk, r); line != 0 {
		c.fail(line, "a function may call itself here, directly or through others: recursion has no bound the analysis can see, and could hold every backend")
	}
	if c.problem == nil {
		ws := newWorkShape(chunk, r, c.turns)
		if p := ws.check(zeroArgs); p != nil {
			c.problem = p // too much whatever the run brings
		} else if ws.check(worstArgs) != nil {
			c.vote.work = ws // the run's arguments decide: counted on each run
		}
	}
	seen := map[int]bool{}
	for _, s := range c.vote.sites {
		if !seen[s.n] {
			seen[s.n] = true
			c.vote.ArgCommands = append(c.vote.ArgCommands, s.n)
		}
	}
	sort.Ints(c.vote.ArgCommands)
	if c.problem != nil {
		return nil, c.problem, c.facts, r
	}
	return c.vote, nil, c.facts, r
}
