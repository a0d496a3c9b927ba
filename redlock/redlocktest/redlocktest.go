package redlocktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
)

// NodeTimeout is New's default redlock.Options.NodeTimeout: long enough
// that a loaded machine (the race detector, other work on two CPUs) does
// not turn answers into timeouts. Each backend call's deadline is still
// min(NodeTimeout, 5% of the ttl), so tests lock for 2 s or more unless a
// short ttl is what they test.
const NodeTimeout = 2 * time.Second

// Logger is a debug-level logger writing to the test's log, so that what
// it logs shows only when the test fails (or with -v).
func Logger(tb testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: tb.Output(), Level: hclog.Debug})
}

// New returns a Redlock over n in-process miniredis backends, with its
// connections to all of them made, and the backends. When the test ends the
// Redlock is closed (its background work waited for), then its nodes and
// the backends. Unset opts default to NodeTimeout and Logger(tb).
func New(tb testing.TB, n int, opts redlock.Options) (*redlock.Redlock, []*miniredis.Miniredis) {
	tb.Helper()
	mrs := make([]*miniredis.Miniredis, n)
	nodes := make([]redlock.Node, n)
	for i := range n {
		mrs[i] = miniredis.RunT(tb)
		// Its clock stands still, as its ttls do: PEXPIRETIME (the holds'
		// stamps) reads the same until a ttl is set. Elapse moves both.
		setTime(mrs[i], time.Now())
		node, err := backend.DialNodeTLS(mrs[i].Addr(), nil)
		if err != nil {
			tb.Fatal(err)
		}
		nodes[i] = node
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = NodeTimeout
	}
	if opts.Logger == nil {
		opts.Logger = Logger(tb)
	}
	rl := redlock.New(nodes, opts)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rl.Close(ctx); err != nil {
			tb.Errorf("Redlock.Close: %v", err)
		}
		_ = rl.CloseNodes()
	})
	// Connected before the test starts: a first command would otherwise
	// pay for the dial.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if up := rl.Connect(ctx); up != n {
		tb.Fatalf("%d of %d miniredis backends connected", up, n)
	}
	return rl, mrs
}

// Elapse moves the clocks of backends from New on by d, and their ttls
// with them, as that much time would.
func Elapse(d time.Duration, mrs ...*miniredis.Miniredis) {
	for _, mr := range mrs {
		t, _ := clocks.Load(mr)
		now, _ := t.(time.Time)
		setTime(mr, now.Add(d))
		mr.FastForward(d)
	}
}

// clocks holds the time each backend from New was set to.
var clocks sync.Map

func setTime(mr *miniredis.Miniredis, t time.Time) {
	clocks.Store(mr, t)
	mr.SetTime(t)
}
