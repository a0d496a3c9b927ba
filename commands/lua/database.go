package lua

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/yuin/gopher-lua/ast"
)

// SELECT inside a script. Clients of the proxy have database 0 only (the
// SELECT command accepts nothing else), and some libraries begin every
// script with redis.pcall("SELECT", tonumber(ARGV[1])), passing the
// database their client was configured with (@sesamecare-oss/redlock,
// node-redlock 5's successor). Such a SELECT is harmless exactly when it
// selects database 0 and database 0 is where the proxy keeps its keys on
// every backend. So a script may call SELECT with one argument that is:
//   - the literal 0 (or "0"), or
//   - an ARGV element, directly, through tonumber(…), or through a local
//     that only ever holds one of those: Vote.SelectArgs lists its index
//     and Vote.CheckRun requires it to be exactly "0" on every run.
//
// Vote.Selects tells the caller that the script selects database 0 of
// each backend, which it must refuse (Vote.SelectProblem) unless every
// backend uses database 0. With the argument pinned to "0", SELECT is a
// no-op, and recognition sees through it: the model answers OK and the
// probes give the SELECT arguments the only value they can have.

// selectSite is one call of SELECT whose index comes from ARGV[n].
type selectSite struct {
	line int
	n    int // 0: a literal 0, checked once and for all
}

// selectSite checks a call of SELECT with the arguments args (after the
// name). A last argument with several values (unpack(ARGV), …) is not an
// index selectIndex accepts; tonumber(…) has one value.
func (c *checker) selectSite(line int, fn string, args []ast.Expr) {
	refuse := func() {
		c.fail(line, "%s(\"SELECT\", …): SELECT reaches another database; a script may only SELECT 0, as the literal 0 or as an ARGV element that is \"0\" when it runs (clients of redlock-proxy have database 0 only)", fn)
	}
	if len(args) != 1 {
		refuse()
		return
	}
	n, ok := c.selectIndex(args[0], 0)
	if !ok {
		refuse()
		return
	}
	c.facts.commands["SELECT"] = true
	c.vote.Selects = true
	c.vote.selects = append(c.vote.selects, selectSite{line: line, n: n})
	if n > 0 {
		c.facts.argvMax = max(c.facts.argvMax, n)
		if !slices.Contains(c.vote.SelectArgs, n) {
			c.vote.SelectArgs = append(c.vote.SelectArgs, n)
			slices.Sort(c.vote.SelectArgs)
		}
	}
}

// selectIndex reads SELECT's argument: (0, true) for a literal 0, (n, true)
// for a value that is ARGV[n] or tonumber(ARGV[n]) (directly or through a
// local that only ever holds it), false for anything else.
func (c *checker) selectIndex(e ast.Expr, depth int) (int, bool) {
	if depth > 8 {
		return 0, false
	}
	switch e := e.(type) {
	case *ast.NumberExpr:
		f, err := strconv.ParseFloat(e.Value, 64)
		return 0, err == nil && f == 0
	case *ast.StringExpr:
		return 0, e.Value == "0"
	case *ast.FuncCallExpr:
		if c.r.global(e.Func, "tonumber") && len(e.Args) == 1 {
			return c.selectIndex(e.Args[0], depth+1)
		}
	case *ast.IdentExpr:
		b := c.r.uses[e]
		if b == nil || b.anon || (b.owner != nil && b.owner.escaped) || len(b.sources) != 1 || b.sources[0].kind != srcExpr {
			break
		}
		return c.selectIndex(b.sources[0].expr, depth+1)
	}
	if p := c.r.exprProv(e); p.kind == pArg {
		return p.n, true
	}
	return 0, false
}

// checkSelects is CheckRun's part for SELECT: each ARGV element passed to
// SELECT must be "0".
func (v *Vote) checkSelects(argv []string) *Problem {
	for _, s := range v.selects {
		if s.n == 0 {
			continue
		}
		if s.n > len(argv) {
			return &Problem{Line: s.line, Reason: fmt.Sprintf("SELECT ARGV[%d], but the script was given %d arguments; a script may only SELECT 0 (clients of redlock-proxy have database 0 only)", s.n, len(argv))}
		}
		if argv[s.n-1] != "0" {
			return &Problem{Line: s.line, Reason: fmt.Sprintf("SELECT with ARGV[%d] = %q reaches another database; a script may only SELECT 0 (clients of redlock-proxy have database 0 only)", s.n, argv[s.n-1])}
		}
	}
	return nil
}

// SelectProblem is why a script that selects database 0 cannot run on
// these backends: why says which backend uses another database. It is
// reported at the script's first SELECT.
func (v *Vote) SelectProblem(why string) *Problem {
	line := 1
	if len(v.selects) > 0 {
		line = v.selects[0].line
	}
	return &Problem{Line: line, Reason: "SELECT 0 reaches database 0 of every backend, but " + why + ", so the script would miss the proxy's keys there"}
}
