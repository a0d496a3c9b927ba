package lua

import (
	"math"
	"strconv"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// Numbers and strings as Redis's Lua 5.1 converts them. Lua 5.1 writes a
// number with C's sprintf("%.14g") (LUAI_NUMFFORMAT) and reads one with
// strtod (luaO_str2d); gopher-lua, which runs the sandbox, writes numbers
// as Go does and reads them with strconv, so a read the proxy runs itself
// would answer tostring(1/3) with 0.3333333333333333 where one Redis
// answers 0.33333333333333, 1e15 with 1000000000000000 (Redis: 1e+15),
// and tonumber('1e2') with nil. The sandbox replaces every conversion a
// script can see — tostring, tonumber, "..", the string library's
// arguments, string.format, table.concat, error, assert, redis.sha1hex —
// with the ones here.
// Conversions inside gopher-lua's VM (arithmetic on a string, "10" + 1)
// remain strconv's.

// numberString is Lua 5.1's tostring of a number: "%.14g", with glibc's
// inf, -inf, nan, -nan and -0.
func numberString(f float64) string {
	return cFloat(f, 'g', spec{prec: 14})
}

// luaString is a string or a number as Lua 5.1 sees it as a string
// (lua_tolstring); ok is false for any other value.
func luaString(v glua.LValue) (s string, ok bool) {
	switch v := v.(type) {
	case glua.LString:
		return string(v), true
	case glua.LNumber:
		return numberString(float64(v)), true
	}
	return "", false
}

// spec is one printf conversion's flags, width and precision.
type spec struct {
	minus, plus, space, alt, zero bool
	width                         int
	prec                          int // -1: none given
}

// pad applies the width: spaces to the left (right with '-'), or zeros
// after the sign and prefix when zero is set.
func (s spec) pad(sign, body string, zero bool) string {
	n := s.width - len(sign) - len(body)
	switch {
	case n <= 0:
		return sign + body
	case s.minus:
		return sign + body + strings.Repeat(" ", n)
	case zero:
		return sign + strings.Repeat("0", n) + body
	}
	return strings.Repeat(" ", n) + sign + body
}

// cFloat formats f as glibc's printf does for %e, %E, %f, %g and %G.
// strconv rounds exactly as glibc does (to nearest, ties to even on the
// exact binary value); C's rules for %g (style, trailing zeros, '#') and
// its spellings of infinities and NaNs are applied here.
func cFloat(f float64, verb byte, s spec) string {
	sign := ""
	switch {
	case math.Signbit(f):
		sign = "-"
	case s.plus:
		sign = "+"
	case s.space:
		sign = " "
	}
	a := math.Abs(f)
	prec := s.prec
	if prec < 0 {
		prec = 6
	}
	var body string
	switch {
	case math.IsInf(a, 0):
		body = "inf"
	case a != a:
		body = "nan"
	case verb|0x20 == 'e':
		body = cExp(a, prec, s.alt)
	case verb|0x20 == 'f':
		body = strconv.FormatFloat(a, 'f', prec, 64)
		if s.alt && prec == 0 {
			body += "."
		}
	default: // 'g': %e if the exponent X < -4 or X >= P, else %f with P-1-X digits
		p := max(prec, 1)
		e := strconv.FormatFloat(a, 'e', p-1, 64)
		x, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
		if x < -4 || x >= p {
			body = cExp(a, p-1, s.alt)
		} else {
			body = strconv.FormatFloat(a, 'f', p-1-x, 64)
			if s.alt && p-1-x == 0 {
				body += "."
			}
		}
		if !s.alt && strings.IndexByte(body, '.') >= 0 {
			mant, exp, _ := strings.Cut(body, "e")
			mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
			if exp != "" {
				mant += "e" + exp
			}
			body = mant
		}
	}
	if verb == 'E' || verb == 'G' {
		body = strings.ToUpper(body)
	}
	return s.pad(sign, body, s.zero && !s.minus && !math.IsInf(a, 0) && a == a)
}

// cExp is %.<prec>e of a >= 0; strconv writes the exponent as C does
// (a sign and at least two digits).
func cExp(a float64, prec int, alt bool) string {
	body := strconv.FormatFloat(a, 'e', prec, 64)
	if alt && prec == 0 {
		body = strings.Replace(body, "e", ".e", 1)
	}
	return body
}

// cInteger formats a C integer conversion (%d %i %o %u %x %X) of f, cast
// first as Lua 5.1 casts it: to long for %d and %i, to unsigned long for
// the others, with x86-64's results where C leaves the cast undefined
// (NaN and values out of range).
func cInteger(f float64, verb byte, s spec) string {
	sign, digits, prefix := "", "", ""
	if verb == 'd' || verb == 'i' {
		n := cLong(f)
		switch {
		case n < 0:
			sign = "-"
		case s.plus:
			sign = "+"
		case s.space:
			sign = " "
		}
		digits = strconv.FormatUint(absUint(n), 10)
	} else {
		u := uint64(cLong(f))
		if f >= 1<<63 {
			u = uint64(cLong(f-(1<<63))) ^ 1<<63
		}
		base := map[byte]int{'o': 8, 'u': 10, 'x': 16, 'X': 16}[verb]
		digits = strconv.FormatUint(u, base)
		if verb == 'X' {
			digits = strings.ToUpper(digits)
		}
		if s.alt && u != 0 && (verb == 'x' || verb == 'X') {
			prefix = "0" + string(verb)
		}
	}
	switch {
	case s.prec == 0 && digits == "0":
		digits = ""
	case s.prec > len(digits):
		digits = strings.Repeat("0", s.prec-len(digits)) + digits
	}
	if s.alt && verb == 'o' && !strings.HasPrefix(digits, "0") {
		digits = "0" + digits
	}
	return s.pad(sign+prefix, digits, s.zero && !s.minus && s.prec < 0)
}

// cLong is C's (long)f on x86-64: truncation, and the minimum for NaN and
// for values out of range.
func cLong(f float64) int64 {
	if f != f || f >= 1<<63 || f < -(1<<63) {
		return math.MinInt64
	}
	return int64(f)
}

func absUint(n int64) uint64 {
	if n < 0 {
		return -uint64(n)
	}
	return uint64(n)
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

// cNumber is s as C reads it (up to its first NUL), the index past the
// spaces and the sign strtod and strtoul skip, and whether the sign was
// '-'.
func cNumber(s string) (string, int, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := i < len(s) && s[i] == '-'
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	return s, i, neg
}

// onlySpaces reports whether s holds nothing but spaces from i on, as Lua
// requires after a number it reads.
func onlySpaces(s string, i int) bool {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i == len(s)
}

// str2number is Lua 5.1's luaO_str2d: glibc's strtod (decimal, hex with an
// optional binary exponent, inf, infinity, nan, leading spaces, a sign) on
// the text up to the first NUL (Lua reads it as a C string), followed by
// nothing but spaces.
func str2number(s string) (float64, bool) {
	s, i, neg := cNumber(s)
	digits := func(j int, hex bool) int {
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || hex && strings.IndexByte("abcdefABCDEF", s[j]) >= 0) {
			j++
		}
		return j
	}
	// mantissa reads digits[.digits] from j, then an exponent marked by
	// one of exp; end == j when no digit was read.
	mantissa := func(j int, hex bool, exp string) (end int) {
		k := digits(j, hex)
		n := k - j
		if k < len(s) && s[k] == '.' {
			k2 := digits(k+1, hex)
			n += k2 - k - 1
			k = k2
		}
		if n == 0 {
			return j
		}
		if k < len(s) && strings.IndexByte(exp, s[k]) >= 0 {
			e := k + 1
			if e < len(s) && (s[e] == '+' || s[e] == '-') {
				e++
			}
			if e2 := digits(e, false); e2 > e {
				k = e2
			}
		}
		return k
	}
	var f float64
	rest := strings.ToLower(s[i:])
	end := i
	switch {
	case strings.HasPrefix(rest, "0x") && mantissa(i+2, true, "pP") > i+2:
		end = mantissa(i+2, true, "pP")
		hex := s[i:end]
		if !strings.ContainsAny(hex, "pP") {
			hex += "p0"
		}
		f, _ = strconv.ParseFloat(hex, 64)
	case strings.HasPrefix(rest, "infinity"):
		end, f = i+8, math.Inf(1)
	case strings.HasPrefix(rest, "inf"):
		end, f = i+3, math.Inf(1)
	case strings.HasPrefix(rest, "nan"):
		end, f = i+3, math.NaN()
		if j := strings.IndexByte(s[end:], ')'); strings.HasPrefix(s[end:], "(") && j > 0 &&
			strings.Trim(s[end+1:end+j], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == "" {
			end += j + 1
		}
	default:
		end = mantissa(i, false, "eE")
		if end == i {
			return 0, false
		}
		f, _ = strconv.ParseFloat(s[i:end], 64) // out of range: ±Inf or 0, as strtod
	}
	if neg {
		f = -f
	}
	return f, onlySpaces(s, end)
}

// strtoul is C's strtoul(s, &end, base) followed, as in Lua 5.1's
// tonumber with a base, by nothing but spaces: a negative number wraps
// around, one past 64 bits is the maximum.
func strtoul(s string, base int) (uint64, bool) {
	s, i, neg := cNumber(s)
	digit := func(c byte) int {
		switch {
		case c >= '0' && c <= '9':
			return int(c - '0')
		case c|0x20 >= 'a' && c|0x20 <= 'z':
			return int(c|0x20-'a') + 10
		}
		return 99
	}
	if base == 16 && i+2 < len(s) && s[i] == '0' && s[i+1]|0x20 == 'x' && digit(s[i+2]) < 16 {
		i += 2
	}
	start := i
	var n uint64
	over := false
	for ; i < len(s) && digit(s[i]) < base; i++ {
		d := uint64(digit(s[i]))
		if n > (math.MaxUint64-d)/uint64(base) {
			over = true
		}
		n = n*uint64(base) + d
	}
	if i == start {
		return 0, false
	}
	switch {
	case over:
		n = math.MaxUint64
	case neg:
		n = -n
	}
	return n, onlySpaces(s, i)
}

// typeName is Lua 5.1's name of an argument's type, "no value" past the
// last argument.
func typeName(L *glua.LState, n int) string {
	if n > L.GetTop() {
		return "no value"
	}
	return L.Get(n).Type().String()
}

// argError raises Lua 5.1's luaL_argerror text.
func argError(L *glua.LState, n int, fn, msg string) {
	L.RaiseError("bad argument #%d to '%s' (%s)", n, fn, msg)
}

// checkNumber is luaL_checknumber: a number, or a string that reads as one.
func checkNumber(L *glua.LState, n int, fn string) float64 {
	switch v := L.Get(n).(type) {
	case glua.LNumber:
		return float64(v)
	case glua.LString:
		if f, ok := str2number(string(v)); ok {
			return f
		}
	}
	argError(L, n, fn, "number expected, got "+typeName(L, n))
	return 0
}

// checkString is luaL_checklstring: a string, or a number as "%.14g".
func checkString(L *glua.LState, n int, fn string) string {
	s, ok := luaString(L.Get(n))
	if !ok {
		argError(L, n, fn, "string expected, got "+typeName(L, n))
	}
	return s
}

// tostring is Lua 5.1's: numbers as "%.14g", anything else as gopher-lua
// writes it (__tostring, addresses).
func tostring(orig glua.LGFunction) glua.LGFunction {
	return func(L *glua.LState) int {
		if n, ok := L.Get(1).(glua.LNumber); ok {
			L.Push(glua.LString(numberString(float64(n))))
			return 1
		}
		return orig(L)
	}
}

// tonumber is Lua 5.1's tonumber(e [, base]).
func tonumber(L *glua.LState) int {
	base := 10
	if v := L.Get(2); v != glua.LNil {
		base = int(checkNumber(L, 2, "tonumber"))
	}
	if base == 10 {
		if L.GetTop() < 1 {
			argError(L, 1, "tonumber", "value expected")
		}
		switch v := L.Get(1).(type) {
		case glua.LNumber:
			L.Push(v)
			return 1
		case glua.LString:
			if f, ok := str2number(string(v)); ok {
				L.Push(glua.LNumber(f))
				return 1
			}
		}
		L.Push(glua.LNil)
		return 1
	}
	s := checkString(L, 1, "tonumber")
	if base < 2 || base > 36 {
		argError(L, 2, "tonumber", "base out of range")
	}
	if n, ok := strtoul(s, base); ok {
		L.Push(glua.LNumber(float64(n)))
		return 1
	}
	L.Push(glua.LNil)
	return 1
}

// assert is Lua 5.1's: its message is a string or a number ("%.14g"),
// taken as it is (gopher-lua reads it as a format and writes numbers as
// Go does).
func assert(L *glua.LState) int {
	if L.GetTop() < 1 {
		argError(L, 1, "assert", "value expected")
	}
	if L.ToBool(1) {
		return L.GetTop()
	}
	msg := "assertion failed!"
	if L.Get(2) != glua.LNil {
		msg = checkString(L, 2, "assert")
	}
	L.RaiseError("%s", msg)
	return 0
}
