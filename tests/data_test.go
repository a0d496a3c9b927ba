package tests

import (
	"slices"
	"testing"
	"time"
)

// TestDataSurvivesTheProxies: data of every type written through the only
// proxy, with and without expiry, is stored on every backend with exactly
// the expiry the client gave, and survives that proxy stopped for longer
// than max_ttl + 3 × default_ttl (docs/safety.md, "Locks and data"):
// nobody renews data, so nothing of it depends on a proxy running.
// Before, every write without expiry was a lease the proxy renewed, and
// all of it was gone when the proxy came back.
func TestDataSurvivesTheProxies(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	const hcl = "max_ttl = \"2s\"\ndefault_ttl = \"500ms\"\n"
	p := startProxy(t, rs, hcl)
	ctx := testCtx(t, 90*time.Second)
	c := p.Client(nil)
	writes := [][]any{
		{"SET", "s", "alice"},
		{"SET", "se", "bob", "EX", "3600"},
		{"SET", "sp", "carol", "PX", "8000"}, // beyond max_ttl: data keeps it as given
		{"HSET", "h", "item", "3"},
		{"SADD", "set", "a", "b"},
		{"ZADD", "z", "1", "a"},
		{"RPUSH", "l", "x", "y"},
		{"INCR", "n"},
		{"APPEND", "ap", "xyz"},
		{"SET", "ex", "dave"},
		{"EXPIRE", "ex", "3600"},
		{"SET", "gs", "old"},
		{"GETSET", "gs", "new"},
		{"SET", "pe", "erin", "PX", "1500"},
		{"PERSIST", "pe"},
	}
	for _, w := range writes {
		if err := c.Do(ctx, w...).Err(); err != nil {
			t.Fatalf("%v: %v", w, err)
		}
	}
	// Every backend stores the expiry the client gave, none meaning none.
	wantTTL := map[string]time.Duration{
		"s": -1, "se": time.Hour, "sp": 8 * time.Second, "h": -1, "set": -1, "z": -1,
		"l": -1, "n": -1, "ap": -1, "ex": time.Hour, "gs": -1, "pe": -1,
	}
	for i, r := range rs {
		b := r.Client()
		for k, want := range wantTTL {
			got, err := b.PTTL(ctx, k).Result()
			switch {
			case err != nil:
				t.Fatalf("backend %d PTTL %s: %v", i, k, err)
			case want < 0 && got != -1: // go-redis: -1 for no expiry
				t.Fatalf("backend %d: %s has ttl %v, want none", i, k, got)
			case want > 0 && (got <= want-time.Minute || got > want):
				t.Fatalf("backend %d: %s has ttl %v, want about %v", i, k, got, want)
			}
		}
	}
	p.terminate()
	time.Sleep(2*time.Second + 3*500*time.Millisecond + time.Second) // the proxies' outage: no key may depend on them
	p2 := startProxy(t, rs, hcl)
	c2 := p2.Client(nil)
	for k, want := range map[string]string{"s": "alice", "se": "bob", "n": "1", "ap": "xyz", "ex": "dave", "gs": "new", "pe": "erin"} {
		if got, err := c2.Get(ctx, k).Result(); err != nil || got != want {
			t.Fatalf("GET %s after the outage = %q, %v; want %q", k, got, err, want)
		}
	}
	if got, err := c2.HGet(ctx, "h", "item").Result(); err != nil || got != "3" {
		t.Fatalf("HGET h item = %q, %v", got, err)
	}
	got, err := c2.SMembers(ctx, "set").Result()
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("SMEMBERS set = %q, %v", got, err)
	}
	if got, err := c2.ZScore(ctx, "z", "a").Result(); err != nil || got != 1 {
		t.Fatalf("ZSCORE z a = %v, %v", got, err)
	}
	if got, err := c2.LRange(ctx, "l", 0, -1).Result(); err != nil || !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("LRANGE l = %q, %v", got, err)
	}
	if got, err := c2.TTL(ctx, "s").Result(); err != nil || got != -1 {
		t.Fatalf("TTL s = %v, %v; want -1", got, err)
	}
}
