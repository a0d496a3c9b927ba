package lua

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// A probe world is one call of the script: KEYS, ARGV and the state of
// each key before the call. Worlds are built for a hypothesis (which ARGV
// is the token, which the ttl) and a class (values for the other
// arguments), from fixed values plus the script's own literals, so that a
// branch on a literal is taken both ways.

// keyState is a key's state before a call.
type keyState uint8

const (
	stAbsent keyState = iota
	stToken           // holds the token, with a ttl
	stOther           // holds another value, with a ttl
)

type world struct {
	keys   []string
	argv   []string
	states []keyState
	init   map[string]entry
}

// hypo is a hypothesis: ARGV[t] is the token, ARGV[d] the ttl (0: none),
// and class fixes the values of some other arguments. With at set, ARGV[d]
// is the Unix time in at (time.Millisecond or time.Second) the ttl ends.
type hypo struct {
	t, d  int
	at    time.Duration
	class map[int]string
}

// probeValues are the values worlds draw from.
type probeValues struct {
	m       int      // number of arguments
	strs    []string // the script's string literals, compared ones first
	near    []string // near misses of the compared literals ("YES", "0.0", " 0")
	ints    []int64  // the script's integer literals, each ±1
	counts  []int    // key counts beyond 1..3 suggested by literals
	tokens  []string
	ttls    []int64
	rems    []int64
	names   [][]string
	argVals []string // values a free argument takes, besides its default
	// pinned are arguments with the only value a run can give them: an
	// ARGV index passed to SELECT is "0" (Vote.CheckRun refuses any
	// other). They are never the token, the ttl or a free argument.
	pinned map[int]string
}

// free reports whether argument j takes probe values (it is not pinned).
func (pv *probeValues) free(j int) bool {
	_, ok := pv.pinned[j]
	return !ok
}

const (
	maxStrLits = 10
	maxIntLits = 6
	maxKeys    = 17 // key counts probed, at most
)

func newProbeValues(f facts, pinned map[int]string) *probeValues {
	pv := &probeValues{m: f.argvMax, pinned: pinned}
	add := func(list []string, s string) []string {
		for _, x := range list {
			if x == s {
				return list
			}
		}
		return append(list, s)
	}
	ints := map[int64]bool{}
	for i, lits := range [][]lit{f.compared, f.literals} {
		for _, l := range lits {
			if l.num {
				n, ok := intLiteral(l.s)
				if ok && len(ints) < maxIntLits*3 {
					for _, v := range []int64{n - 1, n, n + 1} {
						if !ints[v] {
							ints[v] = true
							pv.ints = append(pv.ints, v)
						}
					}
				}
				continue
			}
			if len(pv.strs) >= maxStrLits {
				continue
			}
			pv.strs = add(pv.strs, l.s)
			if i == 0 {
				for _, v := range nearMisses(l.s) {
					pv.near = add(pv.near, v)
				}
			}
		}
	}
	pv.tokens = []string{"tok:3f9a-Q", "Zz_0123456789abcdef", "4242"}
	pv.ttls = []int64{10000, 25000}
	pv.rems = []int64{4321, 86_400_000}
	for _, n := range pv.ints {
		if n >= 1 && n <= 1<<40 {
			pv.ttls = append(pv.ttls, n)
			pv.rems = append(pv.rems, n)
		}
		if n >= 4 && n <= maxKeys {
			pv.counts = append(pv.counts, int(n))
		}
		if n >= 1 && n <= 256 {
			pv.tokens = append(pv.tokens, strings.Repeat("t", int(n)))
		}
	}
	// A literal index KEYS[n] beyond 3 may guard code that only runs with n
	// keys: probe n keys too.
	if f.keysMax > 3 {
		pv.counts = append(pv.counts, f.keysMax)
	}
	pv.tokens = append(pv.tokens, pv.strs...)
	pv.names = [][]string{keyNames("k%d"), keyNames("{lock}:%d")}
	for _, s := range pv.strs {
		set := make([]string, maxKeys+1)
		for i := range set {
			set[i] = s + strings.Repeat("'", i)
		}
		pv.names = append(pv.names, set)
	}
	for _, s := range pv.strs {
		pv.argVals = add(pv.argVals, s)
	}
	for _, s := range pv.near {
		pv.argVals = add(pv.argVals, s)
	}
	for _, n := range pv.ints {
		pv.argVals = add(pv.argVals, strconv.FormatInt(n, 10))
	}
	pv.argVals = add(pv.argVals, "x-none")
	return pv
}

func keyNames(format string) []string {
	out := make([]string, maxKeys+1)
	for i := range out {
		out[i] = fmt.Sprintf(format, i+1)
	}
	return out
}

// intLiteral reads a Lua number literal that is an integer.
func intLiteral(s string) (int64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if n, err := strconv.ParseInt(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 64); err == nil && strings.HasPrefix(strings.ToLower(s), "0x") {
			return n, true
		}
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// nearMisses are values a loose comparison (case-insensitive, numeric,
// trimmed) would take for s but an exact one would not.
func nearMisses(s string) []string {
	var out []string
	if sw := swapCase(s); sw != s {
		out = append(out, sw)
	}
	out = append(out, s+" ", " "+s)
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		out = append(out, "0"+s, s+".0")
	}
	return out
}

func swapCase(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsUpper(r) {
			return unicode.ToLower(r)
		}
		return unicode.ToUpper(r)
	}, s)
}

// freeDefault is the value of a free argument j outside any class: a
// number, distinct per argument, that no literal of the script equals.
func (pv *probeValues) freeDefault(j, variant int) string {
	for bump := 0; ; bump++ {
		v := strconv.Itoa(10000*j + 17 + 1000*(variant%2) + 7*bump)
		clash := false
		for _, s := range pv.argVals {
			clash = clash || s == v
		}
		if !clash {
			return v
		}
	}
}

// others are values a key holding "another" value takes: unrelated, near
// the token (case, prefix, extension), empty, equal to another argument or
// to a literal of the script.
func (pv *probeValues) others(token string, argv []string) []string {
	out := []string{"other-owner", swapCase(token), token + "x", ""}
	if token != "" {
		out = append(out, token[:len(token)-1])
	}
	out = append(out, argv...)
	out = append(out, pv.strs...)
	keep := out[:0]
	for _, o := range out {
		if o != token {
			keep = append(keep, o)
		}
	}
	return keep
}

// worlds builds the probe worlds for h. full adds key counts up to 3 in
// every combination of states, every token, ttl, remaining ttl, "other"
// value and key-name variant; the small set (for classes of the free
// arguments) covers one and two keys.
func (pv *probeValues) worlds(h hypo, full bool) []world {
	var out []world
	idx := 0
	emit := func(n int, states []keyState, token string, ttl, rem int64, other int, names []string) {
		w := world{keys: names[:n], states: states, argv: make([]string, pv.m), init: map[string]entry{}}
		for j := 1; j <= pv.m; j++ {
			switch v, inClass := h.class[j]; {
			case j == h.t:
				w.argv[j-1] = token
			case j == h.d && h.at != 0:
				per := h.at.Milliseconds() // rounded up: never now or past
				w.argv[j-1] = strconv.FormatInt((modelNow+ttl+per-1)/per, 10)
			case j == h.d:
				w.argv[j-1] = strconv.FormatInt(ttl, 10)
			case inClass:
				w.argv[j-1] = v
			default:
				w.argv[j-1] = pv.freeDefault(j, idx)
			}
			if v, ok := pv.pinned[j]; ok {
				w.argv[j-1] = v
			}
		}
		others := pv.others(token, w.argv)
		for i, s := range states {
			switch s {
			case stToken:
				w.init[w.keys[i]] = entry{val: token, exp: modelNow + rem}
			case stOther:
				w.init[w.keys[i]] = entry{val: others[(other+i)%len(others)], exp: modelNow + rem + int64(i)}
			}
		}
		out = append(out, w)
		idx++
	}
	pick := func(list []int64, i int) int64 { return list[i%len(list)] }
	maxN := 2
	if full {
		maxN = 3
	}
	for n := 1; n <= maxN; n++ {
		for _, states := range allStates(n) {
			emit(n, states, pv.tokens[idx%2], pick(pv.ttls, idx/3), pick(pv.rems, idx/2), idx, pv.names[idx%2])
		}
	}
	one := [][]keyState{{stAbsent}, {stToken}, {stOther}}
	tokens := pv.tokens[:2]
	if full {
		tokens = pv.tokens
	}
	for _, tok := range tokens {
		for _, s := range one {
			emit(1, s, tok, pick(pv.ttls, idx), pick(pv.rems, idx), idx, pv.names[0])
		}
	}
	if !full {
		return out
	}
	for _, n := range pv.counts {
		n = min(n+1, maxKeys+1)
		for _, states := range edgeStates(n) {
			emit(n, states, pv.tokens[0], pv.ttls[0], pv.rems[0], idx, pv.names[idx%2])
		}
	}
	for i := range pv.others(pv.tokens[0], make([]string, pv.m)) {
		emit(1, []keyState{stOther}, pv.tokens[0], pv.ttls[0], pv.rems[0], i, pv.names[0])
	}
	for _, ttl := range pv.ttls {
		emit(1, []keyState{stAbsent}, pv.tokens[0], ttl, pv.rems[0], 0, pv.names[0])
		emit(1, []keyState{stToken}, pv.tokens[1], ttl, pv.rems[1], 0, pv.names[0])
	}
	for _, rem := range pv.rems {
		emit(1, []keyState{stToken}, pv.tokens[0], pv.ttls[1], rem, 0, pv.names[0])
	}
	for _, names := range pv.names[1:] {
		for _, s := range one {
			emit(1, s, pv.tokens[0], pv.ttls[0], pv.rems[0], 0, names)
		}
		emit(2, []keyState{stToken, stOther}, pv.tokens[1], pv.ttls[1], pv.rems[1], 1, names)
	}
	return out
}

// allStates lists every combination of states of n keys.
func allStates(n int) [][]keyState {
	out := [][]keyState{{}}
	for i := 0; i < n; i++ {
		var next [][]keyState
		for _, prefix := range out {
			for _, s := range []keyState{stAbsent, stToken, stOther} {
				next = append(next, append(append([]keyState{}, prefix...), s))
			}
		}
		out = next
	}
	return out
}

// edgeStates are a few telling combinations for many keys: all absent,
// all held, all other, held but the last, absent but the last.
func edgeStates(n int) [][]keyState {
	fill := func(s keyState, last keyState) []keyState {
		out := make([]keyState, n)
		for i := range out {
			out[i] = s
		}
		out[n-1] = last
		return out
	}
	return [][]keyState{
		fill(stAbsent, stAbsent), fill(stToken, stToken), fill(stOther, stOther),
		fill(stToken, stOther), fill(stAbsent, stToken), fill(stToken, stAbsent),
	}
}
