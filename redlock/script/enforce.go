package script

import (
	"cmp"
	"strconv"
	"strings"
)

// The run-time check of a script by vote (docs/safety.md, "Scripts by
// vote", lists what it checks and bounds): the static analysis in package
// commands/lua recognises a script and refuses early, but what keeps the
// promise is the wrapper on the backend. A Script made with Enforced runs
// its body with copies of KEYS and ARGV, a redis whose call and pcall
// check each call as it happens (Command, the user's key patterns,
// redlock.ReservedPrefix, the Enforcement's bounds; unordered replies
// sorted), a bounded string library, cjson and cmsgpack, and a copy of _G
// without loadstring or load. Whatever the body raises, the wrapper reads
// it only with type and rawget (failSource, in clamp.go), and every
// function the wrapper calls is a local taken before the body runs.
//
// The user's key patterns travel as arguments (EnforceArgs), after the
// client's ARGV and before the holds' (HeldArgs): the wrapper takes them
// off before it copies ARGV. A string's metatable is Redis's own and
// read-only, its __index the real string library: only the body's own
// index of a string can be redirected, which is why the body is printed
// again (enforce_body.go).

// Command is one command a script by vote may call, with its key
// positions as Redis's COMMAND counts them (the name is 0): First to Last
// by Step (Last < 0 counts from the end), and when NumKeys is not 0, the
// count at that position and that many keys after it.
type Command struct {
	Name              string
	First, Last, Step int
	NumKeys           int
	Write             bool // counted in the write budget
	Store             bool // SORT: the argument after STORE is a key; BY and GET refused
	NoDB              bool // COPY: the DB option refused
	Sorted            bool // an unordered array reply, sorted before the body sees it
	SortedPairs       bool // HGETALL: field/value pairs, sorted by field
	Channel           bool // PUBLISH: the first argument is a channel, never a reserved one
}

// Enforcement is what the wrapper checks at run time (see above).
type Enforcement struct {
	Commands []Command
	// MaxValue bounds every argument and what SETRANGE, SETBIT, APPEND and
	// BITFIELD may grow a value to (max_value_bytes).
	MaxValue int
	// MaxString bounds a string that string.rep, gsub or table.concat
	// builds.
	MaxString int
	// MaxHeap bounds the Lua memory a run may add (0: defaultMaxHeap),
	// checked by every function that builds a string and by '..': past
	// it, a full collection, then a refusal.
	MaxHeap int
	// WriteKeys and WriteBytes bound the distinct keys one run writes and
	// the bytes of its write commands' arguments.
	WriteKeys  int
	WriteBytes int
	// SelectZero lets a script run SELECT 0 (the backends use database 0:
	// it changes nothing); any other SELECT is refused.
	SelectZero bool
	lua        string // the shadow, made once by NewEnforcement
}

// GrowsValue reports whether the wrapper bounds what the command name
// (upper case) may grow a value to, beyond its arguments' own sizes
// (__rp_check: SETRANGE and SETBIT by their offset, APPEND by the value's
// length, BITFIELD by its offsets). A caller that has checked a command's
// keys and arguments itself needs the wrapper only for these.
func GrowsValue(name string) bool {
	switch name {
	case "SETRANGE", "SETBIT", "APPEND", "BITFIELD":
		return true
	}
	return false
}

// patternCost bounds a Lua pattern's backtracking: the subject's length
// to the power of its unbounded quantifiers (one more when it is not
// anchored), times two per optional item. As in commands/lua's
// patternRepeats, '-' after '(', ')' or a quantifier is a character, and
// items the rest follows from one length only ('%x+-', the last) count
// one between them.
const patternCost = 1 << 26

// sortValues is the most values table.sort orders in a script by vote
// without a comparison function: all in C, where no time limit reaches
// (3·10⁶ numbers took 2.2 s on Redis 7.0.15; 2^18, about 0.15 s). With
// one, each comparison runs in Lua, where the time limit does.
const sortValues = 1 << 18

// defaultMaxHeap is Enforcement.MaxHeap's default.
const defaultMaxHeap = 64 << 20

// NewEnforcement returns e, its wrapper's Lua made once.
func NewEnforcement(e Enforcement) *Enforcement {
	e.lua = enforceLua(&e)
	return &e
}

// Enforced returns a copy of s whose wrappers (Guarded, Clamped and their
// held forms) enforce e: call it with EnforceArgs appended to the
// client's ARGV (before any HeldArgs). builds are the starts of the keys
// it may build (ForVote's), nil when it builds none.
func (s *Script) Enforced(e *Enforcement) *Script {
	c := *s
	c.enforce, c.clamps = e, &clamps{}
	return &c
}

// LocksByRead returns a copy of s whose enforced clamp (Clamped,
// ClampedHeld) tells a script's lock writes from its data (docs/safety.md,
// "Locks and data"): a key is locked by a run that writes it after
// reading it (a command that reads it, on this run, before the write) or
// with a conditional write (SET NX|XX|IFEQ|IFNE|IFDEQ|IFDNE, SETNX,
// MSETNX, HSETNX), and so is a declared key the proxy holds; only those
// are bounded within the max ttl and held beyond. Every other key the
// run writes is data and keeps the expiry the script gave it, none
// meaning none (reported -3). Without the run-time check (not Enforced)
// every key is bounded, as before.
func (s *Script) LocksByRead() *Script {
	c := *s
	c.byRead, c.clamps = true, &clamps{}
	return &c
}

// IsEnforced reports whether s runs with the run-time check.
func (s *Script) IsEnforced() bool { return s.enforce != nil }

// EnforceArgs is what a script made with Enforced expects after its
// client's ARGV: the user's key patterns ("*" for every key), then their
// count.
func EnforceArgs(patterns []string) []string {
	out := make([]string, 0, len(patterns)+1)
	out = append(out, patterns...)
	return append(out, strconv.Itoa(len(patterns)))
}

// reservedPrefix is redlock.ReservedPrefix, the start of the proxy's own
// keys, which no script by vote may touch: this package cannot import
// redlock (redlock imports it); a test in package redlock checks that
// they agree.
const reservedPrefix = "redlock-proxy:"

// luaQuote is s as a Lua string literal, every byte that is not a letter,
// digit or one of " _-:*" written as a decimal escape of three digits (a
// shorter one would take a digit after it in: "\91" then "1" is "\911").
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte(" _-:*", c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteString("\\" + strconv.Itoa(int(c)/100) + strconv.Itoa(int(c)/10%10) + strconv.Itoa(int(c)%10))
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Flags of a command in the wrapper's table.
const (
	cmdWrite = 1 << iota
	cmdStore
	cmdNoDB
	cmdSorted
	cmdSortedPairs
	cmdChannel
)

// commandTable is e's commands as one Lua string, read at each call (a
// constant costs nothing to make, a table of tables would be built on
// every run): |NAME:first:last:step:numkeys:flags for each.
func commandTable(cmds []Command) string {
	var b strings.Builder
	for _, c := range cmds {
		f := 0
		for bit, on := range []bool{c.Write, c.Store, c.NoDB, c.Sorted, c.SortedPairs, c.Channel} {
			if on {
				f |= 1 << bit
			}
		}
		step := max(c.Step, 1)
		b.WriteString("|" + strings.ToUpper(c.Name) + ":" + strconv.Itoa(c.First) + ":" + strconv.Itoa(c.Last) + ":" +
			strconv.Itoa(step) + ":" + strconv.Itoa(c.NumKeys) + ":" + strconv.Itoa(f))
	}
	b.WriteString("|")
	return luaQuote(b.String())
}

// enforceLua is the enforcing layer of __rp_mk (shadowSource), made for
// e: it reads __rp_pats (the user's patterns) and __rp_builds (the starts
// of built keys, or nil), wraps __rp_base, and makes __rp_env, the values
// the body is called with.
func enforceLua(e *Enforcement) string {
	r := strings.NewReplacer(
		"@CMDS@", commandTable(e.Commands),
		"@RES@", luaQuote(reservedPrefix),
		"@MAXV@", strconv.Itoa(e.MaxValue),
		"@MAXS@", strconv.Itoa(max(e.MaxString, e.MaxValue)),
		"@WKEYS@", strconv.Itoa(e.WriteKeys),
		"@WBYTES@", strconv.Itoa(e.WriteBytes),
		"@COST@", strconv.Itoa(patternCost),
		"@SORTN@", strconv.Itoa(sortValues),
		"@HEAPKB@", strconv.Itoa(cmp.Or(e.MaxHeap, defaultMaxHeap)>>10),
		"@SEL0@", strconv.FormatBool(e.SelectZero),
	)
	return oneLine(r.Replace(enforceSource))
}

// oneLine joins Lua written over several lines (no comments, no string
// spanning lines) into one, so that the body keeps its line numbers.
func oneLine(src string) string {
	var parts []string
	for _, l := range strings.Split(src, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ") + " "
}
