package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Status is a simple string reply (+OK), as opposed to a bulk string,
// which reads as a string.
type Status string

// StatusOK is the most common reply; Read returns it without a copy.
const StatusOK Status = "OK"

// PTTL is a PTTL reply (milliseconds) as a Duration: -1 (no expiry) and
// -2 (no key) stay as they are, and a ttl past what a Duration holds (292
// years) saturates instead of wrapping negative.
func PTTL(ms int64) time.Duration {
	switch {
	case ms < 0:
		return time.Duration(ms)
	case ms > int64(math.MaxInt64/time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// Error is an error reply from a backend: "NOSCRIPT No matching ...".
// Read returns it as a value; a caller may return it as an error.
type Error string

func (e Error) Error() string { return string(e) }

// RedisError marks it as a server's error reply for go-redis's helpers
// (redis.Error, redis.HasErrorPrefix).
func (Error) RedisError() {}

// Push is an out-of-band RESP3 frame: ["message", channel, payload], …
type Push []any

// MaxLen bounds a length a backend may declare: a bulk string's bytes
// (Redis's own proto-max-bulk-len default) or the elements of an array,
// set, map or push.
const MaxLen = 512 << 20

const (
	// maxDepth bounds the nesting of arrays, far beyond any reply Redis
	// makes, so that a hostile stream cannot grow the reader's stack.
	maxDepth = 1000
	// prealloc is how many elements of an array are allocated before
	// they arrive; a longer array grows as its elements are read.
	prealloc = 1024
)

// MaxReply bounds what one reply may make the reader hold: the bytes of
// its bulk strings plus one for each element of its arrays, sets, maps
// and pushes. No reply the proxy asks for comes near it (values are
// bounded by max_value_bytes, a script by vote's strings by its
// wrapper); a client's script that builds more would hold that much
// proxy memory per call.
const MaxReply = 64 << 20

// ErrProtocol is wrapped by every error for bytes that are not RESP.
var ErrProtocol = errors.New("backend protocol error")

// ErrTooDeep and ErrTooLarge are wrapped by the error of a well-framed
// reply past the reader's bounds: nested deeper than maxDepth, or more
// than MaxReply in all. Read has then read the whole reply, skipping what
// it did not keep, so the stream is at the next reply and stays usable.
// What a backend was asked caused it, not the backend: the error is the
// caller's, and its text is safe to show to a client.
var (
	ErrTooDeep  = fmt.Errorf("reply nested deeper than %d levels, past the proxy's bound", maxDepth)
	ErrTooLarge = fmt.Errorf("reply larger than %d bytes, past the proxy's bound", MaxReply)
)

// Skipped reports an error of a reply that Read skipped whole
// (ErrTooDeep, ErrTooLarge): the connection is still in step.
func Skipped(err error) bool {
	return errors.Is(err, ErrTooDeep) || errors.Is(err, ErrTooLarge)
}

// Read reads one reply; see the package doc for the values it returns.
func Read(br *bufio.Reader) (any, error) {
	return ReadMax(br, MaxReply)
}

// ReadMax is Read with limit in place of MaxReply.
func ReadMax(br *bufio.Reader, limit int) (any, error) {
	r := replyReader{br: br, left: limit}
	return r.read(0)
}

// replyReader reads one reply: left is what it may still hold (MaxReply).
type replyReader struct {
	br   *bufio.Reader
	left int
}

func (r *replyReader) read(depth int) (any, error) {
	br := r.br
	for {
		line, err := readLine(br)
		if err != nil {
			return nil, err
		}
		kind, body := line[0], line[1:len(line)-2] // body only until br is read again
		switch kind {
		case '+':
			if string(body) == "OK" {
				return StatusOK, nil
			}
			return Status(body), nil
		case '-':
			return Error(body), nil
		case ':':
			n, ok := parseInt(body)
			if !ok {
				return nil, fmt.Errorf("%w: integer %q", ErrProtocol, body)
			}
			return n, nil
		case ',', '(':
			return string(body), nil
		case '_':
			return nil, nil
		case '#':
			if len(body) != 1 || (body[0] != 't' && body[0] != 'f') {
				return nil, fmt.Errorf("%w: boolean %q", ErrProtocol, body)
			}
			return body[0] == 't', nil
		case '$', '=', '!':
			n, err := length(body)
			if err != nil || n == -1 {
				return nil, err
			}
			if n > r.left {
				if err := skipBulk(br, n); err != nil {
					return nil, err
				}
				return nil, ErrTooLarge
			}
			r.left -= n
			s, err := readBulk(br, n)
			if err != nil {
				return nil, err
			}
			switch kind {
			case '!':
				return Error(s), nil
			case '=':
				if len(s) >= 4 && s[3] == ':' { // "txt:", the encoding
					s = s[4:]
				}
			}
			return s, nil
		case '*', '~', '>', '%', '|':
			n, err := length(body)
			if err != nil || n == -1 {
				return nil, err
			}
			if kind == '%' || kind == '|' {
				n *= 2 // key, value, …
			}
			after := 0 // frames after these n: an attribute's value
			if kind == '|' {
				after = 1
			}
			var bound error
			switch {
			case depth >= maxDepth:
				bound = ErrTooDeep
			case n > r.left:
				bound = ErrTooLarge
			}
			if bound != nil {
				if err := skip(br, n+after); err != nil {
					return nil, err
				}
				return nil, bound
			}
			r.left -= n
			out := make([]any, 0, min(n, prealloc))
			for i := range n {
				v, err := r.read(depth + 1)
				if Skipped(err) { // read the rest of this reply, then say so
					if err2 := skip(br, n-i-1+after); err2 != nil {
						return nil, err2
					}
				}
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			switch kind {
			case '>':
				return Push(out), nil
			case '|':
				continue // an attribute: the value follows
			}
			return out, nil
		}
		return nil, fmt.Errorf("%w: unexpected %q", ErrProtocol, line)
	}
}

// readLine reads one line with its CRLF, valid until br is read again.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrProtocol, br.Size())
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: %q", ErrProtocol, line)
	}
	return line, nil
}

// skip reads n frames and keeps nothing: RESP declares every length, so
// nested frames are counted, not held. The stream's own errors (bad
// framing, its end) are returned as Read returns them.
func skip(br *bufio.Reader, n int) error {
	for pending := int64(n); pending > 0; pending-- {
		line, err := readLine(br)
		if err != nil {
			return eofMeansTruncated(err)
		}
		kind, body := line[0], line[1:len(line)-2]
		switch kind {
		case '+', '-', ':', ',', '(', '_', '#':
		case '$', '=', '!':
			n, err := length(body)
			if err != nil {
				return err
			}
			if n >= 0 {
				if err := skipBulk(br, n); err != nil {
					return err
				}
			}
		case '*', '~', '>', '%', '|':
			n, err := length(body)
			if err != nil {
				return err
			}
			switch {
			case n < 0:
			case kind == '%':
				pending += 2 * int64(n)
			case kind == '|':
				pending += 2*int64(n) + 1 // and the value it annotates
			default:
				pending += int64(n)
			}
		default:
			return fmt.Errorf("%w: unexpected %q", ErrProtocol, line)
		}
	}
	return nil
}

// skipBulk discards a bulk string's n bytes and its CRLF.
func skipBulk(br *bufio.Reader, n int) error {
	if _, err := br.Discard(n); err != nil {
		return eofMeansTruncated(err)
	}
	crlf, err := br.Peek(2)
	if err != nil {
		return eofMeansTruncated(err)
	}
	if crlf[0] != '\r' || crlf[1] != '\n' {
		return fmt.Errorf("%w: a bulk string of %d bytes without its CRLF", ErrProtocol, n)
	}
	_, _ = br.Discard(2)
	return nil
}

// readBulk reads n bytes and the CRLF after them.
func readBulk(br *bufio.Reader, n int) (string, error) {
	if n+2 <= br.Size() { // read in place: one copy, the string's
		b, err := br.Peek(n + 2)
		if err != nil {
			return "", eofMeansTruncated(err)
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return "", fmt.Errorf("%w: a bulk string of %d bytes without its CRLF", ErrProtocol, n)
		}
		s := string(b[:n])
		_, _ = br.Discard(n + 2)
		return s, nil
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(br, buf); err != nil {
		return "", eofMeansTruncated(err)
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return "", fmt.Errorf("%w: a bulk string of %d bytes without its CRLF", ErrProtocol, n)
	}
	return string(buf[:n]), nil
}

// eofMeansTruncated: a stream that ends inside a value was cut short.
func eofMeansTruncated(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// length reads a declared length: -1 (none) up to MaxLen.
func length(b []byte) (int, error) {
	n, ok := parseInt(b)
	if !ok || n < -1 || n > MaxLen {
		return 0, fmt.Errorf("%w: length %q", ErrProtocol, b)
	}
	return int(n), nil
}

// parseInt reads a decimal int64 ("-" and digits) without a copy.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 { // 19 digits cannot overflow a uint64
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= math.MaxInt64+1:
		return -int64(n), true // n = 2^63 gives math.MinInt64
	case !neg && n <= math.MaxInt64:
		return int64(n), true
	}
	return 0, false
}
