package relay

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// The RESP3 the backend connections read. Values: string (simple, bulk,
// verbatim, double, big number), int64, bool, nil, []any (array, set,
// map flattened into key, value, …), Push (an out-of-band > frame) and
// ServerError (an error reply, returned as a value, not as the error).
// Attributes are read and dropped.

// Push is an out-of-band frame: ["message", channel, payload], …
type Push []any

// ServerError is an error reply from a backend.
type ServerError string

func (e ServerError) Error() string { return string(e) }

// maxBulk bounds one bulk string from a backend (Redis's own limit).
const maxBulk = 512 << 20

// readValue reads one RESP3 value.
func readValue(br *bufio.Reader) (any, error) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		if len(line) < 3 || line[len(line)-2] != '\r' {
			return nil, fmt.Errorf("backend protocol error: %q", line)
		}
		body := line[1 : len(line)-2]
		switch line[0] {
		case '+', ',', '(':
			return string(body), nil
		case '-':
			return ServerError(body), nil
		case ':':
			return strconv.ParseInt(string(body), 10, 64)
		case '_':
			return nil, nil
		case '#':
			return len(body) == 1 && body[0] == 't', nil
		case '$', '=', '!':
			n, err := strconv.Atoi(string(body))
			if err != nil || n < -1 || n > maxBulk {
				return nil, fmt.Errorf("backend protocol error: length %q", body)
			}
			if n == -1 {
				return nil, nil
			}
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(br, buf); err != nil {
				return nil, err
			}
			s := string(buf[:n])
			switch line[0] {
			case '!':
				return ServerError(s), nil
			case '=':
				if len(s) >= 4 && s[3] == ':' { // "txt:" encoding prefix
					s = s[4:]
				}
			}
			return s, nil
		case '*', '~', '>', '%', '|':
			n, err := strconv.Atoi(string(body))
			if err != nil || n < -1 {
				return nil, fmt.Errorf("backend protocol error: length %q", body)
			}
			kind := line[0]
			if n == -1 {
				return nil, nil
			}
			if kind == '%' || kind == '|' {
				n *= 2
			}
			out := make([]any, n)
			for i := range out {
				if out[i], err = readValue(br); err != nil {
					return nil, err
				}
			}
			switch kind {
			case '>':
				return Push(out), nil
			case '|':
				continue // an attribute: the value follows
			}
			return out, nil
		}
		return nil, fmt.Errorf("backend protocol error: unexpected %q", line)
	}
}

// appendCommand encodes args (strings or ints) as a RESP array of bulk
// strings.
func appendCommand(b []byte, args ...any) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case int:
			s = strconv.Itoa(v)
		case int64:
			s = strconv.FormatInt(v, 10)
		default:
			s = fmt.Sprint(v)
		}
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, '\r', '\n')
		b = append(b, s...)
		b = append(b, '\r', '\n')
	}
	return b
}

// appendStrings encodes name followed by args.
func appendStrings(b []byte, name string, args []string) []byte {
	all := make([]any, 0, len(args)+1)
	all = append(all, name)
	for _, a := range args {
		all = append(all, a)
	}
	return appendCommand(b, all...)
}

// str reads a string value; ok false for anything else.
func str(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}
