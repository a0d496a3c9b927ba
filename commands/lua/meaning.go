package lua

import "time"

// Op is the lock operation a recognised script performs.
type Op int

const (
	// OpAcquire sets the keys to the token with the ttl when they qualify
	// (Acquire mode), all or none.
	OpAcquire Op = iota + 1
	// OpExtend sets or adds to the ttl of the keys (Extend mode) iff all of
	// them hold the token.
	OpExtend
	// OpRelease deletes each key that holds the token.
	OpRelease
	// OpRead only reads string keys: the proxy answers with EvalRead over a
	// quorum's view of them.
	OpRead
	// OpSwitch picks one of several meanings by an argument's value: see
	// Meaning.Select.
	OpSwitch
)

// Scope says which of the script's KEYS the operation covers.
type Scope int

const (
	// FirstKey: KEYS[1] only; other keys are ignored.
	FirstKey Scope = iota
	// AllKeys: every key in KEYS.
	AllKeys
)

// AcquireMode mirrors redlock.AcquireMode.
type AcquireMode int

const (
	// IfAbsent grants when every key is absent.
	IfAbsent AcquireMode = iota
	// IfAbsentOrMine grants when every key is absent or holds the token.
	IfAbsentOrMine
)

// ExtendMode mirrors redlock.ExtendMode.
type ExtendMode int

const (
	// Replace sets the ttl.
	Replace ExtendMode = iota
	// Add adds the ttl to the remaining one.
	Add
)

// Outcome is what a quorum operation came to, for choosing the reply.
type Outcome int

const (
	// Granted: an acquire was granted or an extend done.
	Granted Outcome = iota
	// Denied: an acquire was not granted, or the keys were not all held.
	Denied
	// Released, Absent, Other: a release deleted the key (redlock.Released),
	// found it absent (redlock.Absent), or found another value
	// (redlock.Other). For AllKeys: some key released; else every key
	// absent; else Other.
	Released
	Absent
	Other
)

// ReplyKind says how a reply is formed.
type ReplyKind int

const (
	// Constant: Reply.Value.
	Constant ReplyKind = iota
	// KeyCount: the number of KEYS the client sent, as an integer.
	KeyCount
	// ReleasedCount: the number of keys released, as an integer.
	ReleasedCount
)

// Reply is the reply for one Outcome in a library's convention.
type Reply struct {
	Kind  ReplyKind
	Value Value // for Constant
}

// Meaning is a recognised script: everything the proxy needs to run it as
// a quorum operation and answer in the library's convention.
type Meaning struct {
	Op   Op
	Keys Scope
	// Token and TTL are 1-based ARGV indices (0: none). The ttl argument is
	// an integer count of Unit (time.Millisecond or time.Second): a
	// duration, or with At a Unix time the lock ends at (SET … PXAT,
	// PEXPIREAT, EXAT, EXPIREAT).
	Token   int
	TTL     int
	Unit    time.Duration
	At      bool
	Acquire AcquireMode // OpAcquire
	Extend  ExtendMode  // OpExtend
	// Replies has an entry for each Outcome of Op: Granted and Denied for
	// acquire and extend; Released, Absent and Other for release.
	Replies map[Outcome]Reply
	// Args is the number of arguments the script reads (ARGV[1..Args]); a
	// call with fewer is not this meaning: refuse it or run it by vote.
	Args int
	// Switch is set when Op is OpSwitch.
	Switch *Switch
}

// Switch chooses a meaning by the exact value of one argument.
type Switch struct {
	Arg     int                 // 1-based ARGV index
	Cases   map[string]*Meaning // by the argument's value
	Default *Meaning            // any other value
}

// Select returns the meaning for one call's arguments: m itself unless m
// switches on an argument.
func (m *Meaning) Select(argv []string) *Meaning {
	if m.Switch == nil {
		return m
	}
	if m.Switch.Arg <= len(argv) {
		if c := m.Switch.Cases[argv[m.Switch.Arg-1]]; c != nil {
			return c
		}
	}
	return m.Switch.Default
}

// KeysOf returns the keys the operation covers.
func (m *Meaning) KeysOf(keys []string) []string {
	if m.Keys == FirstKey && len(keys) > 1 {
		return keys[:1]
	}
	return keys
}

// TokenOf returns the token argument.
func (m *Meaning) TokenOf(argv []string) string {
	if m.Token < 1 || m.Token > len(argv) {
		return ""
	}
	return argv[m.Token-1]
}

// ReplyFor forms the reply for an outcome; keys is the number of KEYS the
// client sent and released the number of keys released.
func (m *Meaning) ReplyFor(o Outcome, keys, released int) Value {
	r := m.Replies[o]
	switch r.Kind {
	case KeyCount:
		return IntValue(int64(keys))
	case ReleasedCount:
		return IntValue(int64(released))
	}
	return r.Value
}

// ReleaseReply forms a release's reply from the state of each covered key
// (Released, Absent or Other, in KeysOf's order).
func (m *Meaning) ReleaseReply(states []Outcome, keys int) Value {
	return m.ReplyFor(releaseClass(states), keys, count(states, Released))
}

func releaseClass(states []Outcome) Outcome {
	switch {
	case len(states) == 0:
		return Absent
	case count(states, Released) > 0:
		return Released
	case count(states, Absent) == len(states):
		return Absent
	}
	return Other
}

func count(states []Outcome, o Outcome) int {
	n := 0
	for _, s := range states {
		if s == o {
			n++
		}
	}
	return n
}

// outcomes lists the outcomes an op replies to.
func (o Op) outcomes() []Outcome {
	if o == OpRelease {
		return []Outcome{Released, Absent, Other}
	}
	return []Outcome{Granted, Denied}
}

// same reports whether two meanings are the same operation with the same
// replies (Args aside).
func (m *Meaning) same(n *Meaning) bool {
	if m.Op != n.Op || m.Keys != n.Keys || m.Token != n.Token || m.TTL != n.TTL || m.Unit != n.Unit || m.At != n.At ||
		m.Acquire != n.Acquire || m.Extend != n.Extend || len(m.Replies) != len(n.Replies) {
		return false
	}
	for o, r := range m.Replies {
		s, ok := n.Replies[o]
		if !ok || r.Kind != s.Kind || !r.Value.Equal(s.Value) {
			return false
		}
	}
	return (m.Switch == nil) == (n.Switch == nil)
}
