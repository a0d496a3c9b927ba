package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// respError is an error reply ("-ERR …" or "!…"), without the leading marker.
type respError string

func (e respError) Error() string { return string(e) }

// respVerbatim is a RESP3 verbatim string ("=").
type respVerbatim struct{ Format, Text string }

// respPush is a RESP3 push (">").
type respPush []any

// conn is a raw RESP connection for tests that must see the wire.
type conn struct {
	t       testing.TB
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

// rawConn dials addr; the connection is closed at the end of the test.
func rawConn(t testing.TB, addr string) *conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &conn{t: t, c: c, r: bufio.NewReader(c), timeout: 5 * time.Second}
}

// send writes b as is.
func (c *conn) send(b []byte) {
	c.t.Helper()
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write(b); err != nil {
		c.t.Fatalf("write %q: %v", truncate(b), err)
	}
}

// sendCmd writes one command as a RESP array of bulk strings.
func (c *conn) sendCmd(args ...string) {
	c.t.Helper()
	c.send(encodeCmd(args...))
}

// do sends a command and reads its reply.
func (c *conn) do(args ...string) any {
	c.t.Helper()
	c.sendCmd(args...)
	return c.readReply()
}

// readReply reads one reply; it fails the test on a read error or timeout.
func (c *conn) readReply() any {
	c.t.Helper()
	v, err := c.tryReadReply(c.timeout)
	if err != nil {
		c.t.Fatalf("read reply: %v", err)
	}
	return v
}

// tryReadReply reads one reply within d.
func (c *conn) tryReadReply(d time.Duration) (any, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	return parseReply(c.r)
}

// peek returns the next n bytes without consuming them.
func (c *conn) peek(n int) []byte {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(c.timeout))
	b, err := c.r.Peek(n)
	if err != nil {
		c.t.Fatalf("peek %d bytes: %v (got %q)", n, err, b)
	}
	return b
}

// expectClosed asserts the server closes the connection within d, with no
// further reply.
func (c *conn) expectClosed(d time.Duration) {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	b, err := c.r.ReadByte()
	if err == nil {
		rest, _ := c.r.Peek(c.r.Buffered())
		c.t.Fatalf("expected the connection to be closed, got more data: %q", append([]byte{b}, rest...))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("expected the connection to be closed within %v, it is still open", d)
	}
	// io.EOF or a connection reset: closed.
}

func encodeCmd(args ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return append(append([]byte{}, b[:80]...), "…"...)
	}
	return b
}

// parseReply parses one RESP2/RESP3 reply into string, respError, int64,
// nil, []any, map[any]any, float64, bool, *big.Int, respVerbatim, respPush,
// or (for a set) []any.
func parseReply(r *bufio.Reader) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errors.New("empty reply line")
	}
	body := string(line[1:])
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad integer %q", body)
		}
		return n, nil
	case '_':
		return nil, nil
	case ',':
		f, err := strconv.ParseFloat(strings.Replace(body, "inf", "Inf", 1), 64)
		if err != nil {
			return nil, fmt.Errorf("bad double %q", body)
		}
		return f, nil
	case '#':
		switch body {
		case "t":
			return true, nil
		case "f":
			return false, nil
		}
		return nil, fmt.Errorf("bad boolean %q", body)
	case '(':
		n, ok := new(big.Int).SetString(body, 10)
		if !ok {
			return nil, fmt.Errorf("bad big number %q", body)
		}
		return n, nil
	case '$', '!', '=':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, fmt.Errorf("bulk of %d bytes not followed by CRLF", n)
		}
		s := string(buf[:n])
		switch line[0] {
		case '!':
			return respError(s), nil
		case '=':
			if len(s) < 4 || s[3] != ':' {
				return nil, fmt.Errorf("bad verbatim string %q", s)
			}
			return respVerbatim{Format: s[:3], Text: s[4:]}, nil
		}
		return s, nil
	case '*', '~', '>':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad aggregate length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = parseReply(r); err != nil {
				return nil, err
			}
		}
		if line[0] == '>' {
			return respPush(arr), nil
		}
		return arr, nil
	case '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad map length %q", body)
		}
		m := make(map[any]any, n)
		for i := 0; i < n; i++ {
			k, err := parseReply(r)
			if err != nil {
				return nil, err
			}
			v, err := parseReply(r)
			if err != nil {
				return nil, err
			}
			m[hashable(k)] = v
		}
		if line[0] == '|' { // attribute: skip it, return the reply it annotates
			return parseReply(r)
		}
		return m, nil
	}
	return nil, fmt.Errorf("unknown reply type %q in line %q", line[0], line)
}

// hashable makes a reply usable as a map key.
func hashable(v any) any {
	switch v.(type) {
	case []any, map[any]any, respPush:
		return fmt.Sprint(v)
	case *big.Int:
		return v.(*big.Int).String()
	}
	return v
}

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("reply line not terminated by CRLF: %q", line)
	}
	return line[:len(line)-2], nil
}

// TestParseReply checks the test's own RESP parser.
func TestParseReply(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want string
	}{
		{"+OK\r\n", `"OK"`},
		{"-ERR x\r\n", `error:"ERR x"`},
		{":-12\r\n", `-12`},
		{"$3\r\na\r\n\r\n", `"a\r\n"`},
		{"$-1\r\n", `<nil>`},
		{"*-1\r\n", `<nil>`},
		{"_\r\n", `<nil>`},
		{"*3\r\n$2\r\nab\r\n:5\r\n_\r\n", `[]interface {}{"ab", 5, interface {}(nil)}`},
		{"%1\r\n+proto\r\n:3\r\n", `map[interface {}]interface {}{"proto":3}`},
		{"#t\r\n", `true`},
		{",1.5\r\n", `1.5`},
		{"!3\r\nERR\r\n", `error:"ERR"`},
		{"=7\r\ntxt:abc\r\n", `tests.respVerbatim{Format:"txt", Text:"abc"}`},
		{"~1\r\n:1\r\n", `[]interface {}{1}`},
		{"|1\r\n+a\r\n+b\r\n:7\r\n", `7`},
	}
	for _, tc := range cases {
		v, err := parseReply(bufio.NewReader(strings.NewReader(tc.in)))
		if err != nil {
			t.Errorf("parse %q: %v", tc.in, err)
			continue
		}
		got := fmt.Sprintf("%#v", v)
		if e, ok := v.(respError); ok {
			got = fmt.Sprintf("error:%q", string(e))
		}
		if got != tc.want {
			t.Errorf("parse %q = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "?\r\n", ":x\r\n", "$3\r\nab", "+OK\n", "$2\r\nabcd"} {
		if v, err := parseReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("parse %q = %#v, want an error", bad, v)
		}
	}
}
