package proxy

import (
	"bufio"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestLazyDeadlineBounds drives lazyDeadline's clock: every operation
// starts with between span and span×3/2 left, and the socket's deadline
// is set again only once less than span is left.
func TestLazyDeadlineBounds(t *testing.T) {
	const span = 10 * time.Second
	clock := time.Unix(1000, 0)
	d := newLazyDeadline(span)
	d.now, d.base = func() time.Time { return clock }, clock
	sets := 0
	var set time.Time
	for step := range 400 {
		clock = clock.Add(97 * time.Millisecond)
		if dl, ok := d.next(); ok {
			d.set(dl)
			set, sets = dl, sets+1
		}
		if left := set.Sub(clock); left < span || left > span*3/2 {
			t.Fatalf("step %d: %v left before an operation, want [%v, %v]", step, left, span, span*3/2)
		}
	}
	// 400 steps of 97 ms are 38.8 s: one set per span/2 and the first.
	if sets > 9 {
		t.Errorf("%d deadlines set in 38.8 s with span %v, want at most 9", sets, span)
	}
	d.forget()
	if _, ok := d.next(); !ok {
		t.Error("after forget, next does not set the deadline again")
	}
}

// countingConn counts the deadlines set on a connection.
type countingConn struct {
	net.Conn
	reads, writes atomic.Int64
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.reads.Add(1)
	return c.Conn.SetReadDeadline(t)
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.writes.Add(1)
	return c.Conn.SetWriteDeadline(t)
}

// TestDeadlinesNotSetPerCommand: a client's commands and replies do not set
// a socket deadline each (a poll lock and a runtime timer update every
// time); with idle and write timeouts of a minute, 200 commands set each
// deadline once.
func TestDeadlinesNotSetPerCommand(t *testing.T) {
	s := startServer(t, Config{IdleTimeout: time.Minute, WriteTimeout: time.Minute}, "", false)
	server, client := net.Pipe()
	defer client.Close()
	cc := &countingConn{Conn: server}
	auth, pre := scanLimits(s.cfg.Limits)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serveConn(newGuardConn(cc, auth, pre, s.cfg.WriteTimeout))
	}()
	r := bufio.NewReader(client)
	for i := range 200 {
		if _, err := client.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil || line != "+PONG\r\n" {
			t.Fatalf("PING %d: %q, %v", i, line, err)
		}
	}
	_ = client.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was still served 10 s after the client closed")
	}
	if n := cc.reads.Load(); n > 2 {
		t.Errorf("%d read deadlines set for 200 commands", n)
	}
	if n := cc.writes.Load(); n > 2 {
		t.Errorf("%d write deadlines set for 200 replies", n)
	}
}

// TestWriteTimeoutCutsStalledReader: a client that sends commands and
// stops reading is closed once a reply write has been stuck for the write
// timeout (the deadline, set lazily, was fresh when the stall began: the
// client's earlier replies went out within the same span).
func TestWriteTimeoutCutsStalledReader(t *testing.T) {
	s := startServer(t, Config{WriteTimeout: 300 * time.Millisecond}, "", false)
	setup := dialServer(t, s)
	big := strings.Repeat("x", 4000)
	if got := setup.Do("SET", "big", big, "PX", "60000"); got != "OK" {
		t.Fatalf("SET = %#v", got)
	}
	probe := dialServer(t, s)
	clients := func() string {
		info, _ := probe.Do("INFO", "clients").(string)
		return info
	}
	stalled, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	r := bufio.NewReader(stalled)
	for i := range 50 {
		_, err := stalled.Write([]byte("PING\r\n"))
		line, rerr := r.ReadString('\n')
		if err != nil || rerr != nil || line != "+PONG\r\n" {
			t.Fatalf("PING %d: %q, %v, %v", i, line, err, rerr)
		}
	}
	if info := clients(); !strings.Contains(info, "connected_clients:3\r\n") {
		t.Fatalf("INFO clients before the stall: %q", info)
	}
	// 100 000 GETs of a 4 kB value, never read: the proxy's reply write
	// blocks once the socket buffers are full.
	var chunk []byte
	for range 100 {
		chunk = testkit.AppendCmd(chunk, "GET", "big")
	}
	go func() {
		for range 1000 {
			_ = stalled.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := stalled.Write(chunk); err != nil {
				return
			}
		}
	}()
	testkit.Eventually(t, 20*time.Second, "the stalled client to be closed", func() bool {
		return strings.Contains(clients(), "connected_clients:2\r\n")
	})
}

// TestIdleTimeoutAfterBusySpell: a client that sent many commands in a
// row (the read deadline set once for all of them) and then goes quiet is
// still closed as idle. The timeout is 1 s so that a loaded machine's
// pause between two PINGs does not end the spell early.
func TestIdleTimeoutAfterBusySpell(t *testing.T) {
	s := startServer(t, Config{IdleTimeout: time.Second}, "", false)
	c := dialServer(t, s)
	for range 100 {
		if got := c.Do("PING"); got != "PONG" {
			t.Fatalf("PING = %#v", got)
		}
	}
	c.ExpectClosed(5 * time.Second)
}

// TestIdleTimeoutSparesActiveClient: a client that sends a command every
// few milliseconds for longer than idle_timeout×3/2 stays connected: the
// read deadline moves on while it is active. Its gaps would have to reach
// the idle timeout (2 s) for it to be closed.
func TestIdleTimeoutSparesActiveClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3.5 s")
	}
	const idle = 2 * time.Second
	s := startServer(t, Config{IdleTimeout: idle}, "", false)
	c := dialServer(t, s)
	for end := time.Now().Add(idle*3/2 + 500*time.Millisecond); time.Now().Before(end); {
		if got := c.Do("PING"); got != "PONG" {
			t.Fatalf("PING = %#v after %v", got, time.Until(end))
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.ExpectClosed(10 * time.Second)
}
