package proxy

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// scanResult is what a scanner released for a whole input, and where.
type scanResult struct {
	released []byte
	ends     []int      // len(released) after each read that completed frames
	cmds     [][][]byte // the multibulk frames' arguments, copied (inline: nil)
	err      error
}

// feed scans data as reads into the scanner's buffer would bring it.
func (s *frameScanner) feed(data []byte) error {
	for len(data) > 0 && s.err == nil {
		n := copy(s.space(), data)
		data = data[n:]
		s.scanned(n)
	}
	if s.err != nil {
		return s.err
	}
	return nil
}

// runScanner feeds input to a fresh scanner in the chunks that chunk picks
// (nil: all at once), taking every complete frame after each read, the way
// the commandReader does.
func runScanner(t testing.TB, auth, pre limitSet, authed bool, input []byte, chunk func() int) scanResult {
	t.Helper()
	var flag atomic.Bool
	flag.Store(authed)
	s := newFrameScanner(&flag, auth, pre)
	var r scanResult
	for len(input) > 0 {
		n := len(input)
		if chunk != nil {
			n = min(max(chunk(), 1), len(input))
		}
		err := s.feed(input[:n])
		input = input[n:]
		took := false
		for {
			raw, args, ok := s.next(nil)
			if !ok {
				break
			}
			took = true
			r.released = append(r.released, raw...)
			var cmd [][]byte
			if args != nil {
				// The arguments located while scanning are redcon's.
				want, err := redcon.Parse(raw)
				if err != nil || !slices.EqualFunc(args, want.Args, bytes.Equal) {
					t.Fatalf("frame %q: arguments %q, redcon parses %q (%v)", raw, args, want.Args, err)
				}
				cmd = commands.CopyArgs(args)
			}
			r.cmds = append(r.cmds, cmd)
		}
		s.idle()
		if took {
			r.ends = append(r.ends, len(r.released))
		}
		if err != nil {
			r.err = err
			break
		}
	}
	return r
}

func scanDefaultSets() (auth, pre limitSet) { return scanLimits(Limits{}) }

func scanErrText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestScannerFrames(t *testing.T) {
	auth, pre := scanDefaultSets()
	small := Limits{MaxArgs: 4, MaxBulkBytes: 8, MaxInlineBytes: 8}
	tiny := Limits{MaxArgs: 100000, MaxBulkBytes: 10}
	manyArgs := "*10000\r\n" + strings.Repeat("$10\r\n0123456789\r\n", 10000)

	tests := []struct {
		name     string
		in       string
		authed   bool
		lim      *Limits // nil: the defaults
		released string
		err      string // "" for none
	}{
		{name: "multibulk", in: "*1\r\n$4\r\nPING\r\n", released: "*1\r\n$4\r\nPING\r\n"},
		{name: "inline crlf", in: "PING\r\n", released: "PING\r\n"},
		{name: "inline lf", in: "PING\n", released: "PING\n"},
		{name: "pipelined mixture",
			in:       "*1\r\n$4\r\nPING\r\nECHO hi\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\n",
			released: "*1\r\n$4\r\nPING\r\nECHO hi\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\n"},
		{name: "empty multibulks swallowed", in: "*0\r\n*-1\r\nPING\r\n*-5\r\n*-9223372036854775807\r\n",
			released: "PING\r\n"},
		{name: "blank lines swallowed", in: "   \r\n\r\n\n \nPING\r\n  x \r\n", released: "PING\r\n  x \r\n"},
		{name: "binary bulk", in: "*2\r\n$4\r\nECHO\r\n$6\r\na\r\n\r\nb\r\n", released: "*2\r\n$4\r\nECHO\r\n$6\r\na\r\n\r\nb\r\n"},
		{name: "empty bulk", in: "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", released: "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"},
		{name: "partial held", in: "PING\r\n*1\r\n$4\r\nPI", released: "PING\r\n"},
		{name: "partial inline held", in: "PING\r\nPI", released: "PING\r\n"},
		{name: "frames before error released", in: "PING\r\n*x\r\n", released: "PING\r\n",
			err: "Protocol error: invalid multibulk length"},

		{name: "count empty", in: "*\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count letter", in: "*x\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count plus", in: "*+1\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count minus only", in: "*-\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count minus zero", in: "*-0\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count leading zero", in: "*01\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count no cr", in: "*1\n", err: "Protocol error: invalid multibulk length"},
		{name: "count cr cr", in: "*1\r\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count space", in: "*1 \r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count max int64", in: "*9223372036854775807\r\n", authed: true,
			err: "Protocol error: invalid multibulk length"},
		{name: "count max int64 pre-auth", in: "*9223372036854775807\r\n",
			err: "Protocol error: invalid multibulk length"},
		{name: "count overflow", in: "*99999999999999999999999\r\n", authed: true,
			err: "Protocol error: invalid multibulk length"},
		{name: "count overflow by one", in: "*9223372036854775808\r\n", authed: true,
			err: "Protocol error: invalid multibulk length"},
		{name: "negative count overflow", in: "*-99999999999999999999999\r\n",
			err: "Protocol error: invalid multibulk length"},
		{name: "header too long", in: "*" + strings.Repeat("1", 40) + "\r\n",
			err: "Protocol error: invalid multibulk length"},

		{name: "bulk max int64", in: "*1\r\n$9223372036854775807\r\n", authed: true,
			err: "Protocol error: invalid bulk length"},
		{name: "bulk overflow", in: "*1\r\n$99999999999999999999999\r\n", authed: true,
			err: "Protocol error: invalid bulk length"},
		{name: "bulk negative", in: "*1\r\n$-1\r\n", err: "Protocol error: invalid bulk length"},
		{name: "bulk empty", in: "*1\r\n$\r\n", err: "Protocol error: invalid bulk length"},
		{name: "bulk plus", in: "*1\r\n$+1\r\n", err: "Protocol error: invalid bulk length"},
		{name: "bulk leading zero", in: "*1\r\n$04\r\nPING\r\n", err: "Protocol error: invalid bulk length"},
		{name: "bulk no cr", in: "*1\r\n$4\nPING\r\n", err: "Protocol error: invalid bulk length"},
		{name: "bulk data no cr", in: "*1\r\n$4\r\nPINGX\n", err: "Protocol error: invalid bulk length"},
		{name: "bulk data no lf", in: "*1\r\n$4\r\nPING\rX", err: "Protocol error: invalid bulk length"},
		{name: "expected dollar", in: "*1\r\nPING\r\n", err: "Protocol error: expected '$', got 'P'"},
		{name: "expected dollar nul", in: "*1\r\n\x00", err: `Protocol error: expected '$', got '\x00'`},
		{name: "expected dollar cr", in: "*1\r\n\r\n", err: `Protocol error: expected '$', got '\x0d'`},
		{name: "expected dollar high", in: "*1\r\n\xff", err: `Protocol error: expected '$', got '\xff'`},
		{name: "expected dollar second arg", in: "*2\r\n$1\r\na\r\n*1\r\n",
			err: "Protocol error: expected '$', got '*'"},

		{name: "inline at limit", lim: &small, in: "1234 678\r\n12345678\n", released: "1234 678\r\n12345678\n"},
		{name: "inline too big", lim: &small, in: "123456789\r\n", err: "Protocol error: too big inline request"},
		{name: "inline too big lf", lim: &small, in: "123456789\n", err: "Protocol error: too big inline request"},
		{name: "inline too big cr cr", lim: &small, in: "12345678\r\r\n", err: "Protocol error: too big inline request"},
		{name: "inline too big no newline", lim: &small, in: "12345678901", err: "Protocol error: too big inline request"},
		{name: "inline pre-auth", in: strings.Repeat("a", preAuthMaxInline+1) + "\r\n",
			err: "Protocol error: too big inline request"},
		{name: "inline authed", authed: true, in: strings.Repeat("a", preAuthMaxInline+1) + "\r\n",
			released: strings.Repeat("a", preAuthMaxInline+1) + "\r\n"},

		{name: "count pre-auth", in: "*17\r\n", err: "Protocol error: unauthenticated multibulk length"},
		{name: "count pre-auth at limit", in: "*16\r\n"},
		{name: "count authed", authed: true, in: "*17\r\n"},
		{name: "count beyond auth limit pre-auth", in: "*1025\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "count beyond auth limit", authed: true, in: "*1025\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "bulk pre-auth", in: "*1\r\n$16385\r\n", err: "Protocol error: unauthenticated bulk length"},
		{name: "bulk pre-auth at limit", in: "*1\r\n$16384\r\n"},
		{name: "bulk authed", authed: true, in: "*1\r\n$16385\r\n"},
		{name: "bulk beyond auth limit pre-auth", in: "*1\r\n$1048577\r\n", err: "Protocol error: invalid bulk length"},
		{name: "bulk beyond auth limit", authed: true, in: "*1\r\n$1048577\r\n", err: "Protocol error: invalid bulk length"},
		{name: "small count", lim: &small, authed: true, in: "*5\r\n", err: "Protocol error: invalid multibulk length"},
		{name: "small bulk", lim: &small, authed: true, in: "*1\r\n$9\r\n", err: "Protocol error: invalid bulk length"},

		{name: "too big command", authed: true, lim: &tiny, in: "PING\r\n" + manyArgs,
			released: "PING\r\n", err: "Protocol error: too big command"},
		{name: "too big command pre-auth", in: "*16\r\n" + strings.Repeat("$16384\r\n"+strings.Repeat("x", 16384)+"\r\n", 8),
			err: "Protocol error: too big command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, p := auth, pre
			if tt.lim != nil {
				a, p = scanLimits(*tt.lim)
			}
			for _, mode := range []string{"whole", "bytes"} {
				var chunk func() int
				if mode == "bytes" {
					chunk = func() int { return 1 }
				}
				r := runScanner(t, a, p, tt.authed, []byte(tt.in), chunk)
				if string(r.released) != tt.released {
					t.Errorf("%s: released %q, want %q", mode, r.released, tt.released)
				}
				if scanErrText(r.err) != tt.err {
					t.Errorf("%s: error %q, want %q", mode, scanErrText(r.err), tt.err)
				}
				var pe *ProtocolError
				if r.err != nil && !errors.As(r.err, &pe) {
					t.Errorf("%s: error %T, want *ProtocolError", mode, r.err)
				}
			}
		})
	}
}

func TestScannerStickyError(t *testing.T) {
	auth, pre := scanDefaultSets()
	s := newFrameScanner(new(atomic.Bool), auth, pre)
	if err := s.feed([]byte("*x\r\n")); err == nil {
		t.Fatal("no error")
	}
	err := s.feed([]byte("PING\r\n"))
	if _, _, ok := s.next(nil); ok || scanErrText(err) != "Protocol error: invalid multibulk length" {
		t.Fatalf("after error: a frame %v, %v", ok, err)
	}
}

// validStream returns a stream of frames, the bytes a guard must release
// for it, and the frame ends within those bytes.
func scanValidStream() (in, want []byte, ends map[int]bool) {
	ends = map[int]bool{0: true}
	add := func(frame string, kept bool) {
		in = append(in, frame...)
		if kept {
			want = append(want, frame...)
			ends[len(want)] = true
		}
	}
	big := bytes.Repeat([]byte("0123456789\r\n"), 10000)
	for i := range 20 {
		add("*1\r\n$4\r\nPING\r\n", true)
		add("*0\r\n", false)
		add("SET k"+strconv.Itoa(i)+" v\r\n", true)
		add("  \r\n", false)
		add("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$"+strconv.Itoa(len(big)/(i+1))+"\r\n"+string(big[:len(big)/(i+1)])+"\r\n", true)
		add("*-1\r\n", false)
		add("GET k\n", true)
		add("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", true)
	}
	return in, want, ends
}

func TestScannerChunkingInvariance(t *testing.T) {
	auth, pre := scanDefaultSets()
	in, want, ends := scanValidStream()
	rng := rand.New(rand.NewPCG(1, 2))
	chunkers := map[string]func() int{
		"whole":  nil,
		"bytes":  func() int { return 1 },
		"random": func() int { return 1 + rng.IntN(300) },
		"large":  func() int { return 1 + rng.IntN(70000) },
		"prime":  func() int { return 4093 },
	}
	for name, chunk := range chunkers {
		r := runScanner(t, auth, pre, true, in, chunk)
		if r.err != nil {
			t.Fatalf("%s: %v", name, r.err)
		}
		if !bytes.Equal(r.released, want) {
			t.Fatalf("%s: released %d bytes, want %d (differ)", name, len(r.released), len(want))
		}
		for _, e := range r.ends {
			if !ends[e] {
				t.Fatalf("%s: release ends at %d, not a frame boundary", name, e)
			}
		}
	}
}

func TestScannerLinear(t *testing.T) {
	auth, pre := scanLimits(Limits{MaxBulkBytes: 2 << 20})
	var flag atomic.Bool
	flag.Store(true)
	s := newFrameScanner(&flag, auth, pre)
	in := []byte("*2\r\n$3\r\nSET\r\n$1048576\r\n")
	in = append(in, bytes.Repeat([]byte{'x'}, 1<<20)...)
	in = append(in, "\r\n"...)
	start := time.Now()
	released := 0
	for i := range in {
		if err := s.feed(in[i : i+1]); err != nil {
			t.Fatal(err)
		}
		for raw, _, ok := s.next(nil); ok; raw, _, ok = s.next(nil) {
			released += len(raw)
		}
		s.idle()
	}
	t.Logf("1 MiB bulk in 1-byte chunks: %v", time.Since(start))
	if released != len(in) {
		t.Fatalf("released %d, want %d", released, len(in))
	}
	// Every byte is examined once and moved at most once.
	if s.examined != len(in) || s.moved > len(in) {
		t.Fatalf("examined %d, moved %d for %d bytes", s.examined, s.moved, len(in))
	}
	if cap(s.buf) > keepBufSize {
		t.Fatalf("buffer of %d bytes kept after the command", cap(s.buf))
	}
}

// startGuarded serves clients on loopback through the guard and a
// commandReader. The handler answers PING with PONG, ECHO with its
// argument and AUTH with OK (and marks the conn authed).
func startGuarded(t *testing.T, lim Limits) (addr string, closedErr <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		gl := newGuardListener(ln, lim, time.Second)
		for {
			nc, err := gl.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				g := nc.(*guardConn)
				err := newCommandReader(g).run(func(args [][]byte, _ bool) bool {
					reply := "+PONG\r\n"
					switch strings.ToUpper(string(args[0])) {
					case "AUTH":
						g.SetAuthenticated(true)
						reply = "+OK\r\n"
					case "ECHO":
						reply = "$" + strconv.Itoa(len(args[1])) + "\r\n" + string(args[1]) + "\r\n"
					}
					_, err := g.Write([]byte(reply))
					return err == nil
				}, func() {})
				var perr *ProtocolError
				if errors.As(err, &perr) {
					g.refuse(perr)
				}
				errs <- g.ProtocolErr()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String(), errs
}

func TestGuardConnServesCommands(t *testing.T) {
	addr, closed := startGuarded(t, Limits{})
	c := testkit.Dial(t, addr)
	// A command trickled byte by byte, then a pipeline in one write.
	for _, b := range []byte("*1\r\n$4\r\nPING\r\n") {
		c.Send([]byte{b})
	}
	if v := c.ReadReply(); v != "PONG" {
		t.Fatalf("trickled PING = %#v", v)
	}
	c.Send([]byte("PING\r\n*0\r\n\r\n*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n"))
	for _, want := range []any{"PONG", "a\r\nb"} {
		if v := c.ReadReply(); v != want {
			t.Fatalf("pipelined reply = %#v, want %#v", v, want)
		}
	}
	c.Close()
	if err := <-closed; err != nil {
		t.Fatalf("protocol error %v on a clean close", err)
	}
}

func TestGuardConnRejectsHugeBulk(t *testing.T) {
	addr, closed := startGuarded(t, Limits{})
	c := testkit.Dial(t, addr)
	c.Send([]byte("PING\r\n*1\r\n$99999999999\r\n"))
	if v := c.ReadReply(); v != "PONG" {
		t.Fatalf("PING = %#v", v)
	}
	if v := c.ReadReply(); v != testkit.Error("ERR Protocol error: invalid bulk length") {
		t.Fatalf("huge bulk = %#v", v)
	}
	c.ExpectClosed(5 * time.Second)
	if err := <-closed; scanErrText(err) != "Protocol error: invalid bulk length" {
		t.Fatalf("ProtocolErr() = %v", err)
	}
}

// TestGuardConnUnbalancedQuotes: an inline line redcon cannot split is a
// protocol error after the replies to the commands before it; the commands
// after it do not run.
func TestGuardConnUnbalancedQuotes(t *testing.T) {
	addr, closed := startGuarded(t, Limits{})
	c := testkit.Dial(t, addr)
	c.Send([]byte("PING\r\nECHO \"abc\r\nECHO after\r\n"))
	if v := c.ReadReply(); v != "PONG" {
		t.Fatalf("PING = %#v", v)
	}
	if v := c.ReadReply(); v != testkit.Error("ERR Protocol error: unbalanced quotes in request") {
		t.Fatalf("unbalanced line = %#v", v)
	}
	c.ExpectClosed(5 * time.Second)
	if err := <-closed; scanErrText(err) != "Protocol error: unbalanced quotes in request" {
		t.Fatalf("ProtocolErr() = %v", err)
	}
}

func TestGuardConnAuthLimits(t *testing.T) {
	addr, _ := startGuarded(t, Limits{})
	c := testkit.Dial(t, addr)
	arg := strings.Repeat("z", preAuthMaxBulk+1)
	if v := c.Do("AUTH", "pw"); v != "OK" {
		t.Fatalf("AUTH = %#v", v)
	}
	if v := c.Do("ECHO", arg); v != arg {
		t.Fatalf("ECHO of %d bytes after AUTH = %.80q", len(arg), v)
	}

	// A large argument in small writes reaches redcon whole.
	big := strings.Repeat("0123456789abcdef", 32<<10)
	cmd := testkit.AppendCmd(nil, "ECHO", big)
	for len(cmd) > 0 {
		n := min(len(cmd), 1000)
		c.Send(cmd[:n])
		cmd = cmd[n:]
	}
	if v := c.ReadReply(); v != big {
		t.Fatalf("ECHO of %d bytes in small writes = %.80q", len(big), v)
	}

	c2 := testkit.Dial(t, addr)
	if v := c2.Do("ECHO", arg); v != testkit.Error("ERR Protocol error: unauthenticated bulk length") {
		t.Fatalf("ECHO of %d bytes before AUTH = %.80q", len(arg), v)
	}
}

func TestGuardConnWriteDeadline(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	auth, pre := scanDefaultSets()
	g := newGuardConn(server, auth, pre, 50*time.Millisecond)
	defer g.Close()
	// Nobody reads the client side: the write must time out.
	_, err := g.Write([]byte("+PONG\r\n"))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("write error %v, want a timeout", err)
	}
}

// Addr is the bound address; nil before Listen.
func (o *OpsServer) Addr() net.Addr {
	if o.ln == nil {
		return nil
	}
	return o.ln.Addr()
}
