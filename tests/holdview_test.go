package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The client's view of keys through the tier: a key answers its expiry as
// one Redis would, through any proxy. Data is stored so on every backend;
// a key the tier holds beyond max_ttl (a lock, or what a script by vote
// left) carries at most max_ttl on each (docs/safety.md, "Locks and
// data").

// holdLease and holdsMax are holdsHCL's default_ttl and max_ttl.
const (
	holdLease = 2 * time.Second
	holdsMax  = 4 * time.Second
)

// sameAs runs args on one Redis (ref) and through the proxy (c) and
// fails unless the replies match.
func sameAs(ctx context.Context, t *testing.T, ref, c *redis.Client, args ...any) {
	t.Helper()
	want, werr := ref.Do(ctx, args...).Result()
	got, gerr := c.Do(ctx, args...).Result()
	if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
		t.Errorf("%v: proxy %v, %v; one Redis %v, %v", args, got, gerr, want, werr)
	}
}

// TestPersistHashAsOneRedis: PERSIST of a hash with an expiry answers 1
// and leaves it without expiry, as on one Redis (it was refused outside a
// script while PERSIST inside one was served); the key then lives past
// three leases, each backend's copy as on one Redis.
func TestPersistHashAsOneRedis(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	ref := startRedis(t).Client()
	p := startProxy(t, rs, holdsHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	for _, cmd := range [][]any{
		{"HSET", "h", "f", "v"},
		{"PEXPIRE", "h", "1500"},
		{"PERSIST", "h"},
		{"TTL", "h"},
		{"PERSIST", "h"},
		{"PERSIST", "absent"},
	} {
		sameAs(ctx, t, ref, c, cmd...)
	}
	time.Sleep(3 * holdLease)
	sameAs(ctx, t, ref, c, "HGET", "h", "f")
	sameAs(ctx, t, ref, c, "TTL", "h")
	backendsAsOneRedis(ctx, t, rs, ref, "h", holdsMax)
}

// TestPeerAnswersTheHoldsExpiry: locks held through proxy A (SET NX
// without expiry, SET NX EX 600), read and changed through proxy B of the
// tier, both at once (B's rounds have not seen the record yet) and
// after B's rounds did. B answered the copies' lease (TTL 2 where
// one Redis answers -1), and decided EXPIRE's options and SET KEEPTTL on
// it, so that a write through B ended a hold one Redis keeps. Every reply
// is compared with one redis-server given the same commands; after three
// leases the keys live (or are gone) as there, every lock's copy within
// max_ttl; the two that SET … KEEPTTL overwrote are data, stored as one
// Redis stores them (docs/safety.md, "Locks and data").
func TestPeerAnswersTheHoldsExpiry(t *testing.T) {
	t.Parallel()
	for _, wait := range []time.Duration{0, 2 * time.Second} {
		t.Run(fmt.Sprint("after-", wait), func(t *testing.T) {
			t.Parallel()
			rs := startCluster(t, 3)
			ref := startRedis(t).Client()
			a := startProxy(t, rs, holdsHCL)
			b := startProxy(t, rs, holdsHCL)
			ca, cb := a.Client(nil), b.Client(nil)
			ctx := testCtx(t, 90*time.Second)
			keys := []string{"forever", "long", "keepttl", "keepttl600", "xx", "gt", "nx", "lt", "persist", "persist600", "scriptxx", "scriptpersist"}
			for _, k := range keys {
				// Locks: data is stored as asked and never held.
				args := []any{"SET", k, "v", "NX"}
				if strings.HasSuffix(k, "600") || k == "long" || k == "lt" || k == "scriptpersist" {
					args = append(args, "EX", "600")
				}
				if err := ref.Do(ctx, args...).Err(); err != nil {
					t.Fatal(err)
				}
				if err := ca.Do(ctx, args...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(wait)
			for _, cmd := range [][]any{
				{"TTL", "forever"},
				{"PEXPIRETIME", "forever"},
				{"SET", "keepttl", "w", "KEEPTTL"},
				{"SET", "keepttl600", "w", "KEEPTTL"},
				{"TTL", "keepttl"},
				{"EXPIRE", "xx", "1", "XX"},
				{"EXPIRE", "gt", "10", "GT"},
				{"EXPIRE", "nx", "1", "NX"},
				{"EXPIRE", "lt", "100", "LT"},
				{"PERSIST", "persist"},
				{"PERSIST", "persist600"},
				{"TTL", "persist600"},
			} {
				sameAs(ctx, t, ref, cb, cmd...)
			}
			if wait > 0 { // B's round has seen the holds: so do its scripts
				sameAs(ctx, t, ref, cb, "EVAL", "return redis.call('EXPIRE', KEYS[1], 1, 'XX')", 1, "scriptxx")
				sameAs(ctx, t, ref, cb, "EVAL", "return {redis.call('PERSIST', KEYS[1]), redis.call('TTL', KEYS[1])}", 1, "scriptpersist")
			}
			for _, k := range []string{"long", "keepttl600", "lt"} {
				want, got := ref.TTL(ctx, k).Val(), cb.TTL(ctx, k).Val()
				if d := want - got; d < -time.Second || d > 2*time.Second {
					t.Errorf("TTL %s through B = %v; one Redis %v", k, got, want)
				}
			}
			time.Sleep(3 * holdLease)
			for _, k := range keys {
				sameAs(ctx, t, ref, cb, "EXISTS", k)
				sameAs(ctx, t, ref, ca, "GET", k)
				if k == "keepttl" || k == "keepttl600" {
					// SET … KEEPTTL of another value made it data: as asked.
					backendsAsOneRedis(ctx, t, rs, ref, k, holdsMax)
				} else {
					backendsBounded(ctx, t, rs, k, holdsMax) // a lock's copies: within max_ttl, held beyond
				}
			}
			for _, k := range []string{"forever", "keepttl", "xx", "gt", "persist", "persist600", "scriptxx", "scriptpersist"} {
				sameAs(ctx, t, ref, ca, "TTL", k)
				sameAs(ctx, t, ref, cb, "TTL", k)
			}
		})
	}
}

// TestScriptSeesTheHoldsExpiry: a script by vote on a held lock (SET NX
// without expiry, SET NX EX 600) sees the client's expiry, as on one Redis:
// TTL, PTTL, EXPIRETIME; EXPIRE/PEXPIRE/EXPIREAT with NX, XX, GT, LT and
// PERSIST decided on it (they were decided on the copies' lease: EXPIRE
// 1 XX answered 1 and the key was gone a second later). Replies compared
// with one redis-server; after three leases every key lives (or is gone)
// as there, each copy within max_ttl.
func TestScriptSeesTheHoldsExpiry(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	ref := startRedis(t).Client()
	p := startProxy(t, rs, holdsHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 90*time.Second)
	far := fmt.Sprint(time.Now().Add(time.Hour).Unix())
	cases := []struct {
		key   string
		ex    bool // SET NX with EX 600 (else without expiry)
		body  string
		argv  []any
		exact bool // the reply compares exactly (a ttl within a second else)
	}{
		{"ttl", false, "return redis.call('TTL', KEYS[1])", nil, true},
		{"pttl", false, "return redis.pcall('PTTL', KEYS[1])", nil, true},
		{"exptime", false, "return redis.call('PEXPIRETIME', KEYS[1])", nil, true},
		{"xx", false, "return redis.call('EXPIRE', KEYS[1], 1, 'XX')", nil, true},
		{"gt", false, "return redis.call('EXPIRE', KEYS[1], 10, 'gt')", nil, true},
		{"nx", false, "return redis.call('EXPIRE', KEYS[1], 1, 'NX')", nil, true},
		{"lt", false, "return redis.call('PEXPIRE', KEYS[1], 1000, 'LT')", nil, true},
		{"persist", false, "return redis.call('PERSIST', KEYS[1])", nil, true},
		{"keepttl", false, "redis.call('SET', KEYS[1], 'w', 'KEEPTTL') return redis.call('PTTL', KEYS[1])", nil, true},
		{"persistttl", false, "redis.call('PERSIST', KEYS[1]) return redis.call('TTL', KEYS[1])", nil, true},
		{"ttl600", true, "return redis.call('TTL', KEYS[1])", nil, false},
		{"lt600", true, "return redis.call('EXPIRE', KEYS[1], 5, 'LT')", nil, true},
		{"gt600", true, "return redis.call('EXPIRE', KEYS[1], 5, 'GT')", nil, true},
		{"nx600", true, "return redis.call('EXPIRE', KEYS[1], 5, 'NX')", nil, true},
		{"xxat600", true, "return redis.call('EXPIREAT', KEYS[1], ARGV[1], 'XX')", []any{far}, true},
		{"persist600", true, "local n = redis.call('PERSIST', KEYS[1]) return {n, redis.call('TTL', KEYS[1])}", nil, true},
		{"built", false, "redis.call('SET', KEYS[1] .. ':x', 'v') return {redis.call('TTL', KEYS[1]), redis.call('EXPIRE', KEYS[1], 1, 'XX')}", nil, true},
		{"expthen600", true, "redis.call('EXPIRE', KEYS[1], 3) return redis.call('TTL', KEYS[1])", nil, true},
		// Commands without a key, and a key's own commands with no more
		// arguments, pass through the shadow as written (Symfony's
		// RedisStore calls TIME: the shadow once added a nil argument).
		{"nokey", false, "local t = redis.call('TIME') local u = redis.pcall('TIME') return {#t, #u, redis.call('GET', KEYS[1])}", nil, true},
	}
	for _, tc := range cases {
		args := []any{"SET", tc.key, "v", "NX"} // a lock: data is not held
		if tc.ex {
			args = append(args, "EX", "600")
		}
		for _, cl := range []*redis.Client{ref, c} {
			if err := cl.Do(ctx, args...).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range cases {
		want, werr := ref.Eval(ctx, tc.body, []string{tc.key}, tc.argv...).Result()
		got, gerr := c.Eval(ctx, tc.body, []string{tc.key}, tc.argv...).Result()
		if tc.exact && fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
			t.Errorf("%s: %s: proxy %v, %v; one Redis %v, %v", tc.key, tc.body, got, gerr, want, werr)
		}
		if !tc.exact {
			w, _ := want.(int64)
			g, _ := got.(int64)
			if gerr != nil || g < w-1 || g > w+1 {
				t.Errorf("%s: %s: proxy %v, %v; one Redis %v", tc.key, tc.body, got, gerr, want)
			}
		}
	}
	time.Sleep(3 * holdLease)
	sameAs(ctx, t, ref, c, "TTL", "built:x")
	backendsAsOneRedis(ctx, t, rs, ref, "built:x", holdsMax)
	for _, tc := range cases {
		sameAs(ctx, t, ref, c, "GET", tc.key)
		backendsBounded(ctx, t, rs, tc.key, holdsMax)
		if !tc.ex {
			sameAs(ctx, t, ref, c, "TTL", tc.key)
		}
	}
}

// TestCopyOfAPeersHold: COPY through a proxy that does not hold its
// source, a lock held through a peer (SET NX without expiry, or for ten
// minutes), gives the copy the source's expiry as one Redis does, not the
// source's lease on the backends (before, the copy took the lease and was
// gone after it). The copy is data, stored on every backend as one Redis
// stores it (docs/safety.md, "Locks and data"); the source locks' copies
// stay within max_ttl.
func TestCopyOfAPeersHold(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	ref := startRedis(t).Client()
	a := startProxy(t, rs, holdsHCL)
	b := startProxy(t, rs, holdsHCL)
	ca, cb := a.Client(nil), b.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	for _, cl := range []*redis.Client{ref, ca} {
		// Locks: data is stored as asked and never held.
		if ok, err := cl.SetNX(ctx, "src", "v", 0).Result(); err != nil || !ok {
			t.Fatalf("SET src v NX = %v, %v", ok, err)
		}
		if ok, err := cl.SetNX(ctx, "src600", "v", 600*time.Second).Result(); err != nil || !ok {
			t.Fatalf("SET src600 v NX EX 600 = %v, %v", ok, err)
		}
	}
	for _, k := range []string{"src", "src600"} {
		sameAs(ctx, t, ref, cb, "COPY", k, k+":copy")
	}
	time.Sleep(3 * holdLease) // the copies' leases would have run out
	sameAs(ctx, t, ref, cb, "TTL", "src:copy")
	sameAs(ctx, t, ref, cb, "GET", "src:copy")
	if ttl, err := cb.TTL(ctx, "src600:copy").Result(); err != nil || ttl < 590*time.Second {
		t.Fatalf("TTL src600:copy through B = %v, %v; want about 600s", ttl, err)
	}
	for _, k := range []string{"src:copy", "src600:copy"} {
		backendsAsOneRedis(ctx, t, rs, ref, k, holdsMax) // a copy is data: as one Redis
	}
	for _, k := range []string{"src", "src600"} {
		backendsBounded(ctx, t, rs, k, holdsMax) // the locks: within max_ttl, held beyond
	}
}
