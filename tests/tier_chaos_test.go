package tests

// The mutual-exclusion checker across a tier of proxies: workers spread
// over three proxies lock the same resources with FENCE while one proxy is
// killed with -9 and started again and a majority of backends restarts
// empty, twice. No two holders may overlap, and fences must strictly
// increase per resource whichever proxy granted them: the fences cross
// proxies, and the proxy that restarted lost its in-memory high-water mark
// (docs/safety.md, "Fences across proxies").

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// tierChaosHCL: the start-up quarantine on, as a deployment runs: the
// proxy that restarts while three backends are younger than max_ttl must
// not trust them (it never saw them restart).
const tierChaosHCL = chaosTimingHCL + "startup_quarantine = true"

// TestTierChaos: nine workers, three on each of three proxies, lock four
// resources with FENCE through a proxy killed with -9 (and started again
// on its address while the restarted backends are still quarantined) and
// two majority restarts of the backends, each while a lock is held. After
// the first, the two backends that kept their fence counters stall past
// the end of the quarantine.
func TestTierChaos(t *testing.T) {
	t.Parallel()
	const (
		proxies = 3
		workers = 9
		maxTTL  = 2 * time.Second
	)
	rs := startCluster(t, 5)
	tier := startTier(t, rs, proxies, tierChaosHCL)
	ctx := testCtx(t, 3*time.Minute)

	// Fresh backends are quarantined for max_ttl at start: wait for each
	// proxy to grant.
	for _, tp := range tier {
		c := tp.proc().Client(nil)
		testkit.Eventually(t, 15*time.Second, "a grant through proxy "+tp.addr, func() bool {
			v, err := c.Do(ctx, "LOCK", "tier:probe:"+tp.addr, chaosTTL.Milliseconds(), "FENCE").Slice()
			return err == nil && len(v) == 3
		})
	}

	run := newChaosRun(t, ctx, "tier")
	run.startWorkers(workers, func(w int) chaosLocker {
		c := redis.NewClient(&redis.Options{
			Addr: tier[w%proxies].addr, PoolSize: 1, MaxRetries: -1,
			DialTimeout: 500 * time.Millisecond, ReadTimeout: 3 * time.Second, WriteTimeout: time.Second,
		})
		t.Cleanup(func() { _ = c.Close() })
		return proxyLocker{c: c, ttl: chaosTTL}
	})

	type restart struct{ kill, dead, up time.Time }
	var restarts []restart
	var proxyDown, proxyUp, stallAt time.Time

	// Cycle 1: hold a lock through proxy 1; kill proxy 1; restart three
	// backends empty; start proxy 1 again on its address.
	time.Sleep(1500 * time.Millisecond)
	holder1 := proxyLocker{c: tier[1].proc().Client(nil), ttl: chaosTTL}
	var rst restart
	held := run.holdAcross(holder1, func() {
		ev := chaosEvent{name: "kill -9 proxy 1", at: time.Now()}
		tier[1].kill()
		proxyDown = time.Now()
		ev.until = proxyDown
		run.events = append(run.events, ev)

		ev = chaosEvent{name: "kill -9 + empty restart of backends 1-3 (lock held through the dead proxy)", at: time.Now()}
		dead := restartAtOnce(t, rs[1:4])
		ev.until = time.Now()
		rst = restart{kill: ev.at, dead: dead, up: ev.until}
		run.events = append(run.events, ev)

		ev = chaosEvent{name: "proxy 1 started again (same address)", at: time.Now()}
		tier[1].restart()
		proxyUp = time.Now()
		ev.until = proxyUp
		run.events = append(run.events, ev)

		// The two backends that kept their counters stall until after the
		// quarantine: the first grants after it come from the three
		// emptied backends alone, so only what the proxies shared (their
		// fence marks, through the heartbeat) keeps fences increasing.
		stallAt = time.Now()
		rs[0].Stop()
		rs[4].Stop()
	})
	if !held {
		run.cancel()
		run.wg.Wait()
		t.Fatal("cycle 1: could not take a lock through proxy 1 within 5s to hold across the faults")
	}
	restarts = append(restarts, rst)
	time.Sleep(time.Until(rst.up.Add(maxTTL)))
	run.waitGrantAfter(rst.up.Add(maxTTL), chaosRecover)
	time.Sleep(time.Second)
	rs[0].Cont()
	rs[4].Cont()
	run.events = append(run.events, chaosEvent{name: "SIGSTOP backends 0 and 4 (the survivors)", at: stallAt, until: time.Now()})
	time.Sleep(time.Second)

	// Cycle 2: hold through proxy 2; restart another majority (backend 0
	// among them, which survived the first).
	holder2 := proxyLocker{c: tier[2].proc().Client(nil), ttl: chaosTTL}
	held = run.holdAcross(holder2, func() {
		ev := chaosEvent{name: "kill -9 + empty restart of backends 0-2 (lock held)", at: time.Now()}
		dead := restartAtOnce(t, rs[0:3])
		ev.until = time.Now()
		rst = restart{kill: ev.at, dead: dead, up: ev.until}
		run.events = append(run.events, ev)
	})
	if !held {
		run.cancel()
		run.wg.Wait()
		t.Fatal("cycle 2: could not take a lock through proxy 2 within 5s to hold across the restart")
	}
	restarts = append(restarts, rst)
	time.Sleep(time.Until(rst.up.Add(maxTTL)))
	run.waitGrantAfter(rst.up.Add(maxTTL), chaosRecover)
	time.Sleep(2 * time.Second)

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
	if rep.Outcomes["NOQUORUM"] == 0 {
		t.Error("no LOCK answered NOQUORUM, though a majority of backends was quarantined twice")
	}
	// Grants through every proxy, and through proxy 1 after its restart,
	// so that fences really crossed proxies and the restarted process.
	perProxy := make([]int, proxies)
	afterRestart := 0
	for _, g := range gs {
		if g.Worker < 0 || g.empty() {
			continue
		}
		p := g.Worker % proxies
		perProxy[p]++
		if p == 1 && g.Sent.After(proxyUp) {
			afterRestart++
		}
	}
	for p, n := range perProxy {
		if n < 10 {
			t.Errorf("proxy %d granted %d locks to its workers, want at least 10: the run did not spread over the tier", p, n)
		}
	}
	if afterRestart == 0 {
		t.Error("proxy 1 granted nothing after its restart")
	}
	for i, r := range restarts {
		quarantineEnd := r.kill.Add(maxTTL)
		resumed, early := false, 0
		for _, g := range gs {
			if g.Sent.After(r.dead) && g.Start.Before(quarantineEnd) {
				if early++; early <= 5 {
					t.Errorf("restart %d: granted during the quarantine: %s", i, describe(run.h.origin, g))
				}
			}
			if g.Start.After(r.up.Add(maxTTL)) && g.Start.Before(r.up.Add(maxTTL+chaosRecover)) {
				resumed = true
			}
		}
		if !resumed {
			t.Errorf("restart %d: no grant within %v after restart + max_ttl", i, chaosRecover)
		}
	}
	for i, tp := range tier {
		if strings.Contains(tp.proc().Log(), "panic") {
			t.Errorf("proxy %d's log mentions a panic", i)
		}
	}
	t.Logf("FIGURES tier: proxies=%d workers=%d grants=%d (per proxy %v, proxy 1 after restart %d) overlaps=%d fence-regressions=%d NOQUORUM=%d max-gap=%v",
		proxies, workers, rep.Grants+rep.Empty, perProxy, afterRestart, len(rep.Overlaps), len(rep.FenceRegressions), rep.Outcomes["NOQUORUM"], rep.MaxGap.Round(time.Millisecond))
}
