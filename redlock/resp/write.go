package resp

import (
	"fmt"
	"strconv"
)

// AppendCommand appends args as one command: an array of bulk strings.
func AppendCommand(b []byte, args ...any) []byte {
	b = AppendArrayLen(b, len(args))
	return AppendArgs(b, args...)
}

// AppendStrings appends the command name followed by args.
func AppendStrings(b []byte, name string, args []string) []byte {
	b = AppendArrayLen(b, 1+len(args))
	b = AppendBulk(b, name)
	for _, a := range args {
		b = AppendBulk(b, a)
	}
	return b
}

// AppendArrayLen appends the header of an array of n elements, for a
// caller that appends the elements itself.
func AppendArrayLen(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// AppendArgs appends each of args as a bulk string: a string or []byte
// as it is, an int or int64 in decimal, anything else as fmt.Sprint
// writes it.
func AppendArgs(b []byte, args ...any) []byte {
	for _, a := range args {
		switch v := a.(type) {
		case string:
			b = AppendBulk(b, v)
		case []byte:
			b = appendBulk(b, v)
		case int:
			b = AppendBulkInt(b, int64(v))
		case int64:
			b = AppendBulkInt(b, v)
		default:
			b = AppendBulk(b, fmt.Sprint(v))
		}
	}
	return b
}

// AppendBulk appends s as a bulk string.
func AppendBulk(b []byte, s string) []byte { return appendBulk(b, s) }

func appendBulk[T ~string | ~[]byte](b []byte, s T) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendBulkInt appends x in decimal as a bulk string.
func AppendBulkInt(b []byte, x int64) []byte {
	var digits [20]byte
	return appendBulk(b, strconv.AppendInt(digits[:0], x, 10))
}
