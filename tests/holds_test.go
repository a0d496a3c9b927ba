package tests

import (
	"strings"
	"testing"
	"time"
)

// holdsHCL: a small default_ttl (the lease of a hold's copies) and
// max_ttl keep the runs short.
const holdsHCL = `default_ttl = "2s"
max_ttl = "4s"`

// TestHoldOutlivesItsProxy: a hold without expiry taken as redis-py's
// Lock(timeout=None) takes it (SET k v NX) through proxy A survives A's
// stop, by SIGTERM (a routine restart) and by kill -9: a second client
// polling SET k v2 NX through proxy B for three default_ttl never
// acquires, and the key still holds A's value. Shutdown logs how many
// holds it handed over; B logs whose it took over.
//
// Skipped until holds are recorded on the backends (docs/safety.md,
// "Holds"): today the hold lives in A's memory and B acquires about
// default_ttl after A stops.
func TestHoldOutlivesItsProxy(t *testing.T) {
	t.Skip("holds on the backends are designed (docs/safety.md, \"Holds\") but not implemented yet")
	t.Parallel()
	for _, stop := range []string{"sigterm", "kill"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			rs := startCluster(t, 3)
			a := startProxy(t, rs, holdsHCL)
			b := startProxy(t, rs, holdsHCL)
			ctx := testCtx(t, 60*time.Second)
			ca, cb := a.Client(nil), b.Client(nil)
			if ok, err := ca.SetNX(ctx, "held", "first", 0).Result(); err != nil || !ok {
				t.Fatalf("SET held first NX through A = %v, %v", ok, err)
			}
			if stop == "sigterm" {
				a.terminate()
				if !strings.Contains(a.Log(), "handed over holds") || !strings.Contains(a.Log(), "count=1") {
					t.Errorf("A's shutdown does not say it handed over one hold:\n%s", a.Log())
				}
			} else {
				a.kill()
			}
			stopped := time.Now()
			for time.Since(stopped) < 6*time.Second { // three default_ttl
				if ok, err := cb.SetNX(ctx, "held", "second", 0).Result(); err != nil || ok {
					t.Fatalf("SET held second NX through B, %v after A stopped = %v, %v: the hold died with its proxy",
						time.Since(stopped).Round(time.Millisecond), ok, err)
				}
				time.Sleep(100 * time.Millisecond) // pacing the polls
			}
			if v, err := cb.Get(ctx, "held").Result(); err != nil || v != "first" {
				t.Fatalf("GET held through B = %q, %v; want first", v, err)
			}
			if ttl, err := cb.TTL(ctx, "held").Result(); err != nil || ttl != -1 {
				t.Fatalf("TTL held through B = %v, %v; want -1 (a hold without expiry)", ttl, err)
			}
			if !strings.Contains(b.Log(), "took over holds") {
				t.Errorf("B does not log a take-over:\n%s", b.Log())
			}
		})
	}
}
