package tier

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// clock is the one time of a test: the proxies' clocks and the backends'
// TIME (miniredis SetTime) move together, only when the test says.
type clock struct {
	mu  sync.Mutex
	t   time.Time
	mrs []*miniredis.Miniredis
}

func newClock(mrs []*miniredis.Miniredis) *clock {
	c := &clock{t: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC), mrs: mrs}
	c.sync()
	return c
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	c.sync()
}

func (c *clock) sync() {
	now := c.Now()
	for _, mr := range c.mrs {
		mr.SetTime(now)
	}
}

// bed is five miniredis backends and the clock they share with proxies.
type bed struct {
	rl    *redlock.Redlock // the first proxy's
	mrs   []*miniredis.Miniredis
	clock *clock
}

func newBed(t *testing.T) *bed {
	t.Helper()
	rl, mrs := redlocktest.New(t, 5, redlock.Options{})
	return &bed{rl: rl, mrs: mrs, clock: newClock(mrs)}
}

// redlock is another proxy process's Redlock over the bed's backends;
// down lists the backends it cannot reach.
func (b *bed) redlock(t *testing.T, down ...int) *redlock.Redlock {
	t.Helper()
	nodes := make([]redlock.Node, len(b.mrs))
	for i, mr := range b.mrs {
		n, err := backend.DialNodeTLS(mr.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
		if slices.Contains(down, i) {
			nodes[i] = downNode{n}
		}
	}
	rl := redlock.New(nodes, redlock.Options{NodeTimeout: redlocktest.NodeTimeout, Logger: redlocktest.Logger(t)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rl.Close(ctx)
		_ = rl.CloseNodes()
	})
	return rl
}

// downNode is a backend this proxy cannot reach: every call fails.
type downNode struct{ redlock.Node }

var errDown = errors.New("unreachable (test)")

func (downNode) Eval(context.Context, *script.Script, []string, ...any) (any, error) {
	return nil, errDown
}

// proxy is one member under test.
type proxy struct {
	*Tier
	mu       sync.Mutex
	switches [][2]string
}

func (b *bed) proxy(t *testing.T, rl *redlock.Redlock, announce string) *proxy {
	t.Helper()
	p := &proxy{}
	p.Tier = New(rl, Options{
		Announce: announce, Now: b.clock.Now, Logger: redlocktest.Logger(t),
		CallTimeout: redlocktest.NodeTimeout,
		OnSwitch: func(old, new Member) {
			p.mu.Lock()
			p.switches = append(p.switches, [2]string{old.Addr, new.Addr})
			p.mu.Unlock()
		},
	})
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

func (p *proxy) switched() [][2]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][2]string(nil), p.switches...)
}

// beat runs one round on each proxy, one after another.
func beat(t *testing.T, ps ...*proxy) {
	t.Helper()
	for _, p := range ps {
		if err := p.Beat(context.Background()); err != nil {
			t.Fatalf("%s: Beat: %v", p.Announce(), err)
		}
	}
}

func addrs(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Addr
	}
	return out
}

func master(t *testing.T, p *proxy) string {
	t.Helper()
	m, live, ok := p.Master()
	if !ok {
		return ""
	}
	if !live {
		return m.Addr + " (down)"
	}
	return m.Addr
}

// three starts proxies a, b, c, one second apart (a joined first).
func (b *bed) three(t *testing.T) (pa, pb, pc *proxy) {
	pa = b.proxy(t, b.rl, "10.0.0.1:6380")
	b.clock.Advance(time.Second)
	pb = b.proxy(t, b.redlock(t), "10.0.0.2:6380")
	b.clock.Advance(time.Second)
	pc = b.proxy(t, b.redlock(t), "10.0.0.3:6380")
	beat(t, pa, pb, pc)
	beat(t, pa, pb) // now every proxy has read the other two
	return pa, pb, pc
}

func TestMembersAndMaster(t *testing.T) {
	b := newBed(t)
	pa, pb, pc := b.three(t)
	want := "[10.0.0.1:6380 10.0.0.2:6380 10.0.0.3:6380]"
	for _, p := range []*proxy{pa, pb, pc} {
		ms := p.Members()
		if got := addrs(ms); fmtList(got) != want {
			t.Errorf("%s sees %v, want %s", p.Announce(), got, want)
		}
		if got := master(t, p); got != "10.0.0.1:6380" {
			t.Errorf("%s advertises %s, want the earliest joined, 10.0.0.1:6380", p.Announce(), got)
		}
		self := 0
		for _, m := range ms {
			if m.Self {
				self++
				if m.Addr != p.Announce() || m.ID != p.ID() {
					t.Errorf("%s: self entry %+v", p.Announce(), m)
				}
			}
		}
		if self != 1 {
			t.Errorf("%s: %d members marked self", p.Announce(), self)
		}
		if len(p.switched()) != 0 {
			t.Errorf("%s: switches %v without a change", p.Announce(), p.switched())
		}
	}
	// The entries live on the backends under the reserved key.
	if !redlock.Reserved(Key("redlock")) {
		t.Fatalf("%s is not reserved", Key("redlock"))
	}
	for i, mr := range b.mrs {
		if fs, err := mr.HKeys(Key("redlock")); err != nil || len(fs) != 3 {
			t.Errorf("backend %d holds %v (%v), want three entries", i, fs, err)
		}
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

// TestStoppedMemberDropsOut: a stops (killed: no leave). b and c keep it
// while its entries may live, drop it within TTL of its last heartbeat,
// advertise b, and report the switch once.
func TestStoppedMemberDropsOut(t *testing.T) {
	b := newBed(t)
	pa, pb, pc := b.three(t)
	beat(t, pa)
	for step := 1; step <= 5; step++ {
		b.clock.Advance(time.Second)
		beat(t, pb, pc)
		for _, p := range []*proxy{pb, pc} {
			got := master(t, p)
			switch {
			case step < 3 && got != "10.0.0.1:6380":
				t.Fatalf("%v after a's last heartbeat: %s advertises %s, want a until its entries expire (3s)", time.Duration(step)*time.Second, p.Announce(), got)
			case step >= 3 && got != "10.0.0.2:6380":
				t.Fatalf("%v after a's last heartbeat: %s advertises %s, want b", time.Duration(step)*time.Second, p.Announce(), got)
			}
		}
	}
	for _, p := range []*proxy{pb, pc} {
		if got := fmtList(addrs(p.Members())); got != "[10.0.0.2:6380 10.0.0.3:6380]" {
			t.Errorf("%s sees %s", p.Announce(), got)
		}
		if sw := p.switched(); len(sw) != 1 || sw[0] != [2]string{"10.0.0.1:6380", "10.0.0.2:6380"} {
			t.Errorf("%s reported switches %v, want one from a to b", p.Announce(), sw)
		}
	}
}

// TestLeaveRemovesEntry: a shuts down; the others drop it at their next
// round, not TTL later.
func TestLeaveRemovesEntry(t *testing.T) {
	b := newBed(t)
	pa, pb, pc := b.three(t)
	if err := pa.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := pa.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	for i, mr := range b.mrs {
		if v := mr.HGet(Key("redlock"), "10.0.0.1:6380"); v != "" {
			t.Errorf("backend %d still holds a's entry %q", i, v)
		}
	}
	beat(t, pb, pc)
	// The view keeps what a quorum was known to hold: a leaves the view
	// when that runs out, but a left entry is never renewed. Members
	// already exclude it once its known time is up; here it is not yet, so
	// the test moves the clock by less than TTL.
	b.clock.Advance(DefaultTTL - time.Second)
	beat(t, pb, pc)
	b.clock.Advance(time.Second)
	beat(t, pb, pc)
	if got := master(t, pb); got != "10.0.0.2:6380" {
		t.Fatalf("b advertises %s after a left", got)
	}
}

// TestMajorityLossKeepsMembers: three backends restart empty. A round
// that finds the entries on two does not drop them; the next heartbeats
// write them back.
func TestMajorityLossKeepsMembers(t *testing.T) {
	b := newBed(t)
	pa, pb, pc := b.three(t)
	beat(t, pa)
	for _, mr := range b.mrs[:3] {
		mr.FlushAll()
	}
	b.clock.Advance(time.Second)
	beat(t, pb) // sees a and c on two backends only, writes itself back
	if got := fmtList(addrs(pb.Members())); got != "[10.0.0.1:6380 10.0.0.2:6380 10.0.0.3:6380]" {
		t.Fatalf("after a majority lost the entries, b sees %s", got)
	}
	beat(t, pa, pc)
	b.clock.Advance(2 * time.Second)
	beat(t, pb)
	if got := fmtList(addrs(pb.Members())); got != "[10.0.0.1:6380 10.0.0.2:6380 10.0.0.3:6380]" {
		t.Fatalf("after the entries were written back, b sees %s", got)
	}
	if sw := pb.switched(); len(sw) != 0 {
		t.Fatalf("switches %v", sw)
	}
}

// TestMemberNeedsQuorum: a proxy that reaches two of five backends is not
// a live member, for the others or for itself.
func TestMemberNeedsQuorum(t *testing.T) {
	b := newBed(t)
	pa := b.proxy(t, b.rl, "10.0.0.1:6380")
	cut := b.proxy(t, b.redlock(t, 0, 1, 2), "10.0.0.9:6380")
	if err := cut.Beat(context.Background()); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("Beat reaching 2 of 5 = %v, want ErrNoQuorum", err)
	}
	beat(t, pa)
	if got := fmtList(addrs(pa.Members())); got != "[10.0.0.1:6380]" {
		t.Fatalf("a sees %s, want itself only", got)
	}
	if got := addrs(cut.Members()); len(got) != 0 {
		t.Fatalf("the cut-off proxy sees %v", got)
	}
}

// TestRejoinKeepsSuccessor: a loses the backends for longer than TTL;
// b takes over; when a comes back it joins as the newest member, so b
// stays advertised.
func TestRejoinKeepsSuccessor(t *testing.T) {
	b := newBed(t)
	pa, pb, pc := b.three(t)
	beat(t, pa)
	for range 4 { // a misses four rounds
		b.clock.Advance(time.Second)
		beat(t, pb, pc)
		_ = pa.Members()
	}
	if got := master(t, pb); got != "10.0.0.2:6380" {
		t.Fatalf("b advertises %s while a is gone", got)
	}
	b.clock.Advance(time.Second)
	beat(t, pa, pb, pc)
	for _, p := range []*proxy{pa, pb, pc} {
		if got := master(t, p); got != "10.0.0.2:6380" {
			t.Errorf("%s advertises %s after a came back, want b", p.Announce(), got)
		}
		if got := fmtList(addrs(p.Members())); got != "[10.0.0.2:6380 10.0.0.3:6380 10.0.0.1:6380]" {
			t.Errorf("%s sees %s, want a last", p.Announce(), got)
		}
	}
}

// TestOneMissedRoundKeepsMaster: a misses one heartbeat (a pause, a slow
// round): it stays advertised and keeps its joined stamp.
func TestOneMissedRoundKeepsMaster(t *testing.T) {
	b := newBed(t)
	pa, pb, pc := b.three(t)
	joined := pa.Members()[0].Joined
	b.clock.Advance(time.Second)
	beat(t, pb, pc)
	b.clock.Advance(time.Second)
	beat(t, pa, pb, pc)
	beat(t, pb, pc)
	for _, p := range []*proxy{pa, pb, pc} {
		ms := p.Members()
		if got := master(t, p); got != "10.0.0.1:6380" || !ms[0].Joined.Equal(joined) {
			t.Errorf("%s advertises %s joined %v after a missed one round, want a joined %v", p.Announce(), got, ms[0].Joined, joined)
		}
		if len(p.switched()) != 0 {
			t.Errorf("%s: switches %v", p.Announce(), p.switched())
		}
	}
}

// TestRestartedOnSameAddress: a proxy restarted on a's address (new id,
// new joined stamp) replaces a's entry; it is no longer the earliest.
func TestRestartedOnSameAddress(t *testing.T) {
	b := newBed(t)
	pa, pb, pc := b.three(t)
	beat(t, pa)
	b.clock.Advance(time.Second)
	pa2 := b.proxy(t, b.redlock(t), "10.0.0.1:6380")
	beat(t, pa2, pb, pc)
	for _, p := range []*proxy{pa2, pb, pc} {
		if got := fmtList(addrs(p.Members())); got != "[10.0.0.2:6380 10.0.0.3:6380 10.0.0.1:6380]" {
			t.Errorf("%s sees %s", p.Announce(), got)
		}
		if got := master(t, p); got != "10.0.0.2:6380" {
			t.Errorf("%s advertises %s, want b", p.Announce(), got)
		}
	}
	// The old instance's leave does not remove the new one's entry.
	if err := pa.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, mr := range b.mrs {
		if v := mr.HGet(Key("redlock"), "10.0.0.1:6380"); v == "" {
			t.Errorf("backend %d lost the restarted proxy's entry to the old one's leave", i)
		}
	}
}

// TestObserverAndServices: a proxy without announce reads the others and
// is no member; proxies of another service are not seen.
func TestObserverAndServices(t *testing.T) {
	b := newBed(t)
	pa := b.proxy(t, b.rl, "10.0.0.1:6380")
	obs := b.proxy(t, b.redlock(t), "")
	other := &proxy{Tier: New(b.redlock(t), Options{Service: "other", Announce: "10.0.0.7:6380", Now: b.clock.Now})}
	beat(t, pa, obs, other, pa)
	if got := fmtList(addrs(obs.Members())); got != "[10.0.0.1:6380]" {
		t.Errorf("the observer sees %s", got)
	}
	if got := fmtList(addrs(pa.Members())); got != "[10.0.0.1:6380]" {
		t.Errorf("a sees %s", got)
	}
	if got := fmtList(addrs(other.Members())); got != "[10.0.0.7:6380]" {
		t.Errorf("the other service sees %s", got)
	}
}

// TestFenceMarkShared: the heartbeat raises every backend's counter to the
// proxy's fence mark and the proxy's mark to the largest counter: a proxy
// that never issued a fence learns the others' before its first, and
// backends restarted empty get their counters back.
func TestFenceMarkShared(t *testing.T) {
	b := newBed(t)
	pa := b.proxy(t, b.rl, "10.0.0.1:6380")
	ctx := context.Background()
	var fence int64
	for i := range 10 {
		l, err := b.rl.AcquireFenced(ctx, "res", "t"+strconv.Itoa(i), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fence = l.Fence
		if err := b.rl.Release(ctx, "res", l.Token); err != nil {
			t.Fatal(err)
		}
	}
	rlB := b.redlock(t)
	pb := b.proxy(t, rlB, "10.0.0.2:6380")
	for _, mr := range b.mrs[:3] {
		mr.FlushAll() // a majority restarts empty
	}
	beat(t, pa) // writes a's mark back
	for i, mr := range b.mrs {
		v, _ := mr.Get(redlock.FenceKey)
		if n, _ := strconv.ParseInt(v, 10, 64); n < fence {
			t.Errorf("backend %d: counter %q after a's heartbeat, want at least %d", i, v, fence)
		}
	}
	if err := pb.Join(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rlB.FenceHighWater(); got < fence {
		t.Fatalf("b's mark is %d after joining, want at least a's last fence %d", got, fence)
	}
	// Even with no counter left anywhere, b's next fence is above a's.
	for _, mr := range b.mrs {
		mr.FlushAll()
	}
	l, err := rlB.AcquireFenced(ctx, "res", "b", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence <= fence {
		t.Fatalf("b's fence %d, a's last %d", l.Fence, fence)
	}
}

// TestStartShutdown: the loop beats on its own, and Shutdown stops it and
// leaves.
func TestStartShutdown(t *testing.T) {
	rl, mrs := redlocktest.New(t, 3, redlock.Options{})
	tr := New(rl, Options{Announce: "10.0.0.1:6380", Interval: 20 * time.Millisecond, TTL: 2 * time.Second, Logger: redlocktest.Logger(t)})
	tr.Start()
	tr.Start()
	testkit.Eventually(t, 10*time.Second, "the loop to make this proxy a member", func() bool { return len(tr.Members()) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i, mr := range mrs {
		if v := mr.HGet(Key("redlock"), "10.0.0.1:6380"); v != "" {
			t.Errorf("backend %d keeps the entry after Shutdown: %q", i, v)
		}
	}
}

// TestMasterKeptWhenNoneLive: with no live member (a quorum of backends
// unreachable for longer than TTL) the last advertised member is kept,
// reported as not live; before any member was seen there is none.
func TestMasterKeptWhenNoneLive(t *testing.T) {
	b := newBed(t)
	pa := b.proxy(t, b.rl, "10.0.0.1:6380")
	if _, _, ok := pa.Master(); ok {
		t.Fatal("a master before the first heartbeat")
	}
	beat(t, pa)
	b.clock.Advance(5 * time.Second)
	if len(pa.Members()) != 0 {
		t.Fatalf("members %v after 5s without a heartbeat", addrs(pa.Members()))
	}
	if got := master(t, pa); got != "10.0.0.1:6380 (down)" {
		t.Fatalf("master %q, want the last one, down", got)
	}
}
