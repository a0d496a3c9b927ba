package redlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// testLogger writes to the test's log, so that it shows only on failure.
// (redlocktest.Logger is the same for the packages above: this package's
// tests cannot import redlocktest, which imports redlock.)
func testLogger(tb testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "redlock", Output: tb.Output(), Level: hclog.Debug})
}

var (
	errFault = errors.New("injected fault")
	errGate  = errors.New("released by the test")
)

type mode int32

const (
	modeOK        mode = iota
	modeFail           // every call fails at once, touching nothing
	modeHang           // every call blocks until the gate opens or its context ends, then fails
	modeExists         // SetNX answers "exists" without touching the backend
	modeLostReply      // SetNX, Eval and Do run, then report an error (reply lost)
	modeGated          // every call waits for the gate (or its context), then runs
)

// faultyNode wraps a Node and injects faults.
type faultyNode struct {
	Node
	mode atomic.Int32
	dels atomic.Int32 // CompareAndDelete calls
	// parked counts calls waiting for the gate (modeHang, modeGated).
	parked atomic.Int32
	// failScript, when set, makes Eval of that one script fail at once,
	// whatever the mode (a fault in one step of a multi-step operation).
	failScript atomic.Pointer[script.Script]

	mu   sync.Mutex
	gate chan struct{} // nil: never opens
}

func (f *faultyNode) set(m mode) { f.mode.Store(int32(m)) }

// send passes a command to the pipelined node underneath while no fault is
// set, so that the tests run the fan-outs' pipelined path (replies counted
// on the connection's reader) as well as the goroutine per call path.
func (f *faultyNode) Send(c *backend.Command, deadline time.Time, to backend.Target, tag int, lone bool) {
	if s, ok := f.Node.(backend.Sender); ok && mode(f.mode.Load()) == modeOK && f.failScript.Load() == nil {
		s.Send(c, deadline, to, tag, lone)
		return
	}
	(&goSender{f}).Send(c, deadline, to, tag, false)
}

// setGated puts f into m, waiting on gate.
func (f *faultyNode) setGated(m mode, gate chan struct{}) {
	f.mu.Lock()
	f.gate = gate
	f.mu.Unlock()
	f.set(m)
}

// pre returns a non-nil error when the call must not reach the backend.
func (f *faultyNode) pre(ctx context.Context) error {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	switch mode(f.mode.Load()) {
	case modeFail:
		return errFault
	case modeHang:
		f.parked.Add(1)
		defer f.parked.Add(-1)
		select {
		case <-gate:
			return errGate
		case <-ctx.Done():
			return ctx.Err()
		}
	case modeGated:
		f.parked.Add(1)
		defer f.parked.Add(-1)
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *faultyNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, string, error) {
	if err := f.pre(ctx); err != nil {
		return false, "", err
	}
	switch mode(f.mode.Load()) {
	case modeExists:
		return false, "", nil
	case modeLostReply:
		_, _, _ = f.Node.SetNX(ctx, key, value, ttl)
		return false, "", errFault
	}
	return f.Node.SetNX(ctx, key, value, ttl)
}

func (f *faultyNode) CompareAndDelete(ctx context.Context, key, value string) (bool, error) {
	f.dels.Add(1)
	if err := f.pre(ctx); err != nil {
		return false, err
	}
	return f.Node.CompareAndDelete(ctx, key, value)
}

func (f *faultyNode) CompareAndExpire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := f.pre(ctx); err != nil {
		return false, err
	}
	return f.Node.CompareAndExpire(ctx, key, value, ttl)
}

func (f *faultyNode) Eval(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error) {
	if s == f.failScript.Load() {
		return nil, errFault
	}
	if err := f.pre(ctx); err != nil {
		return nil, err
	}
	v, err := f.Node.Eval(ctx, s, keys, args...)
	if mode(f.mode.Load()) == modeLostReply {
		return nil, errFault
	}
	return v, err
}

func (f *faultyNode) Do(ctx context.Context, args ...any) (any, error) {
	if err := f.pre(ctx); err != nil {
		return nil, err
	}
	v, err := f.Node.Do(ctx, args...)
	if mode(f.mode.Load()) == modeLostReply {
		return nil, errFault
	}
	return v, err
}

// testTimeout is the node timeout tests use unless timing is under test:
// long enough that a loaded machine does not turn answers into timeouts.
const testTimeout = 3 * time.Second

// cluster is n miniredis servers behind faultyNodes and one Redlock. Its
// connections are warmed up, and NodeTimeout defaults to testTimeout.
type cluster struct {
	mrs   []*miniredis.Miniredis
	nodes []*faultyNode
	r     *Redlock
}

func newCluster(tb testing.TB, n int, opts Options) *cluster {
	tb.Helper()
	c := &cluster{}
	var nodes []Node
	for range n {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(mr.Close)
		// Its clock stands still, as its ttls do: PEXPIRETIME (the holds'
		// stamps) then reads the same until a ttl is set.
		mr.SetTime(time.Now())
		rn, err := DialNode(mr.Addr())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = rn.Close() })
		if _, err := rn.Do(context.Background(), "PING"); err != nil {
			tb.Fatal(err)
		}
		fn := &faultyNode{Node: rn}
		c.mrs = append(c.mrs, mr)
		c.nodes = append(c.nodes, fn)
		nodes = append(nodes, fn)
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = testTimeout
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(tb)
	}
	c.r = New(nodes, opts)
	tb.Cleanup(func() { c.wait(tb) })
	return c
}

// barrierScript is sent behind a node's pending calls by wait.
var barrierScript = script.New("return 1")

// wait waits for the Redlock's background work, then for every call still
// on a node's pipelined connection: an operation that answered at the
// quorum leaves its other calls there, which Close does not wait for. A
// script sent behind them on the same connection answers after they ran.
func (c *cluster) wait(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
	defer cancel()
	if err := c.r.Close(ctx); err != nil {
		tb.Fatalf("Close: %v", err)
	}
	for _, n := range c.nodes {
		if rn, ok := n.Node.(*backend.RedisNode); ok {
			_, _ = rn.Eval(ctx, barrierScript, nil) // a closed node has nothing pending
		}
	}
}

// setMask puts the nodes whose bit is set in mask into m, the rest into modeOK.
func (c *cluster) setMask(mask int, m mode) { c.setMaskGated(mask, m, nil) }

// setMaskGated is setMask for the gated modes.
func (c *cluster) setMaskGated(mask int, m mode, gate chan struct{}) {
	for i, n := range c.nodes {
		if mask&(1<<i) != 0 {
			n.setGated(m, gate)
		} else {
			n.setGated(modeOK, nil)
		}
	}
}

// value returns key's value on node i, "" when absent.
func (c *cluster) value(i int, key string) string {
	v, err := c.mrs[i].Get(key)
	if err != nil {
		return ""
	}
	return v
}

// holders counts the nodes where key holds token.
func (c *cluster) holders(key, token string) int {
	n := 0
	for i := range c.mrs {
		if c.value(i, key) == token {
			n++
		}
	}
	return n
}

// stepClock advances by step on every reading.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func mustKind(tb testing.TB, err, kind error) *QuorumError {
	tb.Helper()
	if !errors.Is(err, kind) {
		tb.Fatalf("err = %v, want %v", err, kind)
	}
	var qe *QuorumError
	if !errors.As(err, &qe) {
		tb.Fatalf("err = %T %v, want *QuorumError", err, err)
	}
	return qe
}

// DialNode is DialNodeTLS without TLS settings.
func DialNode(rawurl string) (*backend.RedisNode, error) {
	return backend.DialNodeTLS(rawurl, nil)
}
