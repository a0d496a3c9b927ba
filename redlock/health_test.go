package redlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// manualClock moves only when told to.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logBuffer keeps log lines for assertions and sends them to t.Log too.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fakeNode is an in-memory Node that is also a prober and observable.
// Calls count op calls (not probes).
type fakeNode struct {
	addr  string
	calls atomic.Int32

	mu      sync.Mutex
	keys    map[string]string
	fail    error         // every call and probe fails with it
	gate    chan struct{} // non-nil: calls wait for it
	entered chan struct{} // gated calls announce themselves here
	probe   Probe
	obs     func(Probe)
}

func (f *fakeNode) Addr() string { return f.addr }

func (f *fakeNode) enter(ctx context.Context) error {
	f.calls.Add(1)
	f.mu.Lock()
	fail, gate, entered := f.fail, f.gate, f.entered
	f.mu.Unlock()
	if fail != nil {
		return fail
	}
	if gate != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *fakeNode) SetNX(ctx context.Context, key, value string, _ time.Duration) (bool, string, error) {
	if err := f.enter(ctx); err != nil {
		return false, "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.keys[key]; ok {
		return false, "", nil
	}
	f.keys[key] = value
	return true, "", nil
}

func (f *fakeNode) CompareAndDelete(ctx context.Context, key, value string) (bool, error) {
	if err := f.enter(ctx); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys[key] != value {
		return false, nil
	}
	delete(f.keys, key)
	return true, nil
}

func (f *fakeNode) CompareAndExpire(ctx context.Context, key, value string, _ time.Duration) (bool, error) {
	if err := f.enter(ctx); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key] == value, nil
}

func (f *fakeNode) Eval(ctx context.Context, _ *script.Script, _ []string, _ ...any) (any, error) {
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	return nil, errors.New("fake node runs no scripts")
}

func (f *fakeNode) Do(ctx context.Context, _ ...any) (any, error) {
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	return "OK", nil
}

func (f *fakeNode) Close() error { return nil }

func (f *fakeNode) Probe(context.Context) (Probe, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return Probe{}, f.fail
	}
	return f.probe, nil
}

func (f *fakeNode) SetObserver(obs func(Probe)) {
	f.mu.Lock()
	f.obs = obs
	f.mu.Unlock()
}

// connect reports a new connection, as RedisNode's connect check (setupPipe) does.
func (f *fakeNode) connect(p Probe) {
	f.mu.Lock()
	obs := f.obs
	f.mu.Unlock()
	obs(p)
}

func (f *fakeNode) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

func (f *fakeNode) setProbe(p Probe) {
	f.mu.Lock()
	f.probe = p
	f.mu.Unlock()
}

func (f *fakeNode) has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.keys[key]
	return ok
}

// fakes is n fakeNodes under one Redlock on a manual clock.
type fakes struct {
	nodes []*fakeNode
	r     *Redlock
	clock *manualClock
	logs  *logBuffer
	start time.Time
}

func newFakes(tb testing.TB, n int, opts Options) *fakes {
	tb.Helper()
	f := &fakes{clock: &manualClock{t: time.Unix(1_000_000, 0)}, logs: &logBuffer{}}
	f.start = f.clock.Now()
	var nodes []Node
	for i := range n {
		fn := &fakeNode{addr: fmt.Sprintf("fake-%d", i), keys: map[string]string{}, probe: Probe{Uptime: -1}}
		f.nodes = append(f.nodes, fn)
		nodes = append(nodes, fn)
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = testTimeout
	}
	opts.Now = f.clock.Now
	opts.Logger = hclog.New(&hclog.LoggerOptions{
		Name: "redlock", Level: hclog.Debug, Output: io.MultiWriter(tb.Output(), f.logs),
	})
	f.r = New(nodes, opts)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
		defer cancel()
		if err := f.r.Close(ctx); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return f
}

func (f *fakes) state(i int) NodeStatus { return f.r.Status()[i] }

func (f *fakes) mustState(tb testing.TB, i int, state string) NodeStatus {
	tb.Helper()
	s := f.state(i)
	if s.State != state {
		tb.Fatalf("node %d: %+v, want state %s", i, s, state)
	}
	return s
}

func mustNotVoting(tb testing.TB, err error, n int) {
	tb.Helper()
	qe := mustKind(tb, err, ErrNoQuorum)
	got := 0
	for _, e := range qe.Errs {
		var ne *NodeError
		if errors.As(e, &ne) && errors.Is(e, ErrNotVoting) {
			got++
		}
	}
	if got != n {
		tb.Fatalf("%d ErrNotVoting node errors in %v, want %d", got, qe.Errs, n)
	}
}

func TestRestartQuarantine(t *testing.T) {
	f := newFakes(t, 5, Options{MaxTTL: 10 * time.Second})
	q := f.r.quarantineLength()
	if want := 10*time.Second + 100*time.Millisecond + 2*time.Millisecond; q != want {
		t.Fatalf("quarantine %v, want %v", q, want)
	}
	for _, n := range f.nodes {
		n.connect(Probe{RunID: "a", Uptime: time.Hour})
	}
	if v := f.r.Voting(); v != 5 {
		t.Fatalf("Voting = %d, want 5", v)
	}
	f.clock.add(time.Second)
	seen := f.clock.Now()
	for _, n := range f.nodes[:3] {
		n.connect(Probe{RunID: "b", Uptime: time.Second}) // reconnect after a restart
	}
	for i := range 3 {
		s := f.mustState(t, i, StateQuarantined)
		if !s.QuarantinedUntil.Equal(seen.Add(q)) || s.Reason != "restarted: run_id changed" || s.RunID != "b" {
			t.Fatalf("node %d: %+v, want until %v", i, s, seen.Add(q))
		}
	}
	if v := f.r.Voting(); v != 2 {
		t.Fatalf("Voting = %d, want 2", v)
	}

	ctx := context.Background()
	start := time.Now()
	_, err := f.r.Acquire(ctx, "k1", "tok", ttl)
	if took := time.Since(start); took > testTimeout/2 {
		t.Errorf("Acquire took %v", took)
	}
	mustNotVoting(t, err, 3)
	for i, n := range f.nodes[:3] {
		if c := n.calls.Load(); c != 0 {
			t.Fatalf("quarantined node %d called %d times", i, c)
		}
	}

	f.clock.add(q - time.Nanosecond)
	if v := f.r.Voting(); v != 2 {
		t.Fatalf("Voting = %d just before the end of the quarantine, want 2", v)
	}
	f.clock.add(time.Nanosecond)
	if _, err := f.r.Acquire(ctx, "k2", "tok", ttl); err != nil {
		t.Fatalf("Acquire after the quarantine: %v", err)
	}
	if v := f.r.Voting(); v != 5 {
		t.Fatalf("Voting = %d, want 5", v)
	}
	if err := f.r.Close(ctx); err != nil { // the calls after the decision
		t.Fatal(err)
	}
	for i, n := range f.nodes {
		if !n.has("k2") {
			t.Fatalf("node %d lacks the lock after the quarantine", i)
		}
	}
}

func TestStartupQuarantine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		trust  bool
		probe  Probe
		up     bool          // not quarantined
		until  time.Duration // after start, minus q
		reason string
	}{
		// uptime_in_seconds may be a second more than the time that passed:
		// the quarantine counts one second less of it (q is 10.102s).
		{name: "fresh", probe: Probe{RunID: "a", Uptime: 2 * time.Second}, until: -time.Second, reason: "fresh at start: uptime 2s"},
		{name: "fresh 1s", probe: Probe{RunID: "a", Uptime: time.Second}, reason: "fresh at start: uptime 1s"},
		{name: "just started", probe: Probe{RunID: "a", Uptime: 0}, reason: "fresh at start: uptime 0s"},
		{name: "older than q by less than the slack", probe: Probe{RunID: "a", Uptime: 10500 * time.Millisecond}, until: -9500 * time.Millisecond, reason: "fresh at start: uptime 10.5s"},
		{name: "older than q and the slack", probe: Probe{RunID: "a", Uptime: 11200 * time.Millisecond}, up: true},
		{name: "trusted", trust: true, probe: Probe{RunID: "a", Uptime: 2 * time.Second}, up: true},
		{name: "no run_id", probe: Probe{Uptime: 2 * time.Second}, up: true},
		{name: "old", probe: Probe{RunID: "a", Uptime: time.Hour}, up: true},
		{name: "uptime unknown", probe: Probe{RunID: "a", Uptime: -1}, up: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t, 3, Options{MaxTTL: 10 * time.Second, TrustFreshBackends: tc.trust})
			f.nodes[0].connect(tc.probe)
			s := f.state(0)
			if tc.up {
				if s.State != StateUp || f.r.Voting() != 3 {
					t.Fatalf("%+v, want up", s)
				}
				return
			}
			want := f.start.Add(f.r.quarantineLength() + tc.until)
			if s.State != StateQuarantined || !s.QuarantinedUntil.Equal(want) || s.Reason != tc.reason {
				t.Fatalf("%+v, want quarantined until %v", s, want)
			}
			if !strings.Contains(f.logs.String(), "a fresh deployment waits max_ttl before its first lock") {
				t.Fatalf("log lacks the start-up warning:\n%s", f.logs)
			}
			// A second report of the same run_id changes nothing.
			f.nodes[0].connect(tc.probe)
			if s2 := f.state(0); s2 != s {
				t.Fatalf("%+v after a second report, want %+v", s2, s)
			}
		})
	}
	t.Run("disabled", func(t *testing.T) {
		f := newFakes(t, 3, Options{})
		f.nodes[0].connect(Probe{RunID: "a", Uptime: 0})
		f.nodes[0].connect(Probe{RunID: "b", Uptime: 0})
		if v := f.r.Voting(); v != 3 {
			t.Fatalf("Voting = %d without MaxTTL, want 3", v)
		}
	})
}

func TestClockWatch(t *testing.T) {
	ctx := context.Background()
	// Each probe: local +1s; tolerance 100ms + 1% of 1s = 110ms.
	for _, tc := range []struct {
		remote      time.Duration
		quarantined bool
	}{
		{time.Second, false},
		{time.Second + 105*time.Millisecond, false},
		{time.Second - 105*time.Millisecond, false},
		{time.Second + 120*time.Millisecond, true},
		{5 * time.Second, true},
		{-time.Second, true},
	} {
		f := newFakes(t, 3, Options{MaxTTL: 10 * time.Second})
		remote := time.Unix(5_000_000, 0)
		f.nodes[0].setProbe(Probe{Uptime: -1, Time: remote})
		f.r.probeAll(ctx)
		f.clock.add(time.Second)
		f.nodes[0].setProbe(Probe{Uptime: -1, Time: remote.Add(tc.remote)})
		f.r.probeAll(ctx)
		s := f.state(0)
		if !tc.quarantined {
			if s.State != StateUp {
				t.Fatalf("remote +%v: %+v, want up", tc.remote, s)
			}
			continue
		}
		jump := tc.remote - time.Second
		want := f.clock.Now().Add(f.r.quarantineLength())
		if s.State != StateQuarantined || s.Reason != "clock jumped by "+jump.String() || !s.QuarantinedUntil.Equal(want) {
			t.Fatalf("remote +%v: %+v", tc.remote, s)
		}
		if logs := f.logs.String(); !strings.Contains(logs, "[ERROR]") || !strings.Contains(logs, "backend clock jumped") {
			t.Fatalf("no error logged:\n%s", logs)
		}
		if ev := f.r.Events().Last(1); s.ClockJumps != 1 || len(ev) != 1 || ev[0].Kind != EventClockJump || ev[0].Subject != s.Addr {
			t.Fatalf("remote +%v: jumps %d, events %+v", tc.remote, s.ClockJumps, ev)
		}
		// The baseline reset: a steady clock afterwards raises nothing new.
		f.clock.add(time.Second)
		f.nodes[0].setProbe(Probe{Uptime: -1, Time: remote.Add(tc.remote + time.Second)})
		f.r.probeAll(ctx)
		if s2 := f.state(0); !s2.QuarantinedUntil.Equal(want) {
			t.Fatalf("remote +%v: quarantine moved after a steady sample: %+v", tc.remote, s2)
		}
	}
}

func TestDownAfter(t *testing.T) {
	ctx := context.Background()
	f := newFakes(t, 3, Options{})
	acquire := func(key string) {
		t.Helper()
		if _, err := f.r.Acquire(ctx, key, "tok", ttl); err != nil {
			t.Fatalf("Acquire %s: %v", key, err)
		}
		if err := f.r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Without a health loop to bring it back, a node never goes down.
	f.nodes[0].setFail(errFault)
	for i := range 4 {
		acquire(fmt.Sprintf("x%d", i))
	}
	f.mustState(t, 0, StateUp)
	if s := f.state(0); s.Failures != 4 {
		t.Fatalf("%+v, want 4 failures counted", s)
	}
	f.r.loops.Add(1)
	f.r.endHealth() // a health loop that ends resets the counts
	if s := f.state(0); s.Failures != 0 {
		t.Fatalf("%+v, want the count reset", s)
	}
	f.r.loops.Add(1) // as if RunHealth ran; its probes are driven by hand

	// Failures that are not consecutive do not mark a node down.
	acquire("a1")
	acquire("a2")
	f.nodes[0].setFail(nil)
	acquire("a3")
	f.nodes[0].setFail(errFault)
	acquire("a4")
	acquire("a5")
	f.mustState(t, 0, StateUp)
	acquire("a6")
	s := f.mustState(t, 0, StateDown)
	if s.Reason != "failing: injected fault" || s.Failures != 3 {
		t.Fatalf("%+v", s)
	}
	if !strings.Contains(f.logs.String(), "backend down") {
		t.Fatalf("down not logged:\n%s", f.logs)
	}
	if ev := f.r.Events().Last(5); len(ev) != 1 || ev[0].Kind != EventBackendDown || ev[0].Subject != s.Addr {
		t.Fatalf("events after down: %+v", ev)
	}
	calls := f.nodes[0].calls.Load()
	acquire("b")
	if c := f.nodes[0].calls.Load(); c != calls {
		t.Fatalf("down node called %d more times", c-calls)
	}
	if f.r.Voting() != 2 {
		t.Fatalf("Voting = %d, want 2", f.r.Voting())
	}
	f.r.probeAll(ctx) // still failing
	f.mustState(t, 0, StateDown)
	f.nodes[0].setFail(nil)
	f.r.probeAll(ctx)
	f.mustState(t, 0, StateUp)
	acquire("c")
	if !f.nodes[0].has("c") {
		t.Fatal("node back up did not take part")
	}
}

// A short ttl's deadline (below NodeTimeout) running out says nothing
// about the node; a server error reply shows a live node.
func TestOutcome(t *testing.T) {
	nt := 50 * time.Millisecond
	for _, tc := range []struct {
		err  error
		d    time.Duration
		want callOutcome
	}{
		{nil, nt, callOK},
		{errFault, nt, callFailed},
		{context.DeadlineExceeded, nt, callFailed},
		{context.DeadlineExceeded, time.Millisecond, callIgnored},
		{fmt.Errorf("%w: down", ErrNotVoting), nt, callIgnored},
		// What a client caused says nothing about the node.
		{&NodeError{Addr: "a", Err: fmt.Errorf("vote: %w", resp.ErrTooDeep)}, nt, callIgnored},
		{&NodeError{Addr: "a", Err: resp.ErrTooLarge}, nt, callIgnored},
		{RedisError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), nt, callIgnored},
		{&NodeError{Addr: "a", Err: RedisError("LOADING Redis is loading the dataset in memory")}, nt, callFailed},
		{fmt.Errorf("%w: length %q", resp.ErrProtocol, "x"), nt, callFailed},
	} {
		if got := outcome(tc.err, tc.d, nt); got != tc.want {
			t.Errorf("outcome(%v, %v) = %v, want %v", tc.err, tc.d, got, tc.want)
		}
	}
	mr := miniredis.RunT(t)
	n, err := DialNode(mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	_, wrongType := n.Do(ctx, "NOSUCHCOMMAND")
	if got := outcome(wrongType, nt, nt); wrongType == nil || got != callOK {
		t.Errorf("server error %v: %v, want callOK", wrongType, got)
	}
}

func TestVoteDiscardedMidCall(t *testing.T) {
	f := newFakes(t, 3, Options{MaxTTL: 10 * time.Second})
	for _, n := range f.nodes {
		n.connect(Probe{RunID: "a", Uptime: time.Hour})
	}
	gate := make(chan struct{})
	entered := make(chan struct{}, 2)
	for _, n := range f.nodes[1:] {
		n.mu.Lock()
		n.gate, n.entered = gate, entered
		n.mu.Unlock()
	}
	errc := make(chan error, 1)
	go func() {
		_, err := f.r.Acquire(context.Background(), "k", "tok", ttl)
		errc <- err
	}()
	<-entered
	<-entered
	// Both restart while their SETs are in flight: a new connection saw it.
	f.nodes[1].connect(Probe{RunID: "b", Uptime: 0})
	f.nodes[2].connect(Probe{RunID: "b", Uptime: 0})
	close(gate)
	mustNotVoting(t, <-errc, 2)
	if err := f.r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, n := range f.nodes {
		if n.has("k") {
			t.Fatalf("node %d holds the key after rollback", i)
		}
	}
}

func TestLoading(t *testing.T) {
	ctx := context.Background()
	f := newFakes(t, 3, Options{})
	f.nodes[2].setProbe(Probe{Uptime: -1, Loading: true})
	f.r.probeAll(ctx)
	f.mustState(t, 2, StateLoading)
	if v := f.r.Voting(); v != 2 {
		t.Fatalf("Voting = %d, want 2", v)
	}
	if _, err := f.r.Acquire(ctx, "k", "tok", ttl); err != nil {
		t.Fatal(err)
	}
	if c := f.nodes[2].calls.Load(); c != 0 {
		t.Fatalf("loading node called %d times", c)
	}
	f.nodes[2].setProbe(Probe{Uptime: -1})
	f.r.probeAll(ctx)
	f.mustState(t, 2, StateUp)
	if v := f.r.Voting(); v != 3 {
		t.Fatalf("Voting = %d, want 3", v)
	}
}

func TestRunHealth(t *testing.T) {
	f := newFakes(t, 3, Options{HealthInterval: time.Millisecond, DownAfter: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.r.RunHealth(ctx)
	}()
	waitState := func(state string) {
		t.Helper()
		deadline := time.Now().Add(testTimeout)
		for f.state(0).State != state {
			if time.Now().After(deadline) {
				t.Fatalf("node 0: %+v, want %s", f.state(0), state)
			}
			time.Sleep(time.Millisecond)
		}
	}
	f.nodes[0].setFail(errFault)
	waitState(StateDown) // the probes fail
	f.nodes[0].setFail(nil)
	waitState(StateUp)
	f.nodes[0].setFail(errFault)
	waitState(StateDown)
	cancel()
	<-done
	// Nothing would bring it back now, so it votes again.
	f.mustState(t, 0, StateUp)
}

// Failed calls alone mark at most N − quorum nodes down: under load that
// fails every call, the quorum stays with the nodes that still vote, and
// only probes (a connection of their own) may take the rest out.
func TestCallsMarkAtMostNMinusQuorumDown(t *testing.T) {
	ctx := context.Background()
	f := newFakes(t, 5, Options{})
	f.r.loops.Add(1) // as if RunHealth ran; its probes are driven by hand
	for i := range 3 {
		f.nodes[i].setFail(errFault)
	}
	for i := range 8 {
		_, _ = f.r.Acquire(ctx, fmt.Sprintf("k%d", i), "tok", ttl)
	}
	down := 0
	for i := range 5 {
		if f.state(i).State == StateDown {
			down++
		}
	}
	if down != 2 {
		t.Fatalf("%d nodes marked down by calls, want N − quorum = 2", down)
	}
	if f.r.Voting() != 3 {
		t.Fatalf("Voting = %d, want 3", f.r.Voting())
	}
	f.r.probeAll(ctx) // the probes fail too: they may take the third out
	for i := range 3 {
		f.mustState(t, i, StateDown)
	}
	for i := range 3 {
		f.nodes[i].setFail(nil)
	}
	f.r.probeAll(ctx)
	for i := range 5 {
		f.mustState(t, i, StateUp)
	}
	if n := f.r.downs.Load(); n != 0 {
		t.Fatalf("down count %d after every node came back", n)
	}
}
