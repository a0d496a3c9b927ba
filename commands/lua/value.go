package lua

import (
	"strconv"
	"strings"
)

// ValueKind is the RESP type of a script's reply.
type ValueKind uint8

const (
	// Nil is a null bulk string (Lua false or nil).
	Nil ValueKind = iota
	// Int is an integer reply (a Lua number, truncated; Lua true is 1).
	Int
	// Bulk is a bulk string (a Lua string).
	Bulk
	// Status is a status reply (a Lua table {ok = "…"}).
	Status
	// Err is an error reply (a Lua table {err = "…"}); Str holds the text
	// as the script gave it, without the leading "-".
	Err
	// Array is an array reply (a Lua table read from 1 up to the first nil).
	Array
)

func (k ValueKind) String() string {
	switch k {
	case Nil:
		return "nil"
	case Int:
		return "integer"
	case Bulk:
		return "bulk"
	case Status:
		return "status"
	case Err:
		return "error"
	case Array:
		return "array"
	}
	return "ValueKind(" + strconv.Itoa(int(k)) + ")"
}

// Value is a script's reply as Redis would send it. The proxy turns it into
// RESP.
type Value struct {
	Kind  ValueKind
	Int   int64   // Int
	Str   string  // Bulk, Status, Err
	Elems []Value // Array
}

// NilValue is the null reply.
func NilValue() Value { return Value{Kind: Nil} }

// IntValue is an integer reply.
func IntValue(n int64) Value { return Value{Kind: Int, Int: n} }

// BulkValue is a bulk string reply.
func BulkValue(s string) Value { return Value{Kind: Bulk, Str: s} }

// StatusValue is a status reply such as OK.
func StatusValue(s string) Value { return Value{Kind: Status, Str: s} }

// ErrorValue is an error reply; s is its text without the leading "-".
func ErrorValue(s string) Value { return Value{Kind: Err, Str: s} }

// ArrayValue is an array reply.
func ArrayValue(elems ...Value) Value { return Value{Kind: Array, Elems: elems} }

// Equal reports whether v and w are the same reply.
func (v Value) Equal(w Value) bool {
	if v.Kind != w.Kind {
		return false
	}
	switch v.Kind {
	case Int:
		return v.Int == w.Int
	case Bulk, Status, Err:
		return v.Str == w.Str
	case Array:
		if len(v.Elems) != len(w.Elems) {
			return false
		}
		for i := range v.Elems {
			if !v.Elems[i].Equal(w.Elems[i]) {
				return false
			}
		}
	}
	return true
}

// String renders v for logs and test failures: (nil), (integer) 1, "bulk",
// +OK, -ERR …, [a, b].
func (v Value) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v Value) write(b *strings.Builder) {
	switch v.Kind {
	case Nil:
		b.WriteString("(nil)")
	case Int:
		b.WriteString("(integer) ")
		b.WriteString(strconv.FormatInt(v.Int, 10))
	case Bulk:
		b.WriteString(strconv.Quote(v.Str))
	case Status:
		b.WriteString("+" + v.Str)
	case Err:
		b.WriteString("-" + v.Str)
	case Array:
		b.WriteByte('[')
		for i, e := range v.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			e.write(b)
		}
		b.WriteByte(']')
	default:
		b.WriteString(v.Kind.String())
	}
}
