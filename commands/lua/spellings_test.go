package lua

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// speller writes one lock meaning in a random spelling: whitespace, line
// endings, comments, quotes, command case, local names, aliases of
// redis.call, pcall, equivalent conditions and control flow, DEL or UNLINK,
// PEXPIRE or SET XX PX or EXPIRE, tonumber or not, loops over KEYS.
type speller struct {
	r     *rand.Rand
	call  string
	out   []string
	names map[string]bool
}

func newSpeller(seed int64) *speller {
	s := &speller{r: rand.New(rand.NewSource(seed)), names: map[string]bool{}}
	switch s.r.Intn(6) {
	case 0, 1:
		s.call = "redis.call"
	case 2:
		s.call = "redis.pcall"
	case 3:
		s.call = s.ident()
		s.stmt("local " + s.call + s.sp() + "=" + s.sp() + "redis.call")
	case 4:
		r := s.ident()
		s.stmt("local " + r + " = redis")
		s.call = r + s.pick(".call", ".pcall", "['call']")
	default:
		s.call = s.ident()
		s.stmt(fmt.Sprintf("local %s, %s = redis.call, redis.pcall", s.call, s.ident()))
	}
	return s
}

func (s *speller) pick(opts ...string) string { return opts[s.r.Intn(len(opts))] }
func (s *speller) coin() bool                 { return s.r.Intn(2) == 0 }

// sp is white space between tokens.
func (s *speller) sp() string {
	return s.pick(" ", " ", "  ", "\t", "\n", "\r\n  ", " --[[ note ]] ", " -- note\n", "\n\n", "")
}

// sp1 is white space that cannot be empty.
func (s *speller) sp1() string {
	if w := s.sp(); w != "" {
		return w
	}
	return " "
}

func (s *speller) ident() string {
	for {
		n := s.pick("v", "val", "current", "owner", "tok", "x", "lockValue", "_v", "holder", "res", "ttl", "k", "key", "n") +
			s.pick("", "", "1", "_", "2")
		if !s.names[n] {
			s.names[n] = true
			return n
		}
	}
}

func (s *speller) str(v string) string {
	return s.pick("'"+v+"'", `"`+v+`"`, "[["+v+"]]", "[==["+v+"]==]")
}

func (s *speller) cmd(name string) string {
	switch s.r.Intn(4) {
	case 0:
		name = strings.ToLower(name)
	case 1:
		name = strings.ToUpper(name)
	case 2:
		name = strings.ToUpper(name[:1]) + strings.ToLower(name[1:])
	}
	return s.str(name)
}

// rc is a call of redis.call (or its alias) with the command and args.
func (s *speller) rc(name string, args ...string) string {
	parts := append([]string{s.cmd(name)}, args...)
	sep := s.pick(",", ", ", " , ", ",\n  ")
	return s.call + "(" + strings.Join(parts, sep) + ")"
}

func (s *speller) stmt(text string) { s.out = append(s.out, text) }

func (s *speller) src() string {
	var b strings.Builder
	if s.coin() {
		b.WriteString("-- " + s.pick("lock", "release", "generated") + "\n")
	}
	for i, st := range s.out {
		if i > 0 {
			b.WriteString(s.pick("\n", " ", ";\n", "\r\n", "\n\n  ", "; ", "\n-- step\n"))
		}
		b.WriteString(st)
	}
	b.WriteString(s.pick("", "\n", "\r\n"))
	return b.String()
}

// key, token and ttl return an expression for KEYS[1], ARGV[1], ARGV[2],
// sometimes through a local.
func (s *speller) key() string {
	k := s.pick("KEYS[1]", "KEYS[ 1 ]", "KEYS [1]")
	if s.coin() {
		n := s.ident()
		s.stmt("local " + n + s.sp() + "=" + s.sp() + k)
		return n
	}
	return k
}

func (s *speller) token() string {
	t := s.pick("ARGV[1]", "ARGV[ 1 ]", "tostring(ARGV[1])")
	if s.coin() {
		n := s.ident()
		s.stmt("local " + n + " = " + t)
		return n
	}
	return t
}

func (s *speller) ttl() string {
	t := s.pick("ARGV[2]", "tonumber(ARGV[2])", "tonumber( ARGV[2] )")
	if s.coin() {
		n := s.ident()
		s.stmt("local " + n + " = " + t)
		return n
	}
	return t
}

// value returns an expression for GET k, as a local or inline.
func (s *speller) value(k string) string {
	g := s.rc("GET", k)
	if s.coin() {
		n := s.ident()
		s.stmt("local " + n + s.sp() + "=" + s.sp() + g)
		return n
	}
	return g
}

func (s *speller) holds(v, t string) string {
	return s.pick(v+s.sp()+"=="+s.sp()+t, t+" == "+v, "("+v+" == "+t+")", "not ("+v+" ~= "+t+")", "not"+s.sp1()+"("+t+"~="+v+")")
}

func (s *speller) notHolds(v, t string) string {
	return s.pick(v+" ~= "+t, t+s.sp()+"~="+s.sp()+v, "not ("+v+" == "+t+")", "not "+v+" or "+v+" ~= "+t, v+" == false or "+v+" ~= "+t)
}

// guard writes "if holds then <yes> return 1 end return 0" in one of
// several equivalent forms; yes is a statement, yesValue (if not empty) an
// expression whose value is 1 when it runs.
func (s *speller) guard(v, t, yes, yesValue string) {
	forms := 4
	if yesValue != "" {
		forms = 7
	}
	switch s.r.Intn(forms) {
	case 0:
		s.stmt("if " + s.holds(v, t) + " then" + s.sp1() + yes + s.sp1() + "return 1" + s.sp1() + "end")
		s.stmt("return 0")
	case 1:
		s.stmt("if " + s.notHolds(v, t) + " then return 0 end")
		s.stmt(yes)
		s.stmt("return 1")
	case 2:
		s.stmt("if " + s.holds(v, t) + " then " + yes + " return 1 else return 0 end")
	case 3:
		s.stmt("if " + s.notHolds(v, t) + " then\n  return 0\nelse\n  " + yes + "\n  return 1\nend")
	case 4:
		s.stmt("if " + s.holds(v, t) + " then return " + yesValue + " else return 0 end")
	case 5:
		s.stmt("if " + s.notHolds(v, t) + " then return 0 end")
		s.stmt("return " + yesValue)
	default:
		n := s.ident()
		s.stmt("local " + n + " = 0")
		s.stmt("if " + s.holds(v, t) + " then " + n + " = " + yesValue + " end")
		s.stmt("return " + n)
	}
}

// expire returns a statement that sets k's ttl to ttl while it holds t,
// its value when that is 1, and the unit.
func (s *speller) expire(k, t, ttl string) (stmt, value string, unit time.Duration) {
	switch s.r.Intn(8) {
	case 0:
		c := s.rc("PEXPIRE", k, ttl)
		return c, c, time.Millisecond
	case 1:
		return s.rc("SET", k, t, s.str("XX"), s.str("PX"), ttl), "", time.Millisecond
	case 2:
		return s.rc("SET", k, t, s.str("px"), ttl, s.str("xx")), "", time.Millisecond
	case 3:
		return s.rc("PSETEX", k, ttl, t), "", time.Millisecond
	case 4:
		return s.rc("SET", k, t, s.str("PX"), ttl), "", time.Millisecond
	case 5:
		c := s.rc("EXPIRE", k, ttl)
		return c, c, time.Second
	case 6:
		return s.rc("SET", k, t, s.str("EX"), ttl), "", time.Second
	}
	return s.rc("SETEX", k, ttl, t), "", time.Second
}

func (s *speller) del(k string) string { return s.rc(s.pick("DEL", "UNLINK", "del"), k) }

// The generated families, each with the meaning every spelling must get.
var families = []struct {
	name string
	gen  func(s *speller) *Meaning
}{
	{"compare-and-delete", func(s *speller) *Meaning {
		k, t := s.key(), s.token()
		v := s.value(k)
		d := s.del(k)
		s.guard(v, t, d, d)
		return release(FirstKey, 1, one, zero, zero)
	}},
	{"compare-and-delete, absent apart", func(s *speller) *Meaning {
		k, t := s.key(), s.token()
		v := s.ident()
		s.stmt("local " + v + " = " + s.rc("GET", k))
		d := s.del(k)
		absent := s.pick("not "+v, v+" == false", "false == "+v)
		if s.coin() {
			s.stmt("if " + s.holds(v, t) + " then return " + d + " elseif " + absent + " then return -1 else return 0 end")
		} else {
			s.stmt("if " + absent + " then return -1 end")
			s.stmt("if " + s.notHolds(v, t) + " then return 0 end")
			s.stmt(d)
			s.stmt("return 1")
		}
		return release(FirstKey, 1, one, minusOne, zero)
	}},
	{"compare-and-expire", func(s *speller) *Meaning {
		k, t, ttl := s.key(), s.token(), s.ttl()
		v := s.value(k)
		stmt, value, unit := s.expire(k, t, ttl)
		s.guard(v, t, stmt, value)
		return extend(FirstKey, Replace, unit, 2, one, zero)
	}},
	{"acquire if absent", func(s *speller) *Meaning {
		k, t, ttl := s.key(), s.token(), s.ttl()
		unit := time.Millisecond
		px := s.str("PX")
		if s.coin() {
			unit, px = time.Second, s.str("EX")
		}
		switch s.r.Intn(4) {
		case 0:
			opts := []string{s.str("NX"), px, ttl}
			if s.coin() {
				opts = []string{px, ttl, s.str("NX")}
			}
			s.stmt("if " + s.rc("SET", append([]string{k, t}, opts...)...) + " then return 1 end")
			s.stmt("return 0")
		case 1:
			s.stmt("if " + s.rc("EXISTS", k) + s.pick(" == 0", " ~= 1", " < 1") + " then " + s.rc("SET", k, t, px, ttl) + " return 1 end return 0")
		case 2:
			s.stmt("if " + s.pick("not ", "false == ") + s.rc("GET", k) + " then " + s.rc("SET", k, t, px, ttl) + " return 1 else return 0 end")
		default:
			exp := "PEXPIRE"
			if unit == time.Second {
				exp = "EXPIRE"
			}
			s.stmt("if " + s.rc("SETNX", k, t) + " == 1 then " + s.rc(exp, k, ttl) + " return 1 end")
			s.stmt("return 0")
		}
		return acquire(FirstKey, IfAbsent, unit, 2, one, zero)
	}},
	{"acquire if absent or mine", func(s *speller) *Meaning {
		k, t, ttl := s.key(), s.token(), s.ttl()
		v := s.ident()
		s.stmt("local " + v + " = " + s.rc("GET", k))
		set := s.rc("SET", k, t, s.str("PX"), ttl)
		s.stmt("if " + s.pick("not "+v+" or "+v+" == "+t, v+" == false or "+t+" == "+v, "("+v+" == "+t+") or not "+v) + " then " + set + " return 1 end")
		s.stmt("return 0")
		return acquire(FirstKey, IfAbsentOrMine, time.Millisecond, 2, one, zero)
	}},
	{"extend adding or replacing by ARGV[3]", func(s *speller) *Meaning {
		k, t := s.key(), s.token()
		v := s.value(k)
		s.stmt("if " + s.notHolds(v, t) + " then return 0 end")
		zeroLit := s.str("0")
		cmp := s.pick("ARGV[3] == "+zeroLit, zeroLit+" == ARGV[3]")
		if s.coin() {
			n := s.ident()
			s.stmt("local " + n + " = tonumber(ARGV[2])")
			s.stmt("if " + cmp + " then " + n + " = " + n + " + " + s.rc("PTTL", k) + " end")
			s.stmt(s.rc("PEXPIRE", k, n))
		} else {
			s.stmt("if " + s.pick("ARGV[3] ~= "+zeroLit, "not ("+cmp+")") + " then " + s.rc("PEXPIRE", k, "ARGV[2]") +
				" else " + s.rc("PEXPIRE", k, "ARGV[2] + "+s.rc("PTTL", k)) + " end")
		}
		s.stmt("return 1")
		return switchOn(3, 3, extend(FirstKey, Replace, time.Millisecond, 3, one, zero),
			map[string]*Meaning{"0": extend(FirstKey, Add, time.Millisecond, 3, one, zero)})
	}},
	{"remaining ms if mine", func(s *speller) *Meaning {
		k, t := s.key(), s.token()
		v := s.value(k)
		s.stmt("if " + s.holds(v, t) + " then return " + s.rc("PTTL", k) + " end")
		s.stmt("return 0")
		return read(FirstKey, 1)
	}},
	{"release every key", func(s *speller) *Meaning {
		t := s.token()
		n, k := s.ident(), s.ident()
		s.stmt("local " + n + " = 0")
		loop := s.pick("for _, "+k+" in ipairs(KEYS) do", "for _, "+k+" in pairs(KEYS) do", "")
		if loop == "" {
			i := s.ident()
			loop = "for " + i + " = 1, #KEYS do local " + k + " = KEYS[" + i + "]"
		}
		s.stmt(loop + s.sp1() + "if " + s.holds(s.rc("GET", k), t) + " then " + s.del(k) + " " + n + " = " + n + " + 1 end" + s.sp1() + "end")
		s.stmt("return " + n)
		return release(AllKeys, 1, Reply{Kind: ReleasedCount}, zero, zero)
	}},
	{"extend every key", func(s *speller) *Meaning {
		t, ttl := s.token(), s.ttl()
		k := s.ident()
		s.stmt("for _, " + k + " in ipairs(KEYS) do if " + s.notHolds(s.rc("GET", k), t) + " then return 0 end end")
		s.stmt("for _, " + k + " in ipairs(KEYS) do " + s.rc("PEXPIRE", k, ttl) + " end")
		s.stmt("return #KEYS")
		return extend(AllKeys, Replace, time.Millisecond, 2, Reply{Kind: KeyCount}, zero)
	}},
	{"acquire every key", func(s *speller) *Meaning {
		t, ttl := s.token(), s.ttl()
		i := s.ident()
		s.stmt("for " + i + " = 1, #KEYS do if " + s.rc("EXISTS", "KEYS["+i+"]") + " == 1 then return 0 end end")
		s.stmt("for " + i + " = 1, #KEYS do " + s.rc("SET", "KEYS["+i+"]", t, s.str("PX"), ttl) + " end")
		want := Reply{Kind: KeyCount}
		if s.coin() {
			s.stmt("return #KEYS")
		} else {
			s.stmt("return 1")
			want = one
		}
		return acquire(AllKeys, IfAbsent, time.Millisecond, 2, want, zero)
	}},
}

// Every generated spelling of every meaning is recognised as that meaning.
func TestGeneratedSpellings(t *testing.T) {
	n := 40
	if testing.Short() || raceEnabled {
		n = 8
	}
	for fi, f := range families {
		t.Run(f.name, func(t *testing.T) {
			for i := 0; i < n; i++ {
				s := newSpeller(int64(fi*1000 + i))
				want := f.gen(s)
				checkMeaning(t, s.src(), want)
			}
		})
	}
}
