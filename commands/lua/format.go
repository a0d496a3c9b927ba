package lua

import (
	"math"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// format is Lua 5.1.5's string.format (lstrlib.c str_format), which
// gopher-lua replaces with Go's fmt (%d of 'x' is 0 there, %a and a
// missing argument are written into the result): the options %d %i %u %c
// %o %x %X %e %E %f %g %G %q %s and %%, each item written as C's printf
// writes it (numbers.go), and Lua's errors for anything else. Lua allows
// at most two digits of width and of precision, so no item is longer
// than its value and 99 bytes of padding; each is paid from the byte
// and instruction budgets before it is added.
func (sb *sandbox) format(L *glua.LState) int {
	f := checkString(L, 1, "format")
	top := L.GetTop()
	var b strings.Builder
	add := func(s string) {
		sb.spend(L, int64(len(s)))
		sb.charge(L, int64(len(s))) // a byte of output as an instruction, as before: %99.99f of 1e300 is slow
		b.WriteString(s)
	}
	arg := 1
	for i := 0; i < len(f); {
		if f[i] != '%' {
			j := strings.IndexByte(f[i:], '%')
			if j < 0 {
				j = len(f) - i
			}
			add(f[i : i+j])
			i += j
			continue
		}
		if i++; i < len(f) && f[i] == '%' {
			add("%")
			i++
			continue
		}
		if arg++; arg > top {
			argError(L, arg, "format", "no value")
		}
		s, verb, next := scanFormat(L, f, i)
		i = next
		var item string
		switch verb {
		case 'c':
			item = s.pad("", string([]byte{byte(cInt32(checkNumber(L, arg, "format")))}), false)
		case 'd', 'i', 'o', 'u', 'x', 'X':
			item = cInteger(checkNumber(L, arg, "format"), verb, s)
		case 'e', 'E', 'f', 'g', 'G':
			item = cFloat(checkNumber(L, arg, "format"), verb, s)
		case 'q':
			add(quoted(checkString(L, arg, "format")))
			continue
		case 's':
			str := checkString(L, arg, "format")
			if s.prec < 0 && len(str) >= 100 { // Lua adds a long string as it is
				add(str)
				continue
			}
			item = cutNUL(str)
			if s.prec >= 0 && len(item) > s.prec {
				item = item[:s.prec]
			}
			item = s.pad("", item, false)
		case 0:
			L.RaiseError("%s", "invalid option '%' to 'format'")
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", verb)
		}
		add(cutNUL(item)) // Lua adds the item up to its first NUL (strlen)
	}
	L.Push(glua.LString(b.String()))
	return 1
}

// scanFormat reads one conversion's flags, width and precision from
// f[i:] as Lua 5.1's scanformat does, and returns the option byte (0 at
// the end of f) and where the text after it starts.
func scanFormat(L *glua.LState, f string, i int) (s spec, verb byte, next int) {
	s.prec = -1
	j := i
	for ; j < len(f) && strings.IndexByte("-+ #0", f[j]) >= 0; j++ {
		switch f[j] {
		case '-':
			s.minus = true
		case '+':
			s.plus = true
		case ' ':
			s.space = true
		case '#':
			s.alt = true
		case '0':
			s.zero = true
		}
	}
	if j-i > 5 {
		L.RaiseError("invalid format (repeated flags)")
	}
	number := func() int {
		n := 0
		for k := 0; k < 2 && j < len(f) && f[j] >= '0' && f[j] <= '9'; k++ {
			n = n*10 + int(f[j]-'0')
			j++
		}
		return n
	}
	s.width = number()
	if j < len(f) && f[j] == '.' {
		j++
		s.prec = number()
	}
	if j < len(f) && f[j] >= '0' && f[j] <= '9' {
		L.RaiseError("invalid format (width or precision too long)")
	}
	if j == len(f) {
		return s, 0, j
	}
	return s, f[j], j + 1
}

// cInt32 is C's (int)f on x86-64, the minimum for NaN and out of range.
func cInt32(f float64) int32 {
	if f != f || f >= 1<<31 || f < -(1<<31) {
		return math.MinInt32
	}
	return int32(f)
}

func cutNUL(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// quoted is %q: the string in double quotes, with '"', '\\' and a line
// end escaped by a backslash, "\r" as \r and NUL as \000.
func quoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\000`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
