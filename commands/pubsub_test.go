package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// newRelayDispatcher serves over n miniredis backends with a relay over
// the same backends.
func newRelayDispatcher(t *testing.T, n int) (*Dispatcher, []*miniredis.Miniredis) {
	t.Helper()
	logger := redlocktest.Logger(t)
	rl, mrs := redlocktest.New(t, n, redlock.Options{Logger: logger})
	var bs []relay.Backend
	for _, node := range rl.Nodes() {
		bs = append(bs, node.(*backend.RedisNode))
	}
	rel := relay.New(relay.Options{Backends: bs, Logger: logger, ConfirmWait: 5 * time.Second})
	d := New(Options{
		Leases: lease.New(lease.Options{Locker: rl, Logger: logger, KeepTTL: 30 * time.Second}),
		MinTTL: 10 * time.Millisecond, MaxTTL: 60 * time.Second, MaxWait: 2 * time.Second,
		Version: "test", Logger: logger, Relay: rel,
	})
	shutdownAtEnd(t, d)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rel.Shutdown(ctx); err != nil {
			t.Errorf("relay Shutdown: %v", err)
		}
	})
	return d, mrs
}

// pushes collects the pushes a client gets, encoded for its protocol.
type pushes struct {
	mu  sync.Mutex
	got []string
}

func hooked(d *Dispatcher) (*Client, *pushes) {
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	p := &pushes{}
	c.SetHooks(Hooks{Push: func(r Reply) bool {
		p.mu.Lock()
		p.got = append(p.got, string(AppendReply(nil, r, c.Proto())))
		p.mu.Unlock()
		return true
	}})
	return c, p
}

func (p *pushes) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

// want waits for the pushes and checks them, then that no more come.
func (p *pushes) want(t *testing.T, want ...string) {
	t.Helper()
	p.check(t, false, want)
}

// wantAnyOrder is want for pushes whose order the backends decide
// (miniredis sends a publication's message and pmessage in either order;
// Redis sends message first).
func (p *pushes) wantAnyOrder(t *testing.T, want ...string) {
	t.Helper()
	p.check(t, true, want)
}

func (p *pushes) check(t *testing.T, sorted bool, want []string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "the pushes", func() bool { return len(p.list()) >= len(want) })
	time.Sleep(50 * time.Millisecond) // a duplicate would come right after
	got := p.list()
	if len(got) != len(want) {
		t.Fatalf("pushes = %q, want %q", got, want)
	}
	if sorted {
		slices.Sort(got)
		want = slices.Sorted(slices.Values(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("push %d = %q, want %q", i, got[i], want[i])
		}
	}
	p.mu.Lock()
	p.got = nil
	p.mu.Unlock()
}

func TestPubSubRelayed(t *testing.T) {
	d, mrs := newRelayDispatcher(t, 3)
	sub, subPushes := hooked(d)
	pub := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	runAll(t, d, sub, []run{
		{[]string{"SUBSCRIBE", "a", "b"}, "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"},
		{[]string{"PSUBSCRIBE", "a*"}, "*3\r\n$10\r\npsubscribe\r\n$2\r\na*\r\n:3\r\n"},
		{[]string{"PING"}, "*2\r\n$4\r\npong\r\n$0\r\n\r\n"},
		{[]string{"PING", "hi"}, "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"},
		{[]string{"GET", "k"}, "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"},
	})
	runAll(t, d, pub, []run{
		// What a backend counts: this proxy's subscriber connection, once
		// for the channel and once for the pattern.
		{[]string{"PUBLISH", "a", "m"}, ":2\r\n"},
		{[]string{"PUBSUB", "NUMSUB", "a", "z"}, "*4\r\n$1\r\na\r\n:1\r\n$1\r\nz\r\n:0\r\n"},
		{[]string{"PUBSUB", "CHANNELS"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{[]string{"PUBSUB", "CHANNELS", "b*"}, "*1\r\n$1\r\nb\r\n"},
		{[]string{"PUBSUB", "NUMPAT"}, ":1\r\n"},
		{[]string{"PUBSUB", "NOPE"}, "-ERR unknown subcommand 'NOPE'. Try PUBSUB HELP.\r\n"},
		{[]string{"PUBLISH", "redlock-proxy:released", "k x"}, "-ERR channels starting with 'redlock-proxy:' are reserved by redlock-proxy (release notices)\r\n"},
		{[]string{"SPUBLISH", "redlock-proxy:x", "m"}, "-ERR channels starting with 'redlock-proxy:' are reserved by redlock-proxy (release notices)\r\n"},
	})
	subPushes.wantAnyOrder(t,
		"*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n",
		"*4\r\n$8\r\npmessage\r\n$2\r\na*\r\n$1\r\na\r\n$1\r\nm\r\n")

	// A script publishing on every backend: once; twice the same: twice.
	for range 2 {
		for _, mr := range mrs {
			mr.Publish("b", "same")
		}
	}
	subPushes.want(t, "*3\r\n$7\r\nmessage\r\n$1\r\nb\r\n$4\r\nsame\r\n", "*3\r\n$7\r\nmessage\r\n$1\r\nb\r\n$4\r\nsame\r\n")

	runAll(t, d, sub, []run{
		{[]string{"UNSUBSCRIBE", "b"}, "*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:2\r\n"},
		{[]string{"PUNSUBSCRIBE"}, "*3\r\n$12\r\npunsubscribe\r\n$2\r\na*\r\n:1\r\n"},
		{[]string{"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n"},
		{[]string{"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"},
		{[]string{"GET", "k"}, "$-1\r\n"},
	})
	// The backends drop the proxy's subscriber connection after the
	// UNSUBSCRIBE answered (the relay unsubscribes in the background), and
	// nothing published meanwhile reaches the client.
	testkit.Eventually(t, 10*time.Second, "the backends to count no subscriber", func() bool {
		return do(d, pub, "PUBLISH", "a", "gone") == ":0\r\n"
	})
	subPushes.want(t)
}

// TestPunsubscribeAllInOrder: PUNSUBSCRIBE without patterns confirms them
// in the order they were subscribed, as redis-server 7.0.15 does (it keeps
// a client's patterns in a list), not sorted.
func TestPunsubscribeAllInOrder(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	confirm := func(word, name string, n int) string {
		return fmt.Sprintf("*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n:%d\r\n", len(word), word, len(name), name, n)
	}
	runAll(t, d, c, []run{
		{[]string{"PSUBSCRIBE", "h?llo", "x\\*y", "a"}, confirm("psubscribe", "h?llo", 1) + confirm("psubscribe", "x\\*y", 2) + confirm("psubscribe", "a", 3)},
		{[]string{"PUNSUBSCRIBE", "x\\*y"}, confirm("punsubscribe", "x\\*y", 2)},
		{[]string{"PSUBSCRIBE", "b", "x\\*y"}, confirm("psubscribe", "b", 3) + confirm("psubscribe", "x\\*y", 4)},
		{[]string{"PUNSUBSCRIBE"}, confirm("punsubscribe", "h?llo", 3) + confirm("punsubscribe", "a", 2) + confirm("punsubscribe", "b", 1) + confirm("punsubscribe", "x\\*y", 0)},
	})
}

// TestSubscribedRefusalNames: a RESP2 client in subscribed mode is refused
// a subcommand under its full name ('client|id'), and an unknown
// subcommand or a subcommand's wrong arity is answered first, as
// redis-server 7.0.15 does.
func TestSubscribedRefusalNames(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	refused := func(name string) string {
		return "-ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
	}
	runAll(t, d, c, []run{
		{[]string{"SUBSCRIBE", "a"}, "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"},
		{[]string{"CLIENT", "ID"}, refused("client|id")},
		{[]string{"config", "get", "x"}, refused("config|get")},
		{[]string{"PUBSUB", "NUMSUB"}, refused("pubsub|numsub")},
		{[]string{"GET", "k"}, refused("get")},
		{[]string{"CLIENT", "FOO"}, "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"},
		{[]string{"CLIENT", "ID", "x"}, "-ERR wrong number of arguments for 'client|id' command\r\n"},
	})
}

func TestPubSubRESP3(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	sub, subPushes := hooked(d)
	pub := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	do(d, sub, "HELLO", "3")
	runAll(t, d, sub, []run{
		{[]string{"SUBSCRIBE", "a"}, ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"GET", "k"}, "_\r\n"}, // allowed in RESP3
	})
	runAll(t, d, pub, []run{{[]string{"PUBLISH", "a", "m"}, ":1\r\n"}})
	subPushes.want(t, ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n")
	runAll(t, d, sub, []run{
		{[]string{"UNSUBSCRIBE"}, ">3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n"},
		{[]string{"UNSUBSCRIBE"}, ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"},
	})
}

// TestPubSubReset: RESET and a disconnect leave every subscription.
func TestPubSubReset(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	do(d, c, "SUBSCRIBE", "a")
	do(d, c, "PSUBSCRIBE", "p*")
	if got := do(d, c, "RESET"); got != "+RESET\r\n" {
		t.Fatalf("RESET = %q", got)
	}
	if n := d.relay.Count(relay.Channel, "a") + d.relay.Count(relay.Pattern, ""); n != 0 {
		t.Fatalf("%d subscriptions left after RESET", n)
	}
	do(d, c, "SUBSCRIBE", "a")
	d.CloseClient(c)
	if n := d.relay.Count(relay.Channel, "a"); n != 0 {
		t.Fatalf("%d subscriptions left after the client left", n)
	}
}

// TestSubscriptionsBounded: a connection may hold relay.MaxSubscriberTopics
// subscriptions; a SUBSCRIBE past it is refused as a whole with a clear
// error and counted, and an UNSUBSCRIBE makes room again.
func TestSubscriptionsBounded(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	sub, _ := hooked(d)
	args := []string{"SUBSCRIBE"}
	for i := range relay.MaxSubscriberTopics - 1 {
		args = append(args, fmt.Sprintf("ch:%d", i))
	}
	if out := do(d, sub, args...); strings.HasPrefix(out, "-") {
		t.Fatalf("SUBSCRIBE of %d channels: %q", len(args)-1, out)
	}
	want := fmt.Sprintf("-ERR too many subscriptions: %d would exceed redlock-proxy's limit of %d per connection (see docs/operations.md)\r\n",
		relay.MaxSubscriberTopics+1, relay.MaxSubscriberTopics)
	if out := do(d, sub, "SUBSCRIBE", "x", "y"); out != want {
		t.Fatalf("SUBSCRIBE past the bound = %q, want %q", out, want)
	}
	if n := d.relay.Refusals()[relay.LimitSubscriberTopics]; n != 1 {
		t.Fatalf("refusals counted %d, want 1", n)
	}
	if out := do(d, sub, "PSUBSCRIBE", "x*"); !strings.Contains(out, "psubscribe") {
		t.Fatalf("PSUBSCRIBE up to the bound = %q", out)
	}
	do(d, sub, "UNSUBSCRIBE", "ch:0")
	if out := do(d, sub, "SUBSCRIBE", "x"); !strings.Contains(out, "subscribe") || strings.HasPrefix(out, "-") {
		t.Fatalf("SUBSCRIBE after an UNSUBSCRIBE = %q", out)
	}
}

// TestPubSubReservedChannels: the proxies' release notices are theirs: a
// client cannot subscribe to one, and a pattern that matches one does
// not deliver it (it would tell any client which keys are released).
func TestPubSubReservedChannels(t *testing.T) {
	d, mrs := newRelayDispatcher(t, 3)
	sub, subPushes := hooked(d)
	runAll(t, d, sub, []run{
		{[]string{"SUBSCRIBE", "redlock-proxy:released:k"}, "-ERR channels starting with 'redlock-proxy:' are reserved by redlock-proxy (release notices)\r\n"},
		{[]string{"SSUBSCRIBE", "redlock-proxy:x"}, "-ERR channels starting with 'redlock-proxy:' are reserved by redlock-proxy (release notices)\r\n"},
		{[]string{"PSUBSCRIBE", "*"}, "*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n"},
	})
	mrs[0].Publish("redlock-proxy:released:k", "tag")
	mrs[0].Publish("other", "m")
	subPushes.want(t, "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$5\r\nother\r\n$1\r\nm\r\n")
}
