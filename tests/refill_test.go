package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestRefillAfterEmptyRestarts: data written through the proxy, then 3 of
// 5 backends killed with -9 and restarted empty one at a time, each back
// in the vote before the next, with no read in between: every key still
// reads back, and each restarted backend holds every key again with the
// expiry the client gave (docs/safety.md, "Locks and data": a backend
// that came back empty is refilled from the others while it sits out its
// quarantine). Without the refill the third restart leaves most keys on
// two backends of five: reads of them fail or answer nothing.
func TestRefillAfterEmptyRestarts(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "max_ttl = \"2s\"\ndefault_ttl = \"1s\"\nhealth_interval = \"200ms\"\n")
	ctx := testCtx(t, 3*time.Minute)
	c := p.Client(nil)
	const n = 250 // more than one page of the refill's SCAN
	for i := range n {
		if err := c.Set(ctx, fmt.Sprintf("s:%d", i), fmt.Sprintf("v%d", i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range [][]any{
		{"SET", "long", "x", "EX", "3600"},
		{"HSET", "h", "f", "1", "g", "2"},
		{"SADD", "set", "a", "b"},
		{"RPUSH", "l", "x", "y"},
		{"ZADD", "z", "1", "a"},
		{"SET", "gone", "soon"},
		{"DEL", "gone"},
	} {
		if err := c.Do(ctx, w...).Err(); err != nil {
			t.Fatalf("%v: %v", w, err)
		}
	}
	// The backend's state and run id, from one INFO line.
	backend := func(i int) (state, runID string) {
		line := infoField(t, c, "backends", fmt.Sprintf("backend%d", i))
		for _, f := range strings.Split(line, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "state":
				state = v
			case "run_id":
				runID = v
			}
		}
		return state, runID
	}
	for i := range 3 {
		_, before := backend(i)
		rs[i].Restart()
		testkit.Eventually(t, 90*time.Second, fmt.Sprintf("backend %d restarted empty back in the vote", i), func() bool {
			state, id := backend(i)
			return state == "up" && id != before
		})
	}
	for i := range n {
		k := fmt.Sprintf("s:%d", i)
		if v, err := c.Get(ctx, k).Result(); err != nil || v != fmt.Sprintf("v%d", i) {
			t.Fatalf("GET %s after three empty restarts = %q, %v", k, v, err)
		}
	}
	if v, err := c.HGetAll(ctx, "h").Result(); err != nil || v["f"] != "1" || v["g"] != "2" {
		t.Fatalf("HGETALL h = %v, %v", v, err)
	}
	members, err := c.SMembers(ctx, "set").Result()
	slices.Sort(members)
	if err != nil || !slices.Equal(members, []string{"a", "b"}) {
		t.Fatalf("SMEMBERS set = %v, %v", members, err)
	}
	if v, err := c.LRange(ctx, "l", 0, -1).Result(); err != nil || !slices.Equal(v, []string{"x", "y"}) {
		t.Fatalf("LRANGE l = %v, %v", v, err)
	}
	if v, err := c.ZScore(ctx, "z", "a").Result(); err != nil || v != 1 {
		t.Fatalf("ZSCORE z a = %v, %v", v, err)
	}
	if n, err := c.Exists(ctx, "gone").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS gone = %v, %v; a deleted key came back", n, err)
	}
	for i := range 3 {
		b := rs[i].Client()
		if got, err := b.DBSize(ctx).Result(); err != nil || got < n {
			t.Fatalf("backend %d holds %d keys after its refill, want at least %d", i, got, n)
		}
		if ttl, err := b.TTL(ctx, "long").Result(); err != nil || ttl < 3500*time.Second {
			t.Fatalf("backend %d: TTL long = %v, %v; want the client's hour", i, ttl, err)
		}
		if ttl, err := b.TTL(ctx, "s:0").Result(); err != nil || ttl != -1 {
			t.Fatalf("backend %d: TTL s:0 = %v, %v; want none", i, ttl, err)
		}
	}
}
