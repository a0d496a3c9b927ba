package lua

import (
	"fmt"
	"math"
)

// Problem is why a script cannot run by vote, at a line of its source.
type Problem struct {
	Line   int
	Reason string
}

func (p *Problem) Error() string { return fmt.Sprintf("line %d: %s", p.Line, p.Reason) }

// Vote is what the proxy needs to run an eligible script on every backend.
type Vote struct {
	// ArgCommands lists the ARGV indices (1-based, sorted) that name a
	// command: check each call with CheckRun before running the script.
	ArgCommands []int
	// DerivedKeys: some key argument is built by concatenating an element
	// of KEYS with other values (KEYS[1] .. ':' .. ARGV[1]).
	DerivedKeys bool
	// KeyPrefixes lists the string literals that built keys start with,
	// before the declared key ('{' .. KEYS[1] .. '}': "{"). Such a key
	// starts with the literal followed by a declared key: check that
	// against the users' key patterns and the reserved keys (KeysBuilt).
	KeyPrefixes []string
	// Reply: how a vote compares the script's reply across backends
	// (reply.go).
	Reply ReplyShape
	// Writes: the script may change data (a literal write command, or a
	// command named by ARGV).
	Writes bool
	// Publishes: PUBLISH or SPUBLISH, which fires once per backend.
	Publishes bool
	// WriteLine is the first line with a call that may write or publish
	// (Writes, Publishes), which Redis refuses in a read-only script
	// (EVAL_RO); 0 without one.
	WriteLine int
	// ReadsTime: TIME, which reads each backend's own clock.
	ReadsTime bool
	// Selects: the script calls SELECT, with 0 or with an ARGV element
	// that CheckRun requires to be "0" (database.go). It reaches database
	// 0 of each backend, which holds the proxy's keys only when every
	// backend uses database 0: refuse it otherwise (SelectProblem).
	Selects bool
	// SelectArgs lists the ARGV indices (1-based, sorted) passed to
	// SELECT; CheckRun requires each to be "0".
	SelectArgs []int
	// CapsReplies: the script walks or measures a table that may be a
	// reply (or a string from one, with gmatch): run it with its
	// redis.call replies capped at ReplyCap elements (loops.go), so that
	// its loops turn no more than the analysis counted.
	CapsReplies bool

	sites    []argSite
	selects  []selectSite
	loopArgs []loopArg
	work     *workShape // counted on each run: the ARGV numbers decide (work.go)
}

// noteWrite notes a call that may write or publish at line.
func (v *Vote) noteWrite(line int) {
	if v.WriteLine == 0 || line < v.WriteLine {
		v.WriteLine = line
	}
}

// argSite is a call whose command name is ARGV[n].
type argSite struct {
	line int
	n    int
	args []arg
	tail *arg
}

// CheckRun checks one run's arguments (nkeys declared keys, then argv):
// every ARGV element passed to SELECT must be "0" (also for a recognised
// script, before the proxy carries out its meaning); every ARGV element
// that bounds a loop must be a number of at most loopArgMax, and with
// them the loops may turn at most workMax times in all (loops.go,
// work.go); and for every call that takes its command name from ARGV,
// the name must be Allowed and that command's key arguments must come
// from KEYS. A command name ARGV does not supply is left to Redis (the
// call fails there).
func (v *Vote) CheckRun(nkeys int, argv []string) *Problem {
	if p := v.checkSelects(argv); p != nil {
		return p
	}
	if p := v.checkLoopArgs(argv); p != nil {
		return p
	}
	if v.work != nil {
		if p := v.work.check(&runArgs{num: func(n int) float64 {
			if n > len(argv) {
				return 0 // nil: the loop raises an error on the backend
			}
			f, _ := parseLoopNumber(argv[n-1]) // checkLoopArgs read it
			return math.Abs(f)
		}, keys: float64(nkeys), argv: float64(len(argv))}); p != nil {
			return p
		}
	}
	for _, s := range v.sites {
		if s.n > len(argv) {
			continue
		}
		name := argv[s.n-1]
		c, ok := lookup(name)
		if !ok {
			return &Problem{Line: s.line, Reason: fmt.Sprintf("redis.call(ARGV[%d], …) with ARGV[%d] = %q: %s and cannot run by vote", s.n, s.n, name, whyNot(name))}
		}
		if p := c.keys.badKey(s.args, s.tail); p != 0 {
			return &Problem{Line: s.line, Reason: fmt.Sprintf("redis.call(ARGV[%d], …) with ARGV[%d] = %q: %s", s.n, s.n, name, notFromKeys(p, c.name))}
		}
		why, store := argForm(c.name, s.args, s.tail)
		if why == "" && store > 0 && !argAt(s.args, s.tail, store).keyish {
			why = notFromKeys(store, c.name)
		}
		if why != "" {
			return &Problem{Line: s.line, Reason: fmt.Sprintf("redis.call(ARGV[%d], …) with ARGV[%d] = %q: %s", s.n, s.n, name, why)}
		}
	}
	return nil
}

func notFromKeys(pos int, name string) string {
	return fmt.Sprintf("argument %d is a key of %s but does not come from KEYS; a script run by vote may only touch the keys it declares", pos, name)
}
