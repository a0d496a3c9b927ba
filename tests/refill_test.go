package tests

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// TestRefillInOtherOrders: data of every type, without expiry and with
// one beyond max_ttl, survives backends restarted empty in other orders
// than one each in turn: the same backend twice, then each of the others
// (3 backends: every one of them restarted, one of them twice, each back
// in the vote before the next). Every key still reads back through the
// proxy and holds its value and expiry on every backend; keys deleted
// before the restarts (a string, a hash, a set emptied by SREM, a list
// popped empty) and while the first restarted backend was refilling stay
// deleted on every backend, and keys changed while it refilled hold their
// new value there too.
func TestRefillInOtherOrders(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "max_ttl = \"2s\"\ndefault_ttl = \"1s\"\nhealth_interval = \"200ms\"\n")
	ctx := testCtx(t, 3*time.Minute)
	c := p.Client(nil)
	for _, w := range [][]any{
		{"SET", "s", "v"},
		{"SET", "se", "v", "EX", "3600"},
		{"SETEX", "sx", "3600", "v"},
		{"INCR", "n"},
		{"PFADD", "hll", "a", "b"},
		{"HSET", "h", "f", "1"},
		{"HSET", "he", "f", "1"},
		{"EXPIRE", "he", "3600"},
		{"SADD", "set", "a", "b"},
		{"SADD", "sete", "a"},
		{"PEXPIRE", "sete", "3600000"},
		{"RPUSH", "l", "x", "y"},
		{"ZADD", "z", "1", "a"},
		{"ZADD", "ze", "1", "a"},
		{"EXPIREAT", "ze", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
		{"SET", "gone", "v"},
		{"DEL", "gone"},
		{"HSET", "hgone", "f", "1"},
		{"DEL", "hgone"},
		{"SADD", "sgone", "a"},
		{"SREM", "sgone", "a"},
		{"RPUSH", "lgone", "x"},
		{"RPOP", "lgone"},
		{"SET", "late", "v"},
		{"HSET", "hlate", "f", "1"},
	} {
		if err := c.Do(ctx, w...).Err(); err != nil {
			t.Fatalf("%v: %v", w, err)
		}
	}
	want := map[string]time.Duration{"s": -1, "se": time.Hour, "sx": time.Hour, "n": -1, "hll": -1, "h": -1, "he": time.Hour,
		"set": -1, "sete": time.Hour, "l": -1, "z": -1, "ze": time.Hour}
	gone := []string{"gone", "hgone", "sgone", "lgone", "late", "hlate"}
	bs := make([]*redis.Client, len(rs))
	for i, r := range rs {
		bs[i] = r.Client()
	}
	contents := map[string]string{}
	for k := range want {
		contents[k] = backendContents(ctx, t, bs[0], k)
	}
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
	for n, i := range []int{0, 0, 1, 2} {
		_, before := backend(i)
		rs[i].Restart()
		if n == 0 {
			// Deleted while the backend refills: the refill must not copy
			// them back from a page it read before.
			testkit.Eventually(t, 30*time.Second, "backend 0 seen restarted", func() bool {
				_, id := backend(i)
				return id != before && id != ""
			})
			if err := c.Del(ctx, "late", "hlate").Err(); err != nil {
				t.Fatalf("DEL late hlate during the refill: %v", err)
			}
			for _, w := range [][]any{{"HSET", "h", "f", "2"}, {"SADD", "set", "c"}, {"SET", "s", "v2"}} {
				if err := c.Do(ctx, w...).Err(); err != nil {
					t.Fatalf("%v during the refill: %v", w, err)
				}
			}
			for _, k := range []string{"h", "set", "s"} {
				contents[k] = backendContents(ctx, t, bs[1], k)
			}
		}
		testkit.Eventually(t, 90*time.Second, fmt.Sprintf("backend %d restarted empty back in the vote (restart %d)", i, n+1), func() bool {
			state, id := backend(i)
			return state == "up" && id != before
		})
	}
	for i, b := range bs {
		for k, ttl := range want {
			if v := backendContents(ctx, t, b, k); v != contents[k] {
				t.Errorf("backend %d: %s holds %s after the restarts, %s before", i, k, v, contents[k])
			}
			got, err := b.PTTL(ctx, k).Result()
			switch {
			case err != nil:
				t.Fatalf("backend %d PTTL %s: %v", i, k, err)
			case ttl < 0 && got != -1:
				t.Errorf("backend %d: %s has ttl %v, want none", i, k, got)
			case ttl > 0 && (got <= ttl-time.Minute || got > ttl):
				t.Errorf("backend %d: %s has ttl %v, want about %v", i, k, got, ttl)
			}
		}
		for _, k := range gone {
			if n, err := b.Exists(ctx, k).Result(); err != nil || n != 0 {
				t.Errorf("backend %d: %s, deleted, is back (EXISTS %v, %v)", i, k, n, err)
			}
		}
	}
	if v, err := c.Get(ctx, "s").Result(); err != nil || v != "v2" {
		t.Errorf("GET s after the restarts = %q, %v", v, err)
	}
	if v, err := c.HGet(ctx, "he", "f").Result(); err != nil || v != "1" {
		t.Errorf("HGET he f after the restarts = %q, %v", v, err)
	}
	if n, err := c.Exists(ctx, gone...).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS of the deleted keys through the proxy = %v, %v", n, err)
	}
}
