package tests

// Fault-injecting mutual-exclusion runs (Jepsen's lock workload): workers
// hammer a few resources while backends are SIGSTOPped, and a majority is
// killed with -9 and restarted empty while locks are held; the checker
// (checker_test.go) then looks for two holders at once and for fences that
// go backwards. The same workload runs through the proxy, which must stay
// safe, and through client-side Redlock (redsync over the same five
// backends), which must be caught overlapping — proof that the checker can
// fail and that restart quarantine closes a gap the library leaves open.
//
// REDLOCK_CHAOS_DURATION (a Go duration, default 12s) sets the length of the
// proxy run; longer runs repeat the fault cycle.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

const (
	chaosWorkers = 8
	chaosTTL     = 2 * time.Second        // the lock ttl of every run; = max_ttl of the proxy
	chaosHoldMax = 200 * time.Millisecond // workers hold uniform in [0, min(validity, this)]
	chaosStall   = 1500 * time.Millisecond
	// chaosRecover bounds how long after restart + max_ttl the proxy may
	// take to grant again (health loop, reconnects, a loaded -race box).
	chaosRecover = 3 * time.Second
)

var chaosKeys = []string{"chaos:a", "chaos:b", "chaos:c", "chaos:d"}

// chaosTimingHCL: a small max_ttl keeps the quarantine short, and a node
// timeout of 100 ms makes a SIGSTOPped backend cost each attempt 100 ms
// rather than 1 s. Small times are the subject here: a call that a loaded
// machine makes miss its deadline only turns an attempt into NOQUORUM,
// which the runs count and never assert against.
const chaosTimingHCL = `max_ttl = "2s"
default_ttl = "1s"
health_interval = "200ms"
node_timeout = "100ms"
`

// chaosProxyHCL: without startup_quarantine the run starts at once on
// freshly started backends.
const chaosProxyHCL = chaosTimingHCL + "startup_quarantine = false"

// chaosDuration is the proxy run's length: REDLOCK_CHAOS_DURATION or 12s.
func chaosDuration(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("REDLOCK_CHAOS_DURATION")
	if s == "" {
		return 12 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("REDLOCK_CHAOS_DURATION=%q: want a positive Go duration such as 2m", s)
	}
	return d
}

// ---------------------------------------------------------------------------
// lock clients under test

// chaosLocker is one client's way to take and give back a lock.
type chaosLocker interface {
	// acquire tries once (as the client defines "once") and returns the
	// grant, with Resource, Token, Sent, Start, End and the fence filled in,
	// and the outcome: "granted", "held", "NOQUORUM", or another error kind.
	acquire(ctx context.Context, key string) (grant, string)
	// release gives the lock back and returns the outcome, "unlock:…".
	release(ctx context.Context, g grant) string
}

// proxyLocker takes locks with the proxy's native LOCK … FENCE.
type proxyLocker struct {
	c   *redis.Client
	ttl time.Duration
}

// acquire: LOCK key ttl FENCE → [token, validity-ms, fence].
func (l proxyLocker) acquire(ctx context.Context, key string) (grant, string) {
	t0 := time.Now()
	v, err := l.c.Do(ctx, "LOCK", key, l.ttl.Milliseconds(), "FENCE").Slice()
	t1 := time.Now()
	if err != nil {
		return grant{}, replyKind(err)
	}
	if len(v) != 3 {
		return grant{}, "bad-reply"
	}
	tok, ok1 := v[0].(string)
	validity, ok2 := v[1].(int64)
	if !ok1 || tok == "" || !ok2 || validity <= 0 {
		return grant{}, "bad-reply"
	}
	fence, hasFence := v[2].(int64)
	return grant{
		Resource: key, Token: tok, Fence: fence, HasFence: hasFence,
		Sent: t0, Start: t1, End: t0.Add(time.Duration(validity) * time.Millisecond),
	}, "granted"
}

func (l proxyLocker) release(ctx context.Context, g grant) string {
	n, err := l.c.Do(ctx, "UNLOCK", g.Resource, g.Token).Int64()
	if err != nil {
		return "unlock:" + replyKind(err)
	}
	return fmt.Sprintf("unlock:%d", n)
}

// redsyncLocker is client-side Redlock: redsync v4 over the backends
// themselves, retrying fast as an impatient application would. It has no
// fencing tokens.
type redsyncLocker struct {
	rs  *redsync.Redsync
	ttl time.Duration
}

func (l redsyncLocker) acquire(ctx context.Context, key string) (grant, string) {
	m := l.rs.NewMutex(key, redsync.WithExpiry(l.ttl), redsync.WithTries(1000), redsync.WithRetryDelay(10*time.Millisecond))
	t0 := time.Now()
	err := m.LockContext(ctx)
	t1 := time.Now()
	var taken *redsync.ErrTaken
	switch {
	case errors.As(err, &taken):
		return grant{}, "held"
	case errors.Is(err, redsync.ErrFailed):
		return grant{}, "gave-up"
	case err != nil:
		return grant{}, "error"
	}
	// Until is the start of the winning try + expiry − drift, on the
	// monotonic clock: exactly what redsync tells its caller it may use.
	return grant{Resource: key, Token: m.Value(), Sent: t0, Start: t1, End: m.Until()}, "granted"
}

func (l redsyncLocker) release(ctx context.Context, g grant) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m := l.rs.NewMutex(g.Resource, redsync.WithValue(g.Token), redsync.WithExpiry(l.ttl))
	ok, err := m.UnlockContext(ctx)
	switch {
	case err != nil && !ok:
		return "unlock:error"
	case ok:
		return "unlock:1"
	default:
		return "unlock:0"
	}
}

// replyKind names an error reply by its code ("NOQUORUM", "ERR"), a null
// reply "held", and transport failures by what happened.
func replyKind(err error) string {
	var rerr redis.Error
	var nerr net.Error
	switch {
	case errors.Is(err, redis.Nil):
		return "held"
	case errors.As(err, &rerr):
		code, _, _ := strings.Cut(rerr.Error(), " ")
		return code
	case errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	default:
		return "io-error"
	}
}

// ---------------------------------------------------------------------------
// the run

// chaosEvent is one injected fault on the run's time line.
type chaosEvent struct {
	name      string
	at, until time.Time
}

// chaosRun is one workload: workers, their shared history, the fault log.
type chaosRun struct {
	t       *testing.T
	name    string
	h       *history
	ctx     context.Context // for releases: outlives the run
	stop    context.Context // cancelled when the workers should finish
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	events  []chaosEvent
	workers int
}

func newChaosRun(t *testing.T, ctx context.Context, name string) *chaosRun {
	stop, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	return &chaosRun{t: t, name: name, h: newHistory(), ctx: ctx, stop: stop, cancel: cancel}
}

// startWorkers starts n workers, worker w using locker(w).
func (r *chaosRun) startWorkers(n int, locker func(w int) chaosLocker) {
	r.workers += n
	for w := 0; w < n; w++ {
		l := locker(w)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.work(w, l)
		}()
	}
}

// work: pick a resource, try to lock it, hold it a random time within the
// validity, release; after a refusal retry after 2–10 ms.
func (r *chaosRun) work(w int, l chaosLocker) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	for r.stop.Err() == nil {
		key := chaosKeys[rng.IntN(len(chaosKeys))]
		g, kind := l.acquire(r.stop, key)
		r.h.count(kind)
		if kind != "granted" {
			time.Sleep(2*time.Millisecond + time.Duration(rng.Int64N(int64(8*time.Millisecond))))
			continue
		}
		g.Worker = w
		hold := min(time.Until(g.End), chaosHoldMax)
		if hold > 0 {
			hold = time.Duration(rng.Int64N(int64(hold) + 1))
		}
		r.holdFor(l, g, hold)
	}
}

// holdFor records g, sleeps d, then closes the window and releases.
func (r *chaosRun) holdFor(l chaosLocker, g grant, d time.Duration) {
	i := r.h.add(g)
	time.Sleep(d)
	r.h.release(i, time.Now())
	r.h.count(l.release(r.ctx, g))
}

// holdAcross takes a lock as worker -1 (trying the resources in turn, for
// up to 5s), runs fault while holding it, keeps holding for most of its
// validity, then releases. It reports whether it got the lock.
func (r *chaosRun) holdAcross(l chaosLocker, fault func()) bool {
	return r.holdThrough(l, fault, func(g grant) time.Duration { return time.Until(g.End.Add(-100 * time.Millisecond)) })
}

// holdThrough takes a lock as worker -1 (trying the resources in turn for
// up to 5s), runs fault while holding it, keeps it for keep(grant) more,
// then releases it. It reports whether it got the lock.
func (r *chaosRun) holdThrough(l chaosLocker, fault func(), keep func(grant) time.Duration) bool {
	ctx, cancel := context.WithTimeout(r.stop, 5*time.Second)
	defer cancel()
	for i := 0; ctx.Err() == nil; i++ {
		g, kind := l.acquire(ctx, chaosKeys[i%len(chaosKeys)])
		r.h.count(kind)
		if kind != "granted" {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		g.Worker = -1
		idx := r.h.add(g)
		fault()
		time.Sleep(keep(g))
		r.h.release(idx, time.Now())
		r.h.count(l.release(r.ctx, g))
		return true
	}
	return false
}

// waitGrantAfter waits up to limit for a grant that arrived after after.
func (r *chaosRun) waitGrantAfter(after time.Time, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		r.h.mu.Lock()
		n := len(r.h.grants)
		last := n > 0 && r.h.grants[n-1].Start.After(after)
		r.h.mu.Unlock()
		if last {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fault records a fault that runs for d: begin, sleep d, end.
func (r *chaosRun) fault(name string, d time.Duration, begin, end func()) {
	ev := chaosEvent{name: name, at: time.Now()}
	begin()
	defer func() {
		end()
		ev.until = time.Now()
		r.events = append(r.events, ev)
	}()
	time.Sleep(d)
}

// finish stops the workers, waits for their last holds and checks the
// history; fences says whether grants carry fencing tokens.
func (r *chaosRun) finish(fences bool) (checkReport, []grant) {
	r.t.Helper()
	end := time.Now()
	r.cancel()
	r.wg.Wait()
	gs, outcomes := r.h.snapshot()
	rep := check(gs, outcomes, r.h.origin, end, fences)
	r.t.Logf("%s run of %v, %d workers on %d resources, ttl %v:", r.name, end.Sub(r.h.origin).Round(time.Millisecond), r.workers, len(chaosKeys), chaosTTL)
	for _, ev := range r.events {
		r.t.Logf("  fault %s: %s → %s", ev.name, offset(r.h.origin, ev.at), offset(r.h.origin, ev.until))
	}
	r.t.Logf("  %s", rep.summary(r.h.origin))
	return rep, gs
}

// restartAtOnce kills rs with -9 and starts them again, empty, on the same
// ports, all at once; it returns when every one answers PING.
// It returns when the last of them was dead: the kills run one after
// another, and a lock sent meanwhile may still win with the votes of the
// ones not yet killed.
func restartAtOnce(t *testing.T, rs []*redisProc) (allDead time.Time) {
	t.Helper()
	for _, r := range rs {
		r.Kill()
	}
	allDead = time.Now()
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.releasePort()
			// A client dialling the port in the instant it is free can
			// take it (a self-connect, or any ephemeral port): retry.
			for attempt := 0; attempt < 100; attempt++ {
				if errs[i] = r.start(); errs[i] == nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("restart redis-server %s: %v", rs[i].Addr(), err)
		}
	}
	return allDead
}

// dialNoSelf dials with a 200ms timeout and refuses a TCP self-connect:
// a client that keeps dialling a loopback port in the ephemeral range while
// its server is down can be given that very port as its own and connect to
// itself, and then holds the port the restarted server needs.
func dialNoSelf(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if c.LocalAddr().String() == c.RemoteAddr().String() {
		_ = c.Close()
		return nil, fmt.Errorf("dial %s: connected to itself: nothing listens there", addr)
	}
	return c, nil
}

// ---------------------------------------------------------------------------
// the tests

// TestChaosProxy: eight workers lock four resources through the proxy over
// five real backends while one backend stalls, a majority is killed and
// restarted empty while locks are held, and two backends stall. No two
// holders may overlap, fences must strictly increase per resource, the
// restarted majority must not vote until its quarantine (max_ttl) is over,
// and locks must be granted again after it.
func TestChaosProxy(t *testing.T) {
	t.Parallel()
	d := chaosDuration(t)
	rs := startCluster(t, 5)
	p := startProxy(t, rs, chaosProxyHCL)
	ctx := testCtx(t, d+2*time.Minute)
	const maxTTL = 2 * time.Second

	probe := p.Client(nil)
	v, err := probe.Do(ctx, "LOCK", "chaos:probe", chaosTTL.Milliseconds(), "FENCE").Slice()
	if err != nil || len(v) != 3 {
		t.Fatalf("LOCK chaos:probe %d FENCE = %#v, %v; want [token, validity, fence]", chaosTTL.Milliseconds(), v, err)
	}
	if _, ok := v[2].(int64); !ok {
		t.Fatalf("LOCK chaos:probe %d FENCE: fence = %#v, want an integer", chaosTTL.Milliseconds(), v[2])
	}

	run := newChaosRun(t, ctx, "proxy")
	run.startWorkers(chaosWorkers, func(int) chaosLocker {
		return proxyLocker{c: p.Client(&redis.Options{PoolSize: 1}), ttl: chaosTTL}
	})
	holder := proxyLocker{c: p.Client(nil), ttl: chaosTTL}

	type restart struct{ kill, dead, up time.Time }
	var restarts []restart
	end := run.h.origin.Add(d)
	const cycle = 10 * time.Second // the faults below, end to end
	for n := 0; n == 0 || time.Until(end) > cycle; n++ {
		time.Sleep(1500 * time.Millisecond)
		run.fault("SIGSTOP 1 backend", chaosStall, rs[0].Stop, rs[0].Cont)
		time.Sleep(500 * time.Millisecond)

		var rst restart
		held := run.holdAcross(holder, func() {
			ev := chaosEvent{name: "kill -9 + empty restart of 3 of 5 backends (lock held)", at: time.Now()}
			dead := restartAtOnce(t, rs[1:4])
			ev.until = time.Now()
			rst = restart{kill: ev.at, dead: dead, up: ev.until}
			run.events = append(run.events, ev)
		})
		if !held {
			run.cancel()
			run.wg.Wait()
			t.Fatalf("cycle %d: could not take a lock through the proxy within 5s to hold across the restart", n)
		}
		restarts = append(restarts, rst)
		// The next fault waits for the quarantine to end and locks to come back.
		time.Sleep(time.Until(rst.up.Add(maxTTL)))
		run.waitGrantAfter(rst.up.Add(maxTTL), chaosRecover)
		time.Sleep(300 * time.Millisecond)

		run.fault("SIGSTOP 2 backends", chaosStall,
			func() { rs[3].Stop(); rs[4].Stop() },
			func() { rs[3].Cont(); rs[4].Cont() })
		time.Sleep(time.Second)
	}
	time.Sleep(time.Until(end))
	rep, gs := run.finish(true)

	for _, line := range rep.details(run.h.origin, 50) {
		t.Error(line)
	}
	if rep.MissingFences > 0 {
		t.Errorf("%d grants carried no integer fence", rep.MissingFences)
	}
	if n := rep.Outcomes["bad-reply"]; n > 0 {
		t.Errorf("%d LOCK replies were not [token, validity, fence]", n)
	}
	// Enough grants for the overlap check to mean something; not a
	// throughput figure (a quiet machine makes 330–380, a loaded one 290).
	minGrants := int(100 * d.Seconds() / 12)
	if got := rep.Grants + rep.Empty; got < minGrants {
		t.Errorf("%d grants in %v, want at least %d", got, d, minGrants)
	}
	if rep.Outcomes["NOQUORUM"] == 0 {
		t.Errorf("no LOCK answered NOQUORUM, though a majority of backends was down or quarantined for about %v", maxTTL)
	}
	for i, r := range restarts {
		// Every backend restarted after r.kill and may not vote for max_ttl
		// after the proxy noticed; two survivors are no quorum. A lock sent
		// before the last of the three died may still win with the votes
		// of those not yet killed (the overlap check covers it either way).
		quarantineEnd := r.kill.Add(maxTTL)
		resumed, early := false, 0
		for _, g := range gs {
			if g.Sent.After(r.dead) && g.Start.Before(quarantineEnd) {
				if early++; early <= 5 {
					t.Errorf("restart %d: granted during the quarantine (majority killed at %s, no vote before %s): %s",
						i, offset(run.h.origin, r.kill), offset(run.h.origin, quarantineEnd), describe(run.h.origin, g))
				}
			}
			if g.Start.After(r.up.Add(maxTTL)) && g.Start.Before(r.up.Add(maxTTL+chaosRecover)) {
				resumed = true
			}
		}
		if early > 5 {
			t.Errorf("restart %d: %d grants in all during the quarantine", i, early)
		}
		if !resumed {
			t.Errorf("restart %d: no grant within %v after restart + max_ttl (%s): locks did not come back after the quarantine",
				i, chaosRecover, offset(run.h.origin, r.up.Add(maxTTL)))
		}
	}
	if strings.Contains(p.Log(), "panic") {
		t.Errorf("the proxy log mentions a panic")
	}
	t.Logf("FIGURES proxy: duration=%v grants=%d overlaps=%d fence-regressions=%d NOQUORUM=%d max-gap=%v",
		d, rep.Grants+rep.Empty, len(rep.Overlaps), len(rep.FenceRegressions), rep.Outcomes["NOQUORUM"], rep.MaxGap.Round(time.Millisecond))
}

// TestChaosRedsync: the same workload and checker against client-side
// Redlock — redsync v4 with one pool per backend — and the same majority
// kill -9 and empty restart while a lock is held. Redsync has no restart
// quarantine, so the three empty backends let a second client in while the
// first still holds: the checker must see it.
func TestChaosRedsync(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	ctx := testCtx(t, 2*time.Minute)
	pools := make([]rsredis.Pool, len(rs))
	for i, r := range rs {
		c := redis.NewClient(&redis.Options{
			Addr:                  r.Addr(),
			Dialer:                dialNoSelf,
			MaxRetries:            -1,
			ReadTimeout:           500 * time.Millisecond,
			WriteTimeout:          500 * time.Millisecond,
			ContextTimeoutEnabled: true,
			PoolSize:              2 * chaosWorkers,
			DisableIdentity:       true,
		})
		t.Cleanup(func() { _ = c.Close() })
		pools[i] = goredis.NewPool(c)
	}
	locker := redsyncLocker{rs: redsync.New(pools...), ttl: chaosTTL}

	run := newChaosRun(t, ctx, "redsync")
	run.startWorkers(chaosWorkers, func(int) chaosLocker { return locker })
	time.Sleep(time.Second)
	const attempts = 3
	overlapped := 0
	for a := 1; a <= attempts && overlapped == 0; a++ {
		held := run.holdAcross(locker, func() {
			ev := chaosEvent{name: fmt.Sprintf("kill -9 + empty restart of 3 of 5 backends (lock held), attempt %d", a), at: time.Now()}
			restartAtOnce(t, rs[:3])
			ev.until = time.Now()
			run.events = append(run.events, ev)
		})
		if !held {
			run.cancel()
			run.wg.Wait()
			t.Fatalf("attempt %d: redsync could not take a lock within 5s to hold across the restart", a)
		}
		time.Sleep(300 * time.Millisecond)
		gs, _ := run.h.snapshot()
		overlapped = len(check(gs, nil, run.h.origin, time.Now(), false).Overlaps)
	}
	rep, _ := run.finish(false)
	for _, line := range rep.details(run.h.origin, 5) {
		t.Logf("  %s", line)
	}
	if len(rep.Overlaps) == 0 {
		t.Errorf("no overlap seen in client-side Redlock after %d majority restarts while a lock was held: the checker or the fault injection is not doing its job", attempts)
	}
	t.Logf("FIGURES redsync: grants=%d overlaps=%d fence-regressions=n/a NOQUORUM=n/a (redsync: held=%d gave-up=%d) max-gap=%v",
		rep.Grants+rep.Empty, len(rep.Overlaps), rep.Outcomes["held"], rep.Outcomes["gave-up"], rep.MaxGap.Round(time.Millisecond))
}
