package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestHoldSurvivesMajorityRestart: a key held beyond max_ttl (here without
// expiry: SET NX) while a majority of backends is killed -9 and restarted
// empty. The quarantine cannot protect it (it never expires), so the
// renewal writes it back to the restarted backends before they vote
// again: a second client polling SET NX for the quarantine and three
// leases after it never acquires; once released, it does.
func TestHoldSurvivesMajorityRestart(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	const maxTTL, lease = 4 * time.Second, 2 * time.Second
	p := startProxy(t, rs, `max_ttl = "4s"
default_ttl = "2s"
health_interval = "200ms"
startup_quarantine = false`)
	ctx := testCtx(t, 90*time.Second)
	a, b := p.Client(nil), p.Client(nil)

	if ok, err := a.SetNX(ctx, "held", "A", 0).Result(); err != nil || !ok {
		t.Fatalf("SET held A NX = %v, %v", ok, err)
	}
	restarted := time.Now()
	restartAtOnce(t, rs[2:])
	until := restarted.Add(maxTTL + 3*lease)
	attempts := 0
	for time.Now().Before(until) {
		ok, err := b.SetNX(ctx, "held", "B", 0).Result()
		if err == nil && ok {
			t.Fatalf("a second client acquired a held key %v after a majority restarted empty (quarantine %v)",
				time.Since(restarted).Round(time.Millisecond), maxTTL)
		}
		attempts++
		time.Sleep(100 * time.Millisecond) // pacing; no assertion rests on it
	}
	if v, err := a.Get(ctx, "held").Result(); err != nil || v != "A" {
		t.Fatalf("GET held after the restart = %q, %v; want A", v, err)
	}
	if ttl, err := a.TTL(ctx, "held").Result(); err != nil || ttl != -1 {
		t.Fatalf("TTL held = %v, %v; want -1 (no expiry)", ttl, err)
	}
	for i, r := range rs {
		if ttl, err := r.Client().PTTL(ctx, "held").Result(); err != nil || ttl > maxTTL {
			t.Errorf("backend %d: PTTL %v, %v; every copy carries at most max_ttl", i, ttl, err)
		}
	}
	if n, err := a.Do(ctx, "DELIFEQ", "held", "A").Int(); err != nil || n != 1 {
		t.Fatalf("DELIFEQ held A = %v, %v", n, err)
	}
	if ok, err := b.SetNX(ctx, "held", "B", 3*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET NX after the release = %v, %v", ok, err)
	}
	t.Logf("FIGURES hold across a majority restart: %d attempts by a second client over %v, none granted", attempts, maxTTL+3*lease)
}

// TestHoldOwnerStopsDuringMajorityRestart: two faults at once. A hold
// without expiry taken through proxy A (SET NX), two of three backends
// killed -9 and restarted empty, and then A stops: killed -9 at once
// (before its renewal wrote anything back), killed -9 or stopped by
// SIGTERM 1.5 s later (after it did). While the majority is quarantined
// the record is read through the backends that have it, so
// proxy B takes the hold over and writes it back with its field: a
// second client polling SET NX through B for the quarantine and three
// leases after never acquires.
func TestHoldOwnerStopsDuringMajorityRestart(t *testing.T) {
	t.Parallel()
	const maxTTL, lease = 4 * time.Second, 2 * time.Second
	for _, tc := range []struct {
		name  string
		after time.Duration // from the restart to the owner's stop
		term  bool
	}{
		{"kill-at-once", 0, false},
		{"kill-after-1.5s", 1500 * time.Millisecond, false},
		{"sigterm-after-1.5s", 1500 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := startCluster(t, 3)
			hcl := holdsHCL + "\nhealth_interval = \"200ms\""
			a := startProxy(t, rs, hcl)
			b := startProxy(t, rs, hcl)
			ctx := testCtx(t, 90*time.Second)
			if ok, err := a.Client(nil).SetNX(ctx, "held", "A", 0).Result(); err != nil || !ok {
				t.Fatalf("SET held A NX through A = %v, %v", ok, err)
			}
			recordSeen(ctx, t, []*redis.Client{b.Client(nil)}, "held")
			restartAtOnce(t, rs[:2])
			time.Sleep(tc.after)
			if tc.term {
				a.terminate()
			} else {
				a.kill()
			}
			cb := b.Client(nil)
			start := time.Now()
			took := time.Duration(-1)
			for time.Since(start) < maxTTL+3*lease {
				if took < 0 && strings.Contains(b.Log(), tierRenewed) {
					took = time.Since(start).Round(10 * time.Millisecond)
				}
				// NOQUORUM while the majority is quarantined is a refusal.
				if ok, err := cb.SetNX(ctx, "held", "B", 0).Result(); err == nil && ok {
					t.Fatalf("B acquired held %v after A stopped", time.Since(start).Round(time.Millisecond))
				}
				time.Sleep(100 * time.Millisecond) // pacing the polls
			}
			heldWithoutExpiry(t, ctx, cb, "held", "A")
			t.Logf("FIGURES owner stopped (%s) during a majority restart: B took the hold over %v after, never acquired in %v",
				tc.name, took, maxTTL+3*lease)
		})
	}
}
