package testkit

import (
	"bufio"
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

// Error is an error reply ("-ERR …" or "!…"), without the leading marker.
type Error string

func (e Error) Error() string { return string(e) }

// Verbatim is a RESP3 verbatim string ("=").
type Verbatim struct{ Format, Text string }

// Push is a RESP3 push (">").
type Push []any

// Conn is a raw RESP connection for tests that must see the wire. Its
// methods fail the test on a write error, and on a read error or timeout
// where a reply is expected.
type Conn struct {
	tb testing.TB
	nc net.Conn
	r  *bufio.Reader
	// Timeout bounds each wait for a reply (ReadReply, Do, Peek); 5s by
	// default.
	Timeout time.Duration
}

// Dial connects to addr; the connection is closed at the end of the test.
func Dial(tb testing.TB, addr string) *Conn {
	tb.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	return NewConn(tb, nc)
}

// NewConn wraps a connection the test made (a TLS one, say); it is closed
// at the end of the test.
func NewConn(tb testing.TB, nc net.Conn) *Conn {
	tb.Cleanup(func() { _ = nc.Close() })
	return &Conn{tb: tb, nc: nc, r: bufio.NewReader(nc), Timeout: 5 * time.Second}
}

// Close closes the connection (no QUIT: the socket just closes).
func (c *Conn) Close() error { return c.nc.Close() }

// Send writes b as is.
func (c *Conn) Send(b []byte) {
	c.tb.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.Timeout))
	if _, err := c.nc.Write(b); err != nil {
		c.tb.Fatalf("write %.80q: %v", b, err)
	}
}

// SendCmd writes one command as a RESP array of bulk strings.
func (c *Conn) SendCmd(args ...string) {
	c.tb.Helper()
	c.Send(AppendCmd(nil, args...))
}

// Do sends a command and reads its reply.
func (c *Conn) Do(args ...string) any {
	c.tb.Helper()
	c.SendCmd(args...)
	return c.ReadReply()
}

// ReadReply reads one reply (see ParseReply for the Go types).
func (c *Conn) ReadReply() any {
	c.tb.Helper()
	v, err := c.TryReadReply(c.Timeout)
	if err != nil {
		c.tb.Fatalf("read reply: %v", err)
	}
	return v
}

// TryReadReply reads one reply within d, and returns the error instead of
// failing the test.
func (c *Conn) TryReadReply(d time.Duration) (any, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	return ParseReply(c.r)
}

// ReadRaw reads one reply and returns it as it came on the wire, for tests
// of the exact encoding.
func (c *Conn) ReadRaw() []byte {
	c.tb.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(c.Timeout))
	rec := &recorder{r: c.r}
	if _, err := ParseReply(rec); err != nil {
		c.tb.Fatalf("read reply: %v (got %q)", err, rec.raw)
	}
	return rec.raw
}

// recorder keeps what a parse read.
type recorder struct {
	r   Reader
	raw []byte
}

func (rec *recorder) ReadBytes(delim byte) ([]byte, error) {
	b, err := rec.r.ReadBytes(delim)
	rec.raw = append(rec.raw, b...)
	return b, err
}

func (rec *recorder) Read(p []byte) (int, error) {
	n, err := rec.r.Read(p)
	rec.raw = append(rec.raw, p[:n]...)
	return n, err
}

// Peek returns the next n bytes without consuming them.
func (c *Conn) Peek(n int) []byte {
	c.tb.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(c.Timeout))
	b, err := c.r.Peek(n)
	if err != nil {
		c.tb.Fatalf("peek %d bytes: %v (got %q)", n, err, b)
	}
	return b
}

// ExpectClosed fails the test unless the server closes the connection
// within d without sending anything more.
func (c *Conn) ExpectClosed(d time.Duration) {
	c.tb.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	b, err := c.r.ReadByte()
	if err == nil {
		rest, _ := c.r.Peek(c.r.Buffered())
		c.tb.Fatalf("expected the connection to be closed, got more data: %q", append([]byte{b}, rest...))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.tb.Fatalf("expected the connection to be closed within %v, it is still open", d)
	}
	// io.EOF, a reset, or a TLS alert: closed.
}

// AppendCmd appends args encoded as a RESP array of bulk strings.
func AppendCmd(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// Reader is what ParseReply reads from; a *bufio.Reader is one.
type Reader interface {
	io.Reader
	ReadBytes(delim byte) ([]byte, error)
}

// ParseReply parses one RESP2 or RESP3 reply into: string (simple and bulk
// strings), Error, int64, nil (every null), []any (arrays and sets),
// map[any]any (maps; aggregate keys become their fmt.Sprint), float64, bool,
// *big.Int, Verbatim or Push. An attribute is skipped: the reply it
// annotates is returned. Anything malformed is an error.
func ParseReply(r Reader) (any, error) {
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
		return Error(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad integer %q", body)
		}
		return n, nil
	case '_':
		if body != "" {
			return nil, fmt.Errorf("bad null %q", line)
		}
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
		if err != nil || n < -1 {
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
			return Error(s), nil
		case '=':
			if len(s) < 4 || s[3] != ':' {
				return nil, fmt.Errorf("bad verbatim string %q", s)
			}
			return Verbatim{Format: s[:3], Text: s[4:]}, nil
		}
		return s, nil
	case '*', '~', '>':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("bad aggregate length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = ParseReply(r); err != nil {
				return nil, err
			}
		}
		if line[0] == '>' {
			return Push(arr), nil
		}
		return arr, nil
	case '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad map length %q", body)
		}
		m := make(map[any]any, n)
		for range n {
			k, err := ParseReply(r)
			if err != nil {
				return nil, err
			}
			v, err := ParseReply(r)
			if err != nil {
				return nil, err
			}
			m[hashable(k)] = v
		}
		if line[0] == '|' { // an attribute: skip it, return the reply it annotates
			return ParseReply(r)
		}
		return m, nil
	}
	return nil, fmt.Errorf("unknown reply type %q in line %q", line[0], line)
}

// hashable makes a reply usable as a map key.
func hashable(v any) any {
	switch v := v.(type) {
	case []any, map[any]any, Push:
		return fmt.Sprint(v)
	case *big.Int:
		return v.String()
	}
	return v
}

// readLine reads one CRLF-terminated line and returns it without the CRLF.
func readLine(r Reader) ([]byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("reply line not terminated by CRLF: %q", line)
	}
	return line[:len(line)-2], nil
}
