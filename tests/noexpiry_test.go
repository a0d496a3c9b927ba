package tests

import (
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestLockWithoutExpiry: a lock taken without expiry (SET NX, SETNX)
// stays held as on one Redis, beyond default_ttl, while the proxy renews
// its lease; TTL answers -1; it ends when released, and a proxy that stops
// lets it expire one default_ttl later.
func TestLockWithoutExpiry(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, `default_ttl = "2s"`)
	ctx := testCtx(t, 60*time.Second)
	c := p.Client(nil)

	if ok, err := c.SetNX(ctx, "ne", "holder", 0).Result(); err != nil || !ok {
		t.Fatalf("SET NX without expiry = %v, %v", ok, err)
	}
	if n, err := c.Do(ctx, "SETNX", "ne2", "holder").Int(); err != nil || n != 1 {
		t.Fatalf("SETNX = %v, %v", n, err)
	}
	// Three leases later both are still held, and read as keys without
	// expiry.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		for _, k := range []string{"ne", "ne2"} {
			if v, err := c.Get(ctx, k).Result(); err != nil || v != "holder" {
				t.Fatalf("GET %s while held = %q, %v", k, v, err)
			}
			if ttl, err := c.Do(ctx, "TTL", k).Int(); err != nil || ttl != -1 {
				t.Fatalf("TTL %s = %v, %v; want -1", k, ttl, err)
			}
		}
		if ok, err := c.SetNX(ctx, "ne", "other", 0).Result(); err != nil || ok {
			t.Fatalf("a second SET NX = %v, %v", ok, err)
		}
		time.Sleep(200 * time.Millisecond) // pacing the checks; no deadline rests on it
	}
	// Released: free at once.
	if n, err := c.Do(ctx, "DELIFEQ", "ne", "holder").Int(); err != nil || n != 1 {
		t.Fatalf("DELIFEQ = %v, %v", n, err)
	}
	if ok, err := c.SetNX(ctx, "ne", "next", 5*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET NX after the release = %v, %v", ok, err)
	}
	// The proxy stops: what it kept expires one default_ttl later.
	p.terminate()
	b := rs[0].Client()
	testkit.Eventually(t, 10*time.Second, "a key kept by a stopped proxy to expire", func() bool {
		n, err := b.Exists(ctx, "ne2").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}
