package lua

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// Recognition: run the script in every probe world of every hypothesis and
// keep the meanings whose effect on the model (the final state of every
// key) and whose reply fit every world. Scripts are atomic in Redis, so
// the final state is the whole effect; any write to a key a meaning would
// not touch, any command the model lacks, any error raised, rules the
// meaning out.

const maxArgs = 6 // more arguments than any lock script reads

// errAbort ends recognition at once: no hypothesis can succeed. problem,
// when set, refuses the script outright: it exhausted a run's budget, as it
// would block or exhaust every backend.
type errAbort struct {
	why     string
	problem *Problem
}

func (e *errAbort) Error() string { return e.why }

type recogniser struct {
	sb    *sandbox
	proto *glua.FunctionProto
	pv    *probeValues
	// ats are the units a ttl argument may be a Unix time in: tried only
	// when the script can set an absolute expiry (PXAT, EXAT, PEXPIREAT,
	// EXPIREAT), so other scripts cost no more.
	ats []time.Duration
}

// absoluteUnits lists the units of the absolute expiries a script can set.
func absoluteUnits(f facts) []time.Duration {
	var ms, s bool
	for _, lits := range [][]lit{f.compared, f.literals} {
		for _, l := range lits {
			switch strings.ToUpper(l.s) {
			case "PXAT", "PEXPIREAT":
				ms = ms || !l.num
			case "EXAT", "EXPIREAT":
				s = s || !l.num
			}
		}
	}
	ms = ms || f.commands["PEXPIREAT"]
	s = s || f.commands["EXPIREAT"]
	var out []time.Duration
	if ms {
		out = append(out, time.Millisecond)
	}
	if s {
		out = append(out, time.Second)
	}
	return out
}

// recognise finds the script's meaning, or says why there is none. A
// problem refuses the script: it ran past a budget on a probe.
func recognise(proto *glua.FunctionProto, f facts, vote *Vote, deadline time.Time) (*Meaning, string, *Problem) {
	switch {
	case len(vote.ArgCommands) > 0:
		return nil, "it takes command names from ARGV", nil
	case f.argvDynamic:
		return nil, "it reads ARGV other than by a literal index", nil
	case f.argvMax > maxArgs:
		return nil, fmt.Sprintf("it reads more than %d arguments", maxArgs), nil
	case f.keysMax > maxKeys:
		return nil, fmt.Sprintf("it reads KEYS[%d]; probes go up to %d keys", f.keysMax, maxKeys), nil
	case vote.DerivedKeys:
		return nil, "it builds key names from KEYS", nil
	}
	readOnly := true
	for _, cmd := range slices.Sorted(maps.Keys(f.commands)) {
		if !modelCommands[cmd] {
			return nil, "it calls " + cmd + ", which no lock meaning uses", nil
		}
		readOnly = readOnly && readCommands[cmd]
	}
	sb := getSandbox(totalSteps, deadline)
	defer putSandbox(sb)
	pinned := map[int]string{}
	for _, n := range vote.SelectArgs {
		pinned[n] = "0"
	}
	r := &recogniser{sb: sb, proto: proto, pv: newProbeValues(f, pinned), ats: absoluteUnits(f)}
	var m *Meaning
	var err error
	if readOnly {
		m, err = r.read()
	} else {
		m, err = r.write()
	}
	var abort *errAbort
	if errors.As(err, &abort) && abort.problem != nil {
		return nil, abort.why, abort.problem
	}
	if err != nil {
		return nil, err.Error(), nil
	}
	return m, "", nil
}

// observe runs the script in w and returns its reply and the model's final
// state.
func (r *recogniser) observe(w *world) (Value, *runError) {
	r.sb.st.reset()
	maps.Copy(r.sb.st.m, w.init)
	return r.sb.run(r.proto, w.keys, w.argv, runBytes)
}

func abortOn(re *runError) error {
	if re.raised {
		return nil
	}
	a := &errAbort{why: "in the analysis sandbox " + re.err.Error()}
	line := max(re.line, 1)
	var pe *patternError
	switch {
	case errors.As(re.err, &pe):
		a.problem = &Problem{Line: line, Reason: fmt.Sprintf("%s on a probe (more than %d Lua instructions' worth); it could block every backend", pe, runSteps)}
	case errors.Is(re.err, errSteps):
		a.problem = &Problem{Line: line, Reason: fmt.Sprintf("the script ran more than %d Lua instructions (or the equivalent in library work) on a probe without finishing; it could block every backend", runSteps)}
	case errors.Is(re.err, errTime):
		a.problem = &Problem{Line: line, Reason: "the script ran past the analysis time limit on a probe; it could block every backend"}
	case errors.Is(re.err, errBytes):
		a.problem = &Problem{Line: line, Reason: fmt.Sprintf("the script built more than %d MiB of strings on a probe; it could exhaust every backend's memory", runBytes>>20)}
	}
	return a
}

// read checks a script that only reads: it must run cleanly in every world.
func (r *recogniser) read() (*Meaning, error) {
	t := min(1, r.pv.m)
	scope := FirstKey
	hs := []hypo{{t: t}}
	for j := 2; j <= r.pv.m; j++ {
		if !r.pv.free(j) {
			continue
		}
		for _, v := range r.pv.argVals {
			hs = append(hs, hypo{t: t, class: map[int]string{j: v}})
		}
	}
	for i, h := range hs {
		ws := r.pv.worlds(h, i == 0)
		for k := range ws {
			if _, re := r.observe(&ws[k]); re != nil {
				if err := abortOn(re); err != nil {
					return nil, err
				}
				return nil, errors.New("it raises an error on some probe: " + re.msg)
			}
			for _, key := range r.sb.st.touched {
				if key != ws[k].keys[0] {
					scope = AllKeys
				}
			}
		}
	}
	return &Meaning{Op: OpRead, Keys: scope, Args: r.pv.m}, nil
}

// write tries every hypothesis and keeps the one meaning that fits.
func (r *recogniser) write() (*Meaning, error) {
	var found []*Meaning
	why := ""
	for t := 1; t <= r.pv.m; t++ {
		for d := 0; d <= r.pv.m; d++ {
			if d == t || !r.pv.free(t) || (d > 0 && !r.pv.free(d)) {
				continue
			}
			ats := []time.Duration{0}
			if d > 0 {
				ats = append(ats, r.ats...)
			}
			for _, at := range ats {
				m, err := r.hypothesis(t, d, at)
				var abort *errAbort
				if errors.As(err, &abort) {
					return nil, err
				}
				if err != nil && why == "" {
					why = err.Error()
				}
				if m != nil {
					found = append(found, m)
				}
			}
		}
	}
	switch len(found) {
	case 0:
		if why == "" {
			why = "no lock meaning fits what it does"
		}
		return nil, errors.New(why)
	case 1:
		found[0].Args = r.pv.m
		if found[0].Switch != nil {
			found[0].Switch.Default.Args = r.pv.m
			for _, c := range found[0].Switch.Cases {
				c.Args = r.pv.m
			}
		}
		return found[0], nil
	}
	return nil, errors.New("more than one lock meaning fits what it does")
}

// hypothesis fits ARGV[t] as the token and ARGV[d] as the ttl (d = 0: none;
// at: as a Unix time in that unit), then varies every other argument over
// the probe values: the meaning may depend on at most one of them, by
// exact value (a switch).
func (r *recogniser) hypothesis(t, d int, at time.Duration) (*Meaning, error) {
	def, err := r.fit(hypo{t: t, d: d, at: at}, true)
	if def == nil {
		return nil, err
	}
	var free []int
	for j := 1; j <= r.pv.m; j++ {
		if j != t && j != d && r.pv.free(j) {
			free = append(free, j)
		}
	}
	deviating := map[int]map[string]*Meaning{}
	for _, j := range free {
		for _, v := range r.pv.argVals {
			m, err := r.fit(hypo{t: t, d: d, at: at, class: map[int]string{j: v}}, false)
			if m == nil {
				return nil, fmt.Errorf("with ARGV[%d] = %q: %v", j, v, err)
			}
			if !m.same(def) {
				if deviating[j] == nil {
					deviating[j] = map[string]*Meaning{}
				}
				deviating[j][v] = m
			}
		}
	}
	var sw *Switch
	switch len(deviating) {
	case 0:
	case 1:
		j := slices.Collect(maps.Keys(deviating))[0]
		sw = &Switch{Arg: j, Cases: deviating[j], Default: def}
		for v, mc := range sw.Cases {
			if !slices.Contains(r.pv.strs, v) {
				return nil, fmt.Errorf("it compares ARGV[%d] loosely (%q acts as a literal would)", j, v)
			}
			full, err := r.fit(hypo{t: t, d: d, at: at, class: map[int]string{j: v}}, true)
			if full == nil || !full.same(mc) {
				return nil, fmt.Errorf("with ARGV[%d] = %q: %v", j, v, err)
			}
		}
	default:
		return nil, errors.New("what it does depends on more than one argument")
	}
	if err := r.pairs(t, d, at, free, sw, def); err != nil {
		return nil, err
	}
	if sw == nil {
		return def, nil
	}
	return &Meaning{Op: OpSwitch, Switch: sw}, nil
}

// maxPairClasses bounds the classes pairs tries.
const maxPairClasses = 400

// pairs varies every two free arguments together: a meaning must not
// change when two of them take values at once (ARGV[3] == 'a' and
// ARGV[4] == 'b'), other than as the switch says.
func (r *recogniser) pairs(t, d int, at time.Duration, free []int, sw *Switch, def *Meaning) error {
	if len(free) < 2 {
		return nil
	}
	npairs := len(free) * (len(free) - 1) / 2
	vals := r.pv.argVals
	if npairs*len(vals)*len(vals) > maxPairClasses {
		vals = append(slices.Clone(r.pv.strs), "x-none")
	}
	if npairs*len(vals)*len(vals) > maxPairClasses {
		return errors.New("it reads too many arguments compared with literals to probe them in pairs")
	}
	want := def
	for a, j := range free {
		for _, k := range free[a+1:] {
			for _, v := range vals {
				for _, w := range vals {
					class := map[int]string{j: v, k: w}
					if sw != nil {
						want = def
						if c := sw.Cases[class[sw.Arg]]; c != nil {
							want = c
						}
					}
					m, err := r.fit(hypo{t: t, d: d, at: at, class: class}, false)
					if m == nil || !m.same(want) {
						return fmt.Errorf("what it does depends on ARGV[%d] and ARGV[%d] together: %v", j, k, err)
					}
				}
			}
		}
	}
	return nil
}

// candidate is a meaning being checked against the worlds, with the replies
// still possible for each outcome.
type candidate struct {
	m     Meaning
	rules map[Outcome]*ruleSet
}

type ruleSet struct {
	seen                        bool
	constOK, keysOK, releasedOK bool
	v                           Value
}

func candidates(h hypo) []*candidate {
	var out []*candidate
	add := func(m Meaning) {
		m.Token, m.TTL, m.At = h.t, h.d, h.at != 0
		out = append(out, &candidate{m: m, rules: map[Outcome]*ruleSet{}})
	}
	units, extends := []time.Duration{time.Millisecond, time.Second}, []ExtendMode{Replace, Add}
	if h.at != 0 {
		units, extends = []time.Duration{h.at}, []ExtendMode{Replace}
	}
	for _, scope := range []Scope{FirstKey, AllKeys} {
		if h.d == 0 {
			add(Meaning{Op: OpRelease, Keys: scope})
			continue
		}
		for _, unit := range units {
			for _, mode := range []AcquireMode{IfAbsent, IfAbsentOrMine} {
				add(Meaning{Op: OpAcquire, Keys: scope, Unit: unit, Acquire: mode})
			}
			for _, mode := range extends {
				add(Meaning{Op: OpExtend, Keys: scope, Unit: unit, Extend: mode})
			}
		}
	}
	return out
}

// fit runs h's worlds and returns the one meaning that fits them all.
func (r *recogniser) fit(h hypo, full bool) (*Meaning, error) {
	cands := candidates(h)
	ws := r.pv.worlds(h, full)
	for i := range ws {
		w := &ws[i]
		v, re := r.observe(w)
		if re != nil {
			if err := abortOn(re); err != nil {
				return nil, err
			}
			return nil, errors.New("raises an error: " + re.msg)
		}
		alive := cands[:0]
		for _, c := range cands {
			if c.admits(w, r.sb.st.m, v) {
				alive = append(alive, c)
			}
		}
		if cands = alive; len(cands) == 0 {
			return nil, errors.New("no lock meaning fits what it does")
		}
	}
	var out []*Meaning
	for _, c := range cands {
		if m := c.resolve(); m != nil {
			out = append(out, m)
		}
	}
	if len(out) != 1 {
		return nil, errors.New("no single lock meaning fits what it does")
	}
	return out[0], nil
}

// admits reports whether the candidate explains world w: the final state
// final and the reply v.
func (c *candidate) admits(w *world, final map[string]entry, v Value) bool {
	want := maps.Clone(w.init)
	scope := w.keys
	if c.m.Keys == FirstKey {
		scope = w.keys[:1]
	}
	token := w.argv[c.m.Token-1]
	var ttl int64
	if c.m.TTL > 0 {
		n, err := strconv.ParseInt(w.argv[c.m.TTL-1], 10, 64)
		if err != nil || n <= 0 {
			return false
		}
		ttl = n * int64(c.m.Unit/time.Millisecond)
		if c.m.At {
			if ttl -= modelNow; ttl <= 0 {
				return false
			}
		}
	}
	var o Outcome
	released := 0
	switch c.m.Op {
	case OpRelease:
		states := make([]Outcome, len(scope))
		for i := range scope {
			switch w.states[i] {
			case stToken:
				states[i] = Released
				delete(want, scope[i])
			case stAbsent:
				states[i] = Absent
			default:
				states[i] = Other
			}
		}
		o, released = releaseClass(states), count(states, Released)
	case OpAcquire, OpExtend:
		ok := true
		for i := range scope {
			switch s := w.states[i]; c.m.Op {
			case OpAcquire:
				ok = ok && (s == stAbsent || (s == stToken && c.m.Acquire == IfAbsentOrMine))
			default:
				ok = ok && s == stToken
			}
		}
		o = Denied
		if ok {
			o = Granted
			for _, k := range scope {
				exp := modelNow + ttl
				if c.m.Op == OpExtend && c.m.Extend == Add {
					exp = want[k].exp + ttl
				}
				want[k] = entry{val: token, exp: exp}
			}
		}
	}
	if !maps.Equal(want, final) {
		return false
	}
	rs := c.rules[o]
	if rs == nil {
		rs = &ruleSet{seen: true, constOK: true, keysOK: true, releasedOK: c.m.Op == OpRelease, v: v}
		c.rules[o] = rs
	}
	rs.constOK = rs.constOK && v.Equal(rs.v)
	rs.keysOK = rs.keysOK && v.Equal(IntValue(int64(len(w.keys))))
	rs.releasedOK = rs.releasedOK && v.Equal(IntValue(int64(released)))
	return rs.constOK || rs.keysOK || rs.releasedOK
}

// resolve turns a surviving candidate into a meaning, choosing for each
// outcome the simplest reply rule that fits.
func (c *candidate) resolve() *Meaning {
	m := c.m
	m.Replies = map[Outcome]Reply{}
	for _, o := range m.Op.outcomes() {
		rs := c.rules[o]
		switch {
		case rs == nil:
			return nil
		case rs.constOK:
			m.Replies[o] = Reply{Kind: Constant, Value: rs.v}
		case rs.keysOK:
			m.Replies[o] = Reply{Kind: KeyCount}
		case rs.releasedOK:
			m.Replies[o] = Reply{Kind: ReleasedCount}
		default:
			return nil
		}
	}
	return &m
}
