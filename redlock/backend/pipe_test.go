package backend

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// do sends one command and waits for its reply or for ctx to end.
func (p *Pipe) do(ctx context.Context, args ...any) (any, error) {
	return p.Do(ctx, func(b []byte) []byte { return resp.AppendCommand(b, args...) })
}

func newTestPipe(t *testing.T, addr string) *Pipe {
	t.Helper()
	p := NewPipe(dialTCP(addr, time.Second, nil), time.Second)
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPipeConcurrentCallers(t *testing.T) {
	mr := miniredis.RunT(t)
	p := newTestPipe(t, mr.Addr())
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, v := "k"+strconv.Itoa(i), "v"+strconv.Itoa(i)
			if r, err := p.do(ctx, "SET", k, v, "NX", "PX", 10000); err != nil || r != resp.StatusOK {
				t.Errorf("SET %s = %v, %v", k, r, err)
			}
			if r, err := p.do(ctx, "GET", k); err != nil || r != v {
				t.Errorf("GET %s = %v, %v", k, r, err)
			}
			if r, err := p.do(ctx, "SET", k, v, "NX"); err != nil || r != nil {
				t.Errorf("second SET NX %s = %v, %v", k, r, err)
			}
		}()
	}
	wg.Wait()
}

func TestPipeRepliesOfEveryType(t *testing.T) {
	mr := miniredis.RunT(t)
	p := newTestPipe(t, mr.Addr())
	ctx := context.Background()
	if r, err := p.do(ctx, "INCR", "n"); err != nil || r != int64(1) {
		t.Fatalf("INCR = %#v, %v", r, err)
	}
	if r, err := p.do(ctx, "EVAL", `return {1, "a", {2}}`, 0); err != nil {
		t.Fatalf("EVAL = %v", err)
	} else if a, ok := r.([]any); !ok || len(a) != 3 || a[0] != int64(1) || a[1] != "a" {
		t.Fatalf("EVAL = %#v", r)
	}
	_, err := p.do(ctx, "EVALSHA", "0000000000000000000000000000000000000000", 0)
	var re resp.Error
	if !errors.As(err, &re) || re[:8] != "NOSCRIPT" {
		t.Fatalf("EVALSHA unknown = %v", err)
	}
	// An error reply leaves the connection usable.
	if r, err := p.do(ctx, "PING"); err != nil || r != resp.Status("PONG") {
		t.Fatalf("PING after error = %v, %v", r, err)
	}
}

// TestPipeStalledBackend: a backend that never answers costs each caller
// its own deadline, no more.
func TestPipeStalledBackend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { bufio.NewReader(c).WriteTo(discard{}) }() // read, never answer
		}
	}()
	p := newTestPipe(t, ln.Addr().String())
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			if _, err := p.do(ctx, "PING"); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("PING to a stalled backend = %v", err)
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("PING waited %v", el)
			}
		}()
	}
	wg.Wait()
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestPipeRedialsAfterFailure: a restarted backend is dialled again.
func TestPipeRedialsAfterFailure(t *testing.T) {
	mr := miniredis.RunT(t)
	p := newTestPipe(t, mr.Addr())
	ctx := context.Background()
	if _, err := p.do(ctx, "PING"); err != nil {
		t.Fatal(err)
	}
	addr := mr.Addr()
	mr.Close()
	if _, err := p.do(ctx, "PING"); err == nil {
		t.Fatal("PING to a closed backend succeeded")
	}
	mr2 := miniredis.NewMiniRedis()
	if err := mr2.StartAddr(addr); err != nil {
		t.Skip("port taken:", err)
	}
	defer mr2.Close()
	var err error
	for range 3 { // the first call may still see the broken connection
		if _, err = p.do(ctx, "PING"); err == nil {
			return
		}
	}
	t.Fatalf("PING after restart = %v", err)
}

// dialTCP dials addr and runs setup on the fresh connection, with a deadline.
func dialTCP(addr string, timeout time.Duration, setup func(ctx context.Context, nc net.Conn, br *bufio.Reader) error) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if setup != nil {
			_ = nc.SetDeadline(time.Now().Add(timeout))
			if err := setup(ctx, nc, bufio.NewReader(nc)); err != nil {
				nc.Close()
				return nil, err
			}
			_ = nc.SetDeadline(time.Time{})
		}
		return nc, nil
	}
}

// TestPipeDropsExpiredRequests: the writer does not send a request whose
// caller's deadline has passed, and sends the live one; nor does a caller
// that finds the connection idle.
func TestPipeDropsExpiredRequests(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	c := NewConn(client, Options{})
	defer c.Fail(ErrClosed)
	stale := &Request{Cmd: resp.AppendCommand(nil, "DEL", "k"), Deadline: time.Now().Add(-time.Second), done: make(chan response, 1)}
	staleInline := &Request{Cmd: resp.AppendCommand(nil, "DEL", "k2"), Deadline: time.Now().Add(-time.Second), done: make(chan response, 1)}
	live := &Request{Cmd: resp.AppendCommand(nil, "PING"), done: make(chan response, 1)}
	if !c.TrySend(staleInline, true) {
		t.Fatal("not taken")
	}
	if r := <-staleInline.done; !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("stale request on an idle connection answered %v", r.err)
	}
	if !c.TrySend(stale, false) || !c.TrySend(live, false) {
		t.Fatal("not taken")
	}
	if r := <-stale.done; !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("stale request answered %v", r.err)
	}
	server.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := bufio.NewReader(server).ReadString('\n')
	if err != nil || got != "*1\r\n" {
		t.Fatalf("the backend received %q (%v), want the PING only", got, err)
	}
}

// TestPipeMalformedReply: a backend whose reply is not RESP (a bulk string
// longer than it declared, a length past the bound) fails the call and
// the connection with a protocol error; nothing is taken as a reply and
// the next call dials again.
func TestPipeMalformedReply(t *testing.T) {
	for _, bad := range []string{"$3\r\nabcde\r\n", "*536870913\r\n", "$-5\r\n", ":1x\r\n"} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var first atomic.Bool
			first.Store(true)
			go func() {
				for { // the bad reply to the first command, then +PONG
					nc, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer nc.Close()
						br := bufio.NewReader(nc)
						for i := 0; ; i++ {
							if _, err := readReply(br); err != nil {
								return
							}
							reply := "+PONG\r\n"
							if i == 0 && first.CompareAndSwap(true, false) {
								reply = bad
							}
							if _, err := nc.Write([]byte(reply)); err != nil {
								return
							}
						}
					}()
				}
			}()
			p := newTestPipe(t, ln.Addr().String())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if v, err := p.do(ctx, "PING"); !errors.Is(err, resp.ErrProtocol) {
				t.Fatalf("PING = %#v, %v; want a protocol error", v, err)
			}
			testkit.Eventually(t, 5*time.Second, "a PONG on a new connection", func() bool {
				v, err := p.do(ctx, "PING")
				return err == nil && v == resp.Status("PONG")
			})
		})
	}
}

// readReply reads one reply with package resp: an error reply at the top
// is returned as the error (a resp.Error); inside an array, an element.
func readReply(br *bufio.Reader) (any, error) {
	v, err := resp.Read(br)
	if e, ok := v.(error); ok { // resp.Error: the only value that is one
		return nil, e
	}
	return v, err
}
