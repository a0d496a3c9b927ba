package lua

import (
	"math"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// Library functions whose cost grows with their input are wrapped: they
// charge the run's budget, in instructions or in string bytes, before the
// original runs. A single call therefore cannot do unbounded work behind
// the interpreter's back.

// concat is "..": strings and numbers, counted against the byte budget.
func (sb *sandbox) concat(L *glua.LState) int {
	a, b := L.Get(1), L.Get(2)
	for _, v := range []glua.LValue{a, b} {
		if t := v.Type(); t != glua.LTString && t != glua.LTNumber {
			L.RaiseError("attempt to concatenate a %s value", t.String())
		}
	}
	sa, _ := luaString(a)
	sbs, _ := luaString(b)
	sb.spend(L, int64(len(sa))+int64(len(sbs)))
	L.Push(glua.LString(sa + sbs))
	return 1
}

// patternCost estimates the work of matching a Lua pattern against a
// subject of n bytes: n^(q+1) for q repetition items (patternRepeats), as
// backtracking can try every length for each.
func patternCost(pat string, n int) int64 {
	q := patternRepeats(pat)
	cost := float64(n + 1)
	for i := 0; i < q && cost < 1e15; i++ {
		cost *= float64(n + 1)
	}
	return int64(math.Min(cost, 1e15))
}

// patternRepeats reads a Lua 5.1 pattern item by item. '*', '+', '-' and
// '?' quantify the single-character class before them (a character, '.',
// %x, [set]); after '(', ')', %b, a back-reference, another quantifier or
// at the start they are characters. A quantified item counts when what
// follows may go on from more than one of its lengths. One followed by
// nothing, or by a character it cannot match ('%d+' in '%d+-'), scans
// without multiplying: such items, %b and back-references count one
// between them. (gopher-lua, which runs the probes, reads '%f' as 'f':
// the set after it is an item.)
func patternRepeats(pat string) int {
	q, scans := 0, 0
	open, quant := "", byte(0) // the last quantified class, while what follows it is unread
	settle := func(once bool) {
		if open != "" && !once {
			q++
		} else if open != "" && quant != '?' {
			scans = 1
		}
		open = ""
	}
	i := 0
	if strings.HasPrefix(pat, "^") {
		i = 1
	}
	for i < len(pat) {
		c, j := pat[i], i+1
		switch {
		case c == '(' || c == ')' || c == '$' && j == len(pat):
			i = j
			continue
		case c == '%' && j < len(pat) && (pat[j] == 'b' || pat[j] >= '0' && pat[j] <= '9'):
			settle(false)
			i, scans = i+2, 1
			if pat[j] == 'b' {
				i += 2
			}
			continue
		case c == '%':
			j++
		case c == '[':
			if j < len(pat) && pat[j] == '^' {
				j++
			}
			for first := true; j < len(pat) && (first || pat[j] != ']'); first = false {
				if pat[j] == '%' {
					j++
				}
				j++
			}
			j++
		}
		j = min(j, len(pat))
		class, next := pat[i:j], byte(0)
		if j < len(pat) {
			next = pat[j]
		}
		if open != "" {
			lit := len(class) == 1 && c != '.' || c == '%' && len(class) == 2 && strings.IndexByte(magic, class[1]) >= 0
			settle(lit && next != '*' && next != '-' && next != '?' && !classHas(open, class[len(class)-1]))
		}
		if strings.IndexByte("*+-?", next) >= 0 {
			open, quant, j = class, next, j+1
		}
		i = j
	}
	settle(true)
	return q + scans
}

// classHas reports whether the single-character class cl (".", "a",
// "%d", "[^,]") matches byte c, as Lua 5.1's lstrlib reads it.
func classHas(cl string, c byte) bool {
	switch {
	case cl == ".":
		return true
	case cl[0] == '%' && len(cl) > 1:
		return escapeHas(cl[1], c)
	case cl[0] != '[':
		return cl[0] == c
	}
	neg, i := cl[1] == '^', 1 // cl ends with ']'
	if neg {
		i++
	}
	for ; i < len(cl)-1; i++ {
		switch {
		case cl[i] == '%':
			if i++; escapeHas(cl[i], c) {
				return !neg
			}
		case cl[i+1] == '-' && i+2 < len(cl)-1:
			if cl[i] <= c && c <= cl[i+2] {
				return !neg
			}
			i += 2
		case cl[i] == c:
			return !neg
		}
	}
	return neg
}

// escapeHas reports whether %e matches byte c (Lua 5.1, C locale).
func escapeHas(e, c byte) bool {
	lower, upper, digit := c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
	var in bool
	switch e | 0x20 {
	case 'a':
		in = lower || upper
	case 'c':
		in = c < ' ' || c == 127
	case 'd':
		in = digit
	case 'l':
		in = lower
	case 'p':
		in = c > ' ' && c < 127 && !lower && !upper && !digit
	case 's':
		in = c == ' ' || c >= '\t' && c <= '\r'
	case 'u':
		in = upper
	case 'w':
		in = lower || upper || digit
	case 'x':
		in = digit || c|0x20 >= 'a' && c|0x20 <= 'f'
	case 'z':
		in = c == 0
	default:
		return e == c
	}
	return in != (e >= 'A' && e <= 'Z')
}

// magic are the characters a pattern escapes with '%' to match them.
const magic = "^$()%.[]*+-?"

// patternByte is what a pattern's byte costs a probe in instructions:
// gopher-lua compiles the pattern on every call (0.3–0.7 µs a byte,
// measured), and one call cannot be stopped at the time limit.
const patternByte = 8

// chargePattern charges the work of matching pattern p on a subject of n
// bytes, and of compiling p; a pattern whose matching alone costs more
// than a run may do is named.
func (sb *sandbox) chargePattern(L *glua.LState, p string, n int) {
	c := patternCost(p, n)
	if c > runSteps && sb.b.err == nil {
		sb.b.err = &patternError{n}
	}
	sb.charge(L, c+patternByte*int64(len(p)))
}

func (sb *sandbox) boundStrings(str *glua.LTable) {
	L := sb.L
	wrap := func(name string, check func(L *glua.LState)) {
		orig := gfn(str.RawGetString(name))
		str.RawSetString(name, L.NewFunction(func(L *glua.LState) int {
			check(L)
			return orig(L)
		}))
	}
	str.RawSetString("dump", glua.LNil)
	str.RawSetString("gfind", glua.LNil)
	wrap("rep", func(L *glua.LState) {
		s, n := L.CheckString(1), L.CheckNumber(2)
		if n > 0 && len(s) > 0 {
			if float64(n) > float64(sb.b.bytes)/float64(len(s)) {
				sb.spend(L, math.MaxInt64)
			}
			sb.spend(L, int64(n)*int64(len(s)))
		}
	})
	str.RawSetString("format", L.NewFunction(sb.format))
	for _, name := range []string{"upper", "lower", "reverse"} {
		wrap(name, func(L *glua.LState) { sb.spend(L, int64(len(L.CheckString(1)))) })
	}
	for _, name := range []string{"find", "match", "gmatch"} {
		wrap(name, func(L *glua.LState) {
			s, p := L.CheckString(1), L.CheckString(2)
			if name == "find" && L.ToBool(4) {
				sb.charge(L, int64(len(s)))
				return
			}
			sb.chargePattern(L, p, len(s))
		})
	}
	wrap("gsub", func(L *glua.LState) {
		s, p := L.CheckString(1), L.CheckString(2)
		if L.Get(3).Type() != glua.LTString {
			L.RaiseError("string.gsub with a function or table replacement is not available in the analysis sandbox")
		}
		r := L.CheckString(3)
		n := int64(len(s))
		sb.chargePattern(L, p, len(s))
		sb.charge(L, n*n/16)
		sb.spend(L, n*int64(len(r)+1)+int64(len(r)))
	})
	// After the bounds, which then see the strings the functions will.
	for name, args := range map[string][]int{"byte": {1}, "find": {1, 2}, "gmatch": {1, 2}, "gsub": {1, 2, 3},
		"len": {1}, "lower": {1}, "match": {1, 2}, "rep": {1}, "reverse": {1}, "sub": {1}, "upper": {1}} {
		str.RawSetString(name, L.NewFunction(numberArgs(gfn(str.RawGetString(name)), args...)))
	}
}

func (sb *sandbox) boundTables(tab *glua.LTable) {
	L := sb.L
	wrap := func(name string, check func(L *glua.LState)) {
		orig := gfn(tab.RawGetString(name))
		tab.RawSetString(name, L.NewFunction(func(L *glua.LState) int {
			check(L)
			return orig(L)
		}))
	}
	for _, name := range []string{"insert", "remove", "maxn"} {
		wrap(name, func(L *glua.LState) { sb.charge(L, int64(L.CheckTable(1).Len())) })
	}
	wrap("sort", func(L *glua.LState) {
		n := int64(L.CheckTable(1).Len())
		sb.charge(L, n*int64(1+math.Log2(float64(n+1))))
	})
	tab.RawSetString("concat", L.NewFunction(sb.tableConcat))
}

// tableConcat is Lua 5.1's table.concat, which writes numbers as
// "%.14g" and, unlike gopher-lua's, does not clamp i and j to the table:
// a missing element is an error. Each element is paid for before it is
// added.
func (sb *sandbox) tableConcat(L *glua.LState) int {
	t := L.CheckTable(1)
	sep := ""
	if L.Get(2) != glua.LNil {
		sep = checkString(L, 2, "concat")
	}
	i, j := int64(1), int64(t.Len())
	if L.Get(3) != glua.LNil {
		i = cLong(checkNumber(L, 3, "concat"))
	}
	if L.Get(4) != glua.LNil {
		j = cLong(checkNumber(L, 4, "concat"))
	}
	var b strings.Builder
	if i <= j {
		sb.charge(L, j-i+1)
	}
	for k := i; k <= j; k++ {
		v := t.RawGetInt(int(k))
		s, ok := luaString(v)
		if !ok {
			L.RaiseError("invalid value (%s) at index %d in table for 'concat'", v.Type().String(), k)
		}
		if k < j {
			s += sep
		}
		sb.spend(L, int64(len(s)))
		b.WriteString(s)
	}
	L.Push(glua.LString(b.String()))
	return 1
}

// numberArgs wraps a library function so that the arguments at args
// that are numbers reach it as Lua 5.1 would read them as strings,
// "%.14g", not as gopher-lua writes them.
func numberArgs(orig glua.LGFunction, args ...int) glua.LGFunction {
	return func(L *glua.LState) int {
		for _, i := range args {
			if n, ok := L.Get(i).(glua.LNumber); ok {
				L.Replace(i, glua.LString(numberString(float64(n))))
			}
		}
		return orig(L)
	}
}
