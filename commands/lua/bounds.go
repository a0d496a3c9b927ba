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
	sa, sbs := a.String(), b.String()
	sb.spend(L, int64(len(sa))+int64(len(sbs)))
	L.Push(glua.LString(sa + sbs))
	return 1
}

// patternCost estimates the work of matching a Lua pattern against a
// subject of n bytes: n^(q+1) for q repetition items, as backtracking can
// try every length for each.
func patternCost(pat string, n int) int64 {
	q := 0
	for i := 0; i < len(pat); i++ {
		switch pat[i] {
		case '%':
			i++
		case '*', '+', '-', '?':
			q++
		}
	}
	cost := float64(n + 1)
	for i := 0; i < q && cost < 1e15; i++ {
		cost *= float64(n + 1)
	}
	return int64(math.Min(cost, 1e15))
}

// formatCost bounds the length string.format can produce.
func formatCost(L *glua.LState, f string) int64 {
	n := int64(len(f))
	for i := 2; i <= L.GetTop(); i++ {
		n += int64(len(L.Get(i).String())) + 32
	}
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
			i++
		}
		for _, part := range []bool{true, false} {
			if !part {
				if i >= len(f) || f[i] != '.' {
					break
				}
				i++
			}
			w := int64(0)
			for i < len(f) && f[i] >= '0' && f[i] <= '9' && w < 1e7 {
				w = w*10 + int64(f[i]-'0')
				i++
			}
			n += w
		}
	}
	return n
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
	wrap("format", func(L *glua.LState) {
		n := formatCost(L, L.CheckString(1))
		sb.spend(L, n)
		sb.charge(L, n) // fmt pads a byte at a time
	})
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
			sb.charge(L, patternCost(p, len(s)))
		})
	}
	wrap("gsub", func(L *glua.LState) {
		s, p := L.CheckString(1), L.CheckString(2)
		if L.Get(3).Type() != glua.LTString {
			L.RaiseError("string.gsub with a function or table replacement is not available in the analysis sandbox")
		}
		r := L.CheckString(3)
		n := int64(len(s))
		sb.charge(L, patternCost(p, len(s))+n*n/16)
		sb.spend(L, n*int64(len(r)+1)+int64(len(r)))
	})
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
	wrap("concat", func(L *glua.LState) {
		t := L.CheckTable(1)
		sep := L.OptString(2, "")
		i, j := L.OptInt(3, 1), L.OptInt(4, t.Len())
		sb.charge(L, int64(j)-int64(i)+1)
		total := int64(0)
		for k := i; k <= j; k++ {
			total += int64(len(t.RawGetInt(k).String()) + len(sep))
		}
		sb.spend(L, total)
	})
}
