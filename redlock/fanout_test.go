package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// Flights over pipelined nodes: replies are counted on the connections'
// reader goroutines and the deadline is a timer (fanout.go). These tests
// use RedisNodes directly, with no wrapper, so every call takes that path.

// pipelinedNodes starts n miniredis servers and dials a RedisNode to each.
func pipelinedNodes(t *testing.T, n int) ([]*miniredis.Miniredis, []Node) {
	t.Helper()
	var mrs []*miniredis.Miniredis
	var nodes []Node
	for range n {
		mr := miniredis.RunT(t)
		rn, err := DialNode(mr.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rn.Close() })
		mrs = append(mrs, mr)
		nodes = append(nodes, rn)
	}
	return mrs, nodes
}

// fakeNodes starts n fake Redis 7 backends (native_test.go), which the
// tests can stall, and dials a RedisNode to each.
func fakeNodes(t *testing.T, n int) ([]*testkit.FakeRedis, []Node) {
	t.Helper()
	var fakes []*testkit.FakeRedis
	var nodes []Node
	for range n {
		f, addr := testkit.StartFakeRedis(t, "# Server\r\nredis_version:7.0.15\r\n")
		rn, err := DialNode(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rn.Close() })
		fakes = append(fakes, f)
		nodes = append(nodes, rn)
	}
	return fakes, nodes
}

// warm dials every node's pipelined connection, so that calls are sent
// without a goroutine from the first one.
func warm(t *testing.T, nodes []Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range nodes {
		if _, err := n.CompareAndDelete(ctx, "warm-up", "x"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFanoutLateReplyUndone: a node that answers after the deadline has
// its late write undone, in order: the rollback is sent on the same
// connection behind the write, so it runs after it.
func TestFanoutLateReplyUndone(t *testing.T) {
	mrs, nodes := pipelinedNodes(t, 4)
	fake, addr := testkit.StartFakeRedis(t, "# Server\r\nredis_version:7.0.15\r\n")
	slow, err := DialNode(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	nodes = append(nodes, slow)
	warm(t, nodes)
	for _, mr := range mrs[:2] {
		mr.Set("k", "other")
	}
	// The acquire waits for the stalled node's deadline, min(node timeout,
	// 5% of the 10 s ttl) = 500 ms: long enough that the four live nodes
	// answer well within it on a loaded machine.
	r := New(nodes, Options{NodeTimeout: time.Second, Logger: testLogger(t)})
	ctx := context.Background()

	resume := fake.Stall()
	_, err = r.Acquire(ctx, "k", "tok", 10*time.Second) // 2 yes, 2 no, 1 timeout
	mustKind(t, err, ErrHeld)
	resume() // the stalled SET NX runs now, then the rollback behind it

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		cmds := fake.Received()
		if i := slices.Index(cmds, "SET"); i >= 0 && slices.Index(cmds[i:], "EVALSHA") > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := fake.Value("k"); v != "" {
		t.Fatalf("the late node holds k=%q after the rollback; it received %v", v, fake.Received())
	}
	for i, mr := range mrs {
		if v, _ := mr.Get("k"); i >= 2 && v != "" {
			t.Fatalf("node %d holds k=%q after the rollback", i, v)
		}
	}
}

// TestFanoutStalledMinority: two pipelined nodes that never answer cost
// the quorum nothing; their calls time out at the deadline, count as
// failures in their health, and Close waits for that.
func TestFanoutStalledMinority(t *testing.T) {
	_, nodes := pipelinedNodes(t, 3)
	fakes, more := fakeNodes(t, 2)
	nodes = append(nodes, more...)
	warm(t, nodes)
	// The stalled calls end at this deadline (the ttl of 20 s is long
	// enough that its 5% does not cap it: a shorter deadline's timeout
	// would not count as a failure); the quorum of live nodes must decide
	// well before it, on a loaded machine too.
	const timeout = time.Second
	r := New(nodes, Options{NodeTimeout: timeout, Logger: testLogger(t)})
	for _, f := range fakes {
		defer f.Stall()()
	}
	ctx := context.Background()
	start := time.Now()
	l, err := r.Acquire(ctx, "k", "tok", 20*time.Second)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := r.Release(ctx, "k", l.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if el := time.Since(start); el >= timeout {
		t.Fatalf("Acquire+Release took %v, at least the deadline of the stalled nodes", el)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if el := time.Since(start); el < timeout {
		t.Fatalf("Close returned after %v, before the stalled calls' deadline", el)
	}
	for i := 3; i < 5; i++ {
		if f := r.health[i].fails.Load(); f != 2 {
			t.Fatalf("node %d: %d failures recorded, want 2 (acquire and release timed out)", i, f)
		}
	}
}

// TestFanoutCallerGivesUp: a caller whose context ends gets its error at
// once; the calls still count towards health and are undone.
func TestFanoutCallerGivesUp(t *testing.T) {
	mrs, nodes := pipelinedNodes(t, 2)
	fakes, more := fakeNodes(t, 3)
	nodes = append(nodes, more...)
	warm(t, nodes)
	// The nodes' deadline, min(node timeout, 5% of the 60 s ttl) = 3 s, is
	// far above the 1 s bound below: returning within it means at the
	// caller's deadline, not at the nodes'.
	r := New(nodes, Options{NodeTimeout: 10 * time.Second, Logger: testLogger(t)})
	var resumes []func()
	for _, f := range fakes {
		resumes = append(resumes, f.Stall())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Acquire(ctx, "k", "tok", time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want the caller's deadline", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Acquire returned after %v, want at the caller's 20 ms deadline", el)
	}
	for _, resume := range resumes {
		resume()
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := r.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, mr := range mrs {
		if v, _ := mr.Get("k"); v != "" {
			t.Fatalf("node %d holds k=%q after the rollback", i, v)
		}
	}
	for i, f := range fakes {
		if v := f.Value("k"); v != "" {
			t.Fatalf("stalled node %d holds k=%q after the rollback; received %v", i, v, f.Received())
		}
	}
}

// TestConnect: Connect waits for every node's connection and counts the
// nodes that have one; a dead address is not counted.
func TestConnect(t *testing.T) {
	_, nodes := pipelinedNodes(t, 2)
	// Port 1: nothing listens there, and no test can bind it (a port
	// just closed could be taken by another package's listener at once).
	n, err := DialNode("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	r := New(append(nodes, n), Options{Logger: testLogger(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a bound: the dead address is refused at once
	defer cancel()
	if up := r.Connect(ctx); up != 2 {
		t.Fatalf("Connect = %d, want 2 of 3", up)
	}
	for i, n := range nodes {
		if n.(*backend.RedisNode).Ready() == nil {
			t.Fatalf("node %d has no connection after Connect", i)
		}
	}
}

// slowNode is an in-memory Node, not a sender, whose SetNX and
// CompareAndDelete take a set time whatever their context says; it logs
// the order in which they ran.
type slowNode struct {
	name               string
	setDelay, cadDelay time.Duration
	cads               atomic.Int32

	mu   sync.Mutex
	keys map[string]string
	log  []string
}

func newSlowNode(name string) *slowNode { return &slowNode{name: name, keys: map[string]string{}} }

func (n *slowNode) Addr() string { return n.name }
func (n *slowNode) Close() error { return nil }

func (n *slowNode) value(key string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.keys[key]
}

func (n *slowNode) SetNX(_ context.Context, key, value string, _ time.Duration) (bool, string, error) {
	time.Sleep(n.setDelay)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.log = append(n.log, "SET")
	if _, ok := n.keys[key]; ok {
		return false, "", nil
	}
	n.keys[key] = value
	return true, "", nil
}

func (n *slowNode) CompareAndDelete(_ context.Context, key, value string) (bool, error) {
	n.cads.Add(1)
	time.Sleep(n.cadDelay)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.log = append(n.log, "CAD")
	if n.keys[key] != value {
		return false, nil
	}
	delete(n.keys, key)
	return true, nil
}

func (n *slowNode) CompareAndExpire(context.Context, string, string, time.Duration) (bool, error) {
	return false, errors.New("slowNode: not supported")
}

func (n *slowNode) Eval(context.Context, *script.Script, []string, ...any) (any, error) {
	return nil, errors.New("slowNode: not supported")
}

func (n *slowNode) Do(context.Context, ...any) (any, error) {
	return nil, errors.New("slowNode: not supported")
}

func closeWithin(t *testing.T, r *Redlock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestFanoutUndoAfterSlowCall: a call run by a goroutine that returns
// after the deadline is undone only once it returned (the
// deadline used to settle it, and the undo overtook the SET).
func TestFanoutUndoAfterSlowCall(t *testing.T) {
	a, b, c := newSlowNode("a"), newSlowNode("b"), newSlowNode("c")
	a.keys["k"], b.keys["k"] = "other", "other"
	c.setDelay = 150 * time.Millisecond
	r := New([]Node{a, b, c}, Options{NodeTimeout: 50 * time.Millisecond, Logger: testLogger(t)})
	_, err := r.Acquire(context.Background(), "k", "tok", 10*time.Second)
	mustKind(t, err, ErrHeld)
	closeWithin(t, r)
	if v := c.value("k"); v != "" {
		t.Fatalf("the slow node holds k=%q after the rollback: the undo overtook the SET (%v)", v, c.log)
	}
}

// TestFanoutReleaseGateAfterSlowDelete: Release keeps the key's gate
// until a slow delete returned, so a re-acquire with the same token is not
// deleted by it.
func TestFanoutReleaseGateAfterSlowDelete(t *testing.T) {
	a, b, c := newSlowNode("a"), newSlowNode("b"), newSlowNode("c")
	for _, n := range []*slowNode{a, b, c} {
		n.keys["k"] = "tok"
	}
	c.cadDelay = 150 * time.Millisecond
	r := New([]Node{a, b, c}, Options{NodeTimeout: 50 * time.Millisecond, Logger: testLogger(t)})
	if err := r.Release(context.Background(), "k", "tok"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Acquire(context.Background(), "k", "tok", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	closeWithin(t, r)
	if v := c.value("k"); v != "tok" {
		t.Fatalf("node c lost the new lock (k=%q): the old delete ran after the new SET (%v)", v, c.log)
	}
}

// TestFanoutTinyDeadline: a deadline shorter than launch itself (1ns)
// neither races nor panics (the timer could fire before
// launch had stored it).
func TestFanoutTinyDeadline(t *testing.T) {
	r := New([]Node{newSlowNode("a"), newSlowNode("b"), newSlowNode("c")}, Options{NodeTimeout: 1})
	for range 2000 {
		_ = r.Release(context.Background(), "k", "tok")
	}
	closeWithin(t, r)
}

// slowSender sends from a goroutine after a pause, as if launch were
// descheduled while sending.
type slowSender struct {
	*slowNode
	pause time.Duration
}

func (s slowSender) Send(c *backend.Command, deadline time.Time, to backend.Target, tag int, lone bool) {
	time.Sleep(s.pause)
	(&goSender{s}).Send(c, deadline, to, tag, lone)
}

// slowSender is a backend.Sender (without its lone, it was never used as
// one, and the test below ran the goroutine path instead).
var _ backend.Sender = slowSender{}

// TestFanoutNotVotingNeverUndone: a node that does not vote is neither
// called nor undone, even when launch passes the deadline before reaching
// it.
func TestFanoutNotVotingNeverUndone(t *testing.T) {
	a, b, c := newSlowNode("a"), newSlowNode("b"), newSlowNode("c")
	r := New([]Node{slowSender{a, 30 * time.Millisecond}, b, c}, Options{NodeTimeout: 5 * time.Millisecond, Logger: testLogger(t)})
	h := r.health[1]
	h.mu.Lock()
	h.down = true
	h.stop()
	h.mu.Unlock()
	_, _ = r.Acquire(context.Background(), "k", "tok", 10*time.Second)
	closeWithin(t, r)
	if n := b.cads.Load(); n != 0 {
		t.Fatalf("the node that does not vote got %d CompareAndDelete calls", n)
	}
}

// TestFanoutStress runs 64 workers for 2 s through fan-outs over pipelined
// nodes, two of them fakes that stall and lose their native command now
// and then, with deadlines of a few milliseconds and callers giving up at
// random: under -race it checks the fan-out for races, and Close checks
// that every fan-out let go of its background work.
func TestFanoutStress(t *testing.T) {
	_, nodes := pipelinedNodes(t, 3)
	stalling, more := fakeNodes(t, 1)
	nodes = append(nodes, more...)
	native, addr := testkit.StartFakeRedis(t, "# Server\r\nredis_version:8.4.0\r\n") // DELEX
	n, err := DialNode(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	nodes = append(nodes, n)
	warm(t, nodes)
	r := New(nodes, Options{NodeTimeout: 3 * time.Millisecond})
	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			resume := stalling[0].Stall()
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			resume()
			native.SetNative(rand.IntN(2) == 0)
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
		}
	})
	var workers sync.WaitGroup
	end := time.Now().Add(2 * time.Second)
	for w := range 64 {
		workers.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				k := "k" + strconv.Itoa(rand.IntN(8))
				tok := "t" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(4)+1)*time.Millisecond)
				if rand.IntN(3) == 0 {
					_, _ = r.AcquireKeys(ctx, []string{k, k + "x"}, tok, time.Second, IfAbsentOrMine)
					_, _ = r.ReleaseKeys(context.Background(), []string{k, k + "x"}, tok)
				} else if _, err := r.Acquire(ctx, k, tok, time.Second); err == nil {
					_ = r.Release(context.Background(), k, tok)
				}
				cancel()
			}
		})
	}
	workers.Wait()
	close(stop)
	faults.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v: a fan-out kept its background work", err)
	}
}

// TestAcquireReleaseAllocs holds the proxy's path to its allocation
// budget: an acquire and a release over five pipelined nodes allocate 16
// times (BenchmarkAcquireReleasePipelined5); a goroutine and a closure per
// backend call, as before, made it 52.
func TestAcquireReleaseAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: make allocs runs this without it")
	}
	var nodes []Node
	for range 5 {
		n, err := DialNode(testkit.Canned(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	warm(t, nodes)
	r := New(nodes, Options{NodeTimeout: time.Second})
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := r.Acquire(ctx, "k", "tok", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := r.Release(ctx, "k", "tok"); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.1f allocations per acquire and release", allocs)
	if allocs > 24 {
		t.Fatalf("%.1f allocations per acquire and release, want at most 24", allocs)
	}
	closeWithin(t, r)
}
