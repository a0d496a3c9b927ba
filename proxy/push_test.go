package proxy

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// pushConn is a conn over one end of a loopback TCP pair; the test reads
// the other end.
func pushConn(t *testing.T) (*conn, *testkit.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client := testkit.Dial(t, ln.Addr().String())
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	disp := commands.New(commands.Options{MinTTL: time.Millisecond, MaxTTL: time.Minute})
	s := New(Config{}, disp, redlocktest.Logger(t))
	c := newConn(s, nc, disp.NewClient("test", "test"))
	t.Cleanup(c.stopPushes)
	return c, client
}

var push = commands.Push{commands.BulkString("message"), commands.BulkString("ch"), commands.BulkString("m")}

// TestPushOrder: a push comes after the replies of every command read
// before it was made, and at once when nothing is in flight.
func TestPushOrder(t *testing.T) {
	c, client := pushConn(t)

	// Nothing in flight: written by the pusher.
	if !c.pushOutOfBand(push) {
		t.Fatal("push refused")
	}
	if got := client.ReadReply(); !reflect.DeepEqual(got, []any{"message", "ch", "m"}) {
		t.Fatalf("push with nothing in flight read as %#v", got)
	}

	// A command in flight: the push waits for its reply.
	sl := &slot{done: make(chan struct{})}
	_, ep := c.plan(sl, commands.Plan{})
	c.push(sl, ep)
	c.pushOutOfBand(push)
	if v, err := client.TryReadReply(100 * time.Millisecond); err == nil {
		t.Fatalf("push overtook the reply of a command in flight: read %#v", v)
	}
	c.complete(sl, ep, commands.Simple("OK"), false)
	if got := client.ReadReply(); got != "OK" {
		t.Fatalf("first read %#v, want the reply", got)
	}
	if got := client.ReadReply(); !reflect.DeepEqual(got, []any{"message", "ch", "m"}) {
		t.Fatalf("then %#v, want the push", got)
	}

	// The reader running a command itself: the push follows its reply.
	c.pushes.inline.Store(true)
	c.pushOutOfBand(push)
	if v, err := client.TryReadReply(100 * time.Millisecond); err == nil {
		t.Fatalf("push overtook the reply of the reader's command: read %#v", v)
	}
	c.writeNow(commands.Int(7), true)
	if got := client.ReadReply(); got != int64(7) {
		t.Fatalf("first read %#v, want the reply", got)
	}
	if got := client.ReadReply(); !reflect.DeepEqual(got, []any{"message", "ch", "m"}) {
		t.Fatalf("then %#v, want the push", got)
	}
}

// TestPushBacklog: a client that reads none of its pushes is cut off
// once the backlog passes the bound, and pushing never blocks meanwhile.
func TestPushBacklog(t *testing.T) {
	c, _ := pushConn(t)
	big := commands.Push{commands.BulkString("message"), commands.BulkString("ch"), commands.Bulk(make([]byte, 1<<20))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if !c.pushOutOfBand(big) {
			return // disconnected
		}
	}
	t.Fatal("a client that reads nothing was never disconnected")
}

// TestPushBacklogAcrossSlots: the bound counts the pushes queued behind
// every slot, not only the last: a client that keeps a command in flight
// between pushes (each push lands behind a new slot) is cut off too.
func TestPushBacklogAcrossSlots(t *testing.T) {
	c, _ := pushConn(t)
	big := commands.Push{commands.BulkString("message"), commands.BulkString("ch"), commands.Bulk(make([]byte, 1<<20))}
	for i := range 2 * maxPushBacklog >> 20 {
		sl := &slot{done: make(chan struct{})}
		_, ep := c.plan(sl, commands.Plan{})
		c.push(sl, ep)
		if !c.pushOutOfBand(big) {
			if i+1 < maxPushBacklog>>20 {
				t.Fatalf("disconnected at %d MiB of pushes, under the %d MiB bound", i+1, maxPushBacklog>>20)
			}
			return
		}
	}
	t.Fatalf("%d MiB of pushes behind %d slots and never disconnected", 2*maxPushBacklog>>20, 2*maxPushBacklog>>20)
}
