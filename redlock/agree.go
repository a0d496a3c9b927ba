package redlock

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// How a vote decides (Vote; the rules are written out in vote.go): the
// replies are grouped by agreement class, a reply's whole content with
// every positive integer outside an unordered part written as "some
// positive number". The class a quorum of backends gave answers one of
// its replies as a backend gave it, one that q replies of the class meet
// or exceed in every positive integer (lowerBounds). A reply is never put
// together from different backends' elements.

// elemShape is the shape of element i of an array of shape s.
func elemShape(s script.Shape, i int) script.Shape {
	if s.Order == script.InOrder && i < len(s.Elems) {
		return s.Elems[i]
	}
	return script.Shape{}
}

// Combine is the reply that a quorum q of replies agrees on, shaped by sh,
// and how many replies gave it; when none has a quorum, v is nil and
// agreed is the size of the largest class (< q).
func Combine(replies []any, q int, sh script.Shape) (v any, agreed int) {
	var classes []string
	groups := map[string][]any{}
	for _, r := range replies {
		k := string(class(nil, r, sh, false))
		if _, ok := groups[k]; !ok {
			classes = append(classes, k)
		}
		groups[k] = append(groups[k], r)
	}
	for _, k := range classes {
		g := groups[k]
		agreed = max(agreed, len(g))
		if len(g) >= q {
			if v, ok := lowerBounds(g, q, sh); ok {
				return v, len(g)
			}
			return nil, q - 1 // agreeing in kind, not in numbers a quorum meets
		}
	}
	return nil, agreed
}

// class appends v's agreement class to b. Within an unordered part, or
// with exact set, integers are classed by their value; elsewhere every
// positive integer is one class (a remaining ttl differs by milliseconds
// between backends), zero and negative integers (codes: -1, -2) by value.
func class(b []byte, v any, sh script.Shape, exact bool) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, 'n')
	case int64:
		if v > 0 && !exact {
			return append(b, '+')
		}
		b = strconv.AppendInt(append(b, 'i'), v, 10)
		return append(b, ';')
	case Status:
		return text(append(b, 's'), string(v))
	case string:
		return text(append(b, 'b'), v)
	case RedisError:
		return text(append(b, 'e'), string(v))
	case []any:
		b = strconv.AppendInt(append(b, 'a'), int64(len(v)), 10)
		b = append(b, ':')
		switch {
		case sh.Order == script.AnyOrder:
			return appendSorted(b, v, 1)
		case sh.Order == script.PairsAnyOrder && len(v)%2 == 0:
			return appendSorted(b, v, 2)
		}
		for i, e := range v {
			b = class(b, e, elemShape(sh, i), exact)
		}
		return b
	}
	return text(append(b, '?'), fmt.Sprintf("%T %v", v, v))
}

// appendSorted appends the exact classes of vs taken n elements at a time,
// sorted: the same multiset (of pairs, with n = 2) in any order.
func appendSorted(b []byte, vs []any, n int) []byte {
	parts := make([][]byte, 0, len(vs)/n)
	for i := 0; i+n <= len(vs); i += n {
		var p []byte
		for _, e := range vs[i : i+n] {
			p = class(p, e, script.Shape{}, true)
		}
		parts = append(parts, p)
	}
	slices.SortFunc(parts, bytes.Compare)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// text appends a length-prefixed string, so that no two classes run into
// each other.
func text(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	return append(append(b, ':'), s...)
}

// lowerBounds answers a class g of at least q agreeing replies, or false
// when no reply of it can be answered. Without positive integers they are
// all the same reply (an unordered part in the first one's order).
// Otherwise the answer is one reply a backend gave, as it gave it: the
// first, ranked by its positive integers (in reply order, largest first,
// lexicographically), that at least q replies of the class meet or exceed
// in every positive integer, so that q backends hold at least what it
// says. With one positive integer (a pttl) that is the quorum-th largest:
// how long a quorum holds at least that. With several, no reply may be
// met by q others in every position: then none is answered, rather than
// one put together from different backends' numbers.
func lowerBounds(g []any, q int, sh script.Shape) (any, bool) {
	ints := make([][]int64, len(g))
	for i, r := range g {
		ints[i] = positives(nil, r, sh)
	}
	if len(ints[0]) == 0 {
		return g[0], true
	}
	order := make([]int, len(g))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return slices.CompareFunc(ints[b], ints[a], cmp.Compare[int64]) })
	for _, c := range order {
		met := 0
		for _, i := range order {
			if dominates(ints[i], ints[c]) {
				met++
			}
		}
		if met >= q {
			return g[c], true
		}
	}
	return nil, false
}

// dominates reports every number of a at least its peer in b.
func dominates(a, b []int64) bool {
	for j := range b {
		if a[j] < b[j] {
			return false
		}
	}
	return true
}

// positives appends the positive integers of v that class leaves inexact,
// in reply order.
func positives(out []int64, v any, sh script.Shape) []int64 {
	switch v := v.(type) {
	case int64:
		if v > 0 {
			out = append(out, v)
		}
	case []any:
		if sh.Order != script.InOrder {
			return out
		}
		for i, e := range v {
			out = positives(out, e, elemShape(sh, i))
		}
	}
	return out
}

// quorumEqual is the value q of vs are equal to (comparable values).
func quorumEqual(vs []any, q int) (any, bool) {
	for i, v := range vs {
		n := 0
		for _, w := range vs[i:] {
			if w == v {
				n++
			}
		}
		if n >= q {
			return v, true
		}
	}
	return nil, false
}
