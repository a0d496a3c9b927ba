package lua

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The String methods of the analysis's values, for test failures: the
// proxy itself never prints them (deadcode finds them unreachable from
// the binaries).

func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "acquire"
	case OpExtend:
		return "extend"
	case OpRelease:
		return "release"
	case OpRead:
		return "read"
	case OpSwitch:
		return "switch"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

func (o Outcome) String() string {
	return [...]string{"granted", "denied", "released", "absent", "other"}[o]
}

func (r Reply) String() string {
	switch r.Kind {
	case KeyCount:
		return "number of keys"
	case ReleasedCount:
		return "number released"
	}
	return r.Value.String()
}

// String describes the meaning, e.g.
// "release KEYS[1] if it holds ARGV[1]; released: (integer) 1, …".
func (m *Meaning) String() string {
	if m == nil {
		return "<none>"
	}
	if m.Switch != nil {
		var b strings.Builder
		for _, v := range slices.Sorted(maps.Keys(m.Switch.Cases)) {
			fmt.Fprintf(&b, "if ARGV[%d] == %q: %s; ", m.Switch.Arg, v, m.Switch.Cases[v])
		}
		fmt.Fprintf(&b, "else: %s", m.Switch.Default)
		return b.String()
	}
	keys := "KEYS[1]"
	if m.Keys == AllKeys {
		keys = "every key"
	}
	unit := "ms"
	if m.Unit == time.Second {
		unit = "s"
	}
	if m.At {
		unit = "(Unix " + unit + ")"
	}
	var s string
	switch m.Op {
	case OpAcquire:
		mode := "absent"
		if m.Acquire == IfAbsentOrMine {
			mode = "absent or holding it"
		}
		until := "for"
		if m.At {
			until = "until"
		}
		s = fmt.Sprintf("acquire %s with ARGV[%d] %s ARGV[%d] %s if %s", keys, m.Token, until, m.TTL, unit, mode)
	case OpExtend:
		verb := "set the ttl of"
		if m.At {
			verb = "set the end of"
		}
		if m.Extend == Add {
			verb = "add to the ttl of"
		}
		s = fmt.Sprintf("%s %s ARGV[%d] %s if it holds ARGV[%d]", verb, keys, m.TTL, unit, m.Token)
	case OpRelease:
		s = fmt.Sprintf("release %s if it holds ARGV[%d]", keys, m.Token)
	case OpRead:
		return fmt.Sprintf("read %s (evaluated locally)", keys)
	}
	for _, o := range m.Op.outcomes() {
		s += fmt.Sprintf("; %s: %s", o, m.Replies[o])
	}
	return s
}
