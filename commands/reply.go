package commands

import "strconv"

// Reply is a value a handler returns; proxy encodes it for the client's
// protocol version with AppendReply. The set of reply types is closed.
type Reply interface {
	appendTo(b []byte, proto int) []byte
}

// Simple is a status reply: +OK.
type Simple string

// Error is an error reply; the text starts with its code: "ERR syntax error".
type Error string

// Int is an integer reply.
type Int int64

// Bulk is a binary-safe bulk string.
type Bulk []byte

// BulkString is a bulk string held as a Go string.
type BulkString string

// Double is a floating-point number as Redis writes it ("3.5", "inf",
// "1.0000000000000001e+300"): , in RESP3, a bulk string in RESP2.
type Double string

// Verbatim is text for a person (INFO, CLIENT LIST): a verbatim string of
// format txt in RESP3 (=), a bulk string in RESP2, as Redis 7.
type Verbatim string

// Null is the null bulk string: $-1 in RESP2, _ in RESP3.
type Null struct{}

// NullArray is the null array: *-1 in RESP2, _ in RESP3.
type NullArray struct{}

// Array is an array of replies.
type Array []Reply

// Map is an ordered map: % in RESP3, a flat key/value array in RESP2.
type Map []KV

// KV is one entry of a Map.
type KV struct {
	Key   string
	Value Reply
}

// Set is an unordered collection: ~ in RESP3, an array in RESP2.
type Set []Reply

// Push is an out-of-band message: > in RESP3, an array in RESP2.
type Push []Reply

// Replies are several replies written back to back (SUBSCRIBE answers
// once per channel).
type Replies []Reply

// noReply writes nothing: the reply of a command a client silenced with
// CLIENT REPLY OFF or SKIP.
var noReply = Replies(nil)

// OK is the most common reply.
const OK = Simple("OK")

// AppendReply appends r encoded for protocol version proto (2 or 3).
func AppendReply(b []byte, r Reply, proto int) []byte {
	if r == nil {
		return Null{}.appendTo(b, proto)
	}
	return r.appendTo(b, proto)
}

func (s Simple) appendTo(b []byte, _ int) []byte { return appendLine(b, '+', string(s)) }

func (e Error) appendTo(b []byte, _ int) []byte { return appendLine(b, '-', string(e)) }

// appendLine appends a line of kind (+ or -) holding s with CR and LF
// replaced by spaces, so it can never break the framing (as Redis does).
func appendLine(b []byte, kind byte, s string) []byte {
	b = append(b, kind)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

func (n Int) appendTo(b []byte, _ int) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func (s Bulk) appendTo(b []byte, _ int) []byte { return appendBulk(b, s) }

func (s BulkString) appendTo(b []byte, _ int) []byte { return appendBulk(b, s) }

func (f Double) appendTo(b []byte, proto int) []byte {
	if proto >= 3 {
		return appendLine(b, ',', string(f))
	}
	return appendBulk(b, f)
}

func (v Verbatim) appendTo(b []byte, proto int) []byte {
	if proto < 3 {
		return appendBulk(b, v)
	}
	b = appendHeader(b, '=', len(v)+4)
	b = append(b, "txt:"...)
	b = append(b, v...)
	return append(b, '\r', '\n')
}

func appendBulk[T ~string | ~[]byte](b []byte, s T) []byte {
	b = appendHeader(b, '$', len(s))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func (Null) appendTo(b []byte, proto int) []byte {
	if proto >= 3 {
		return append(b, '_', '\r', '\n')
	}
	return append(b, "$-1\r\n"...)
}

func (NullArray) appendTo(b []byte, proto int) []byte {
	if proto >= 3 {
		return append(b, '_', '\r', '\n')
	}
	return append(b, "*-1\r\n"...)
}

func (a Array) appendTo(b []byte, proto int) []byte { return appendAggregate(b, '*', a, proto) }

func (s Set) appendTo(b []byte, proto int) []byte { return appendAggregate(b, '~', s, proto) }

func (p Push) appendTo(b []byte, proto int) []byte { return appendAggregate(b, '>', p, proto) }

// appendAggregate appends rs under a header of kind, an array's in RESP2.
func appendAggregate(b []byte, kind byte, rs []Reply, proto int) []byte {
	if proto < 3 {
		kind = '*'
	}
	b = appendHeader(b, kind, len(rs))
	return Replies(rs).appendTo(b, proto)
}

func (m Map) appendTo(b []byte, proto int) []byte {
	if proto >= 3 {
		b = appendHeader(b, '%', len(m))
	} else {
		b = appendHeader(b, '*', 2*len(m))
	}
	for _, kv := range m {
		b = BulkString(kv.Key).appendTo(b, proto)
		b = AppendReply(b, kv.Value, proto)
	}
	return b
}

func (rs Replies) appendTo(b []byte, proto int) []byte {
	for _, r := range rs {
		b = AppendReply(b, r, proto)
	}
	return b
}

func appendHeader(b []byte, kind byte, n int) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// Strings turns strings into an Array of bulk strings.
func Strings(ss ...string) Array {
	a := make(Array, len(ss))
	for i, s := range ss {
		a[i] = BulkString(s)
	}
	return a
}
