package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestEndedHoldDoesNotRenewTheNextLock: a key held through proxy A beyond
// max_ttl (SET k 1 NX EX 3600, a string kept while it holds "1"; HSET
// without expiry, a hash kept while it exists) is deleted or given an
// expiry through proxy B, at once, before any claim round of B saw the
// hold; another client then takes the key through B with a 1 s lock of
// the same value. A's renewal must not extend that lock: every copy the
// hold did not write is not its own. Each 1 s lock is gone within three
// leases (it lived as long as A's hour before).
func TestEndedHoldDoesNotRenewTheNextLock(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	a := startProxy(t, rs, holdsHCL)
	b := startProxy(t, rs, holdsHCL)
	ca, cb := a.Client(nil), b.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	str := func(ctx context.Context, k string) error { return ca.SetNX(ctx, k, "1", time.Hour).Err() }
	hash := func(ctx context.Context, k string) error { return ca.HSet(ctx, k, "f", "v").Err() }
	relock := func(p redis.Pipeliner, k string) *redis.BoolCmd { return p.SetNX(ctx, k, "1", time.Second) }
	cases := []struct {
		name string
		hold func(context.Context, string) error
		end  func(p redis.Pipeliner, k string) *redis.BoolCmd // what B's client sends; nil: nothing more
	}{
		{"string-del", str, func(p redis.Pipeliner, k string) *redis.BoolCmd { p.Del(ctx, k); return relock(p, k) }},
		{"string-unlink", str, func(p redis.Pipeliner, k string) *redis.BoolCmd { p.Unlink(ctx, k); return relock(p, k) }},
		{"string-getdel", str, func(p redis.Pipeliner, k string) *redis.BoolCmd { p.GetDel(ctx, k); return relock(p, k) }},
		{"string-set-px", str, func(p redis.Pipeliner, k string) *redis.BoolCmd { p.Set(ctx, k, "1", time.Second); return nil }},
		{"string-expire", str, func(p redis.Pipeliner, k string) *redis.BoolCmd { p.Expire(ctx, k, time.Second); return nil }},
		{"hash-del", hash, func(p redis.Pipeliner, k string) *redis.BoolCmd { p.Del(ctx, k); return relock(p, k) }},
		{"hash-unlink", hash, func(p redis.Pipeliner, k string) *redis.BoolCmd { p.Unlink(ctx, k); return relock(p, k) }},
		{"hash-expire", hash, func(p redis.Pipeliner, k string) *redis.BoolCmd { p.Expire(ctx, k, time.Second); return nil }},
	}
	var keys []string
	for _, tc := range cases {
		k := "ended:" + tc.name
		keys = append(keys, k)
		if err := tc.hold(ctx, k); err != nil {
			t.Fatalf("%s: the hold through A: %v", tc.name, err)
		}
		pipe := cb.Pipeline()
		lock := tc.end(pipe, k)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("%s through B: %v", tc.name, err)
		}
		if lock != nil && !lock.Val() {
			t.Fatalf("%s: SET %s 1 NX PX 1000 through B after the delete was refused", tc.name, k)
		}
	}
	start := time.Now()
	for _, k := range keys {
		testkit.Eventually(t, 3*2*time.Second, fmt.Sprintf("%s expires", k), func() bool {
			return cb.Exists(ctx, k).Val() == 0 && ca.Exists(ctx, k).Val() == 0
		})
	}
	t.Logf("FIGURES %d holds ended through another proxy: every 1 s key gone %v after", len(keys), time.Since(start).Round(100*time.Millisecond))
}

// TestStaleReleaseKeepsTheCurrentHolder: a client holds a key without
// expiry through proxy A (SETNX) and releases it; a second client takes
// it without expiry through A; the first client then repeats its release
// of its old token through proxy B, whose last claim round saw the first
// hold in the record: DELIFEQ, DELEX IFEQ, UNLOCK, a release script and
// an EXTEND. Each answers 0 (or nil) and none ends the second client's
// hold: three leases later the key still holds its token, and a third
// client's SETNX is refused. Before, B ended whatever hold the record
// named for the key, and the second holder's lease ran out.
func TestStaleReleaseKeepsTheCurrentHolder(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	a := startProxy(t, rs, holdsHCL)
	b := startProxy(t, rs, holdsHCL)
	ca, cb := a.Client(nil), b.Client(nil)
	ctx := testCtx(t, 90*time.Second)
	const release = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
	stale := map[string]func(k string) (any, error){
		"delifeq": func(k string) (any, error) { return cb.Do(ctx, "DELIFEQ", k, "t1").Result() },
		"delex":   func(k string) (any, error) { return cb.Do(ctx, "DELEX", k, "IFEQ", "t1").Result() },
		"unlock":  func(k string) (any, error) { return cb.Do(ctx, "UNLOCK", k, "t1").Result() },
		"script":  func(k string) (any, error) { return cb.Eval(ctx, release, []string{k}, "t1").Result() },
		"extend":  func(k string) (any, error) { return cb.Do(ctx, "EXTEND", k, "t1", "3000").Result() },
	}
	for name := range stale {
		k := "stale:" + name
		if n, err := ca.Do(ctx, "SETNX", k, "t1").Int(); err != nil || n != 1 {
			t.Fatalf("%s: SETNX t1 = %v, %v", name, n, err)
		}
	}
	time.Sleep(holdLease) // B's claim rounds see the first holds in the record
	for name, op := range stale {
		k := "stale:" + name
		if n, err := ca.Do(ctx, "DELIFEQ", k, "t1").Int(); err != nil || n != 1 {
			t.Fatalf("%s: the first holder's release = %v, %v", name, n, err)
		}
		if n, err := ca.Do(ctx, "SETNX", k, "t2").Int(); err != nil || n != 1 {
			t.Fatalf("%s: SETNX t2 = %v, %v", name, n, err)
		}
		got, err := op(k)
		if err != nil && err != redis.Nil {
			t.Fatalf("%s: the stale release = %v, %v", name, got, err)
		}
		if n, ok := got.(int64); ok && n != 0 {
			t.Fatalf("%s: the stale release answered %v, want 0", name, got)
		}
	}
	time.Sleep(3 * holdLease) // the second holds' leases would have run out
	for name := range stale {
		k := "stale:" + name
		for _, c := range []*redis.Client{ca, cb} {
			if v, err := c.Get(ctx, k).Result(); err != nil || v != "t2" {
				t.Fatalf("%s: GET three leases after the stale release = %q, %v; want t2", name, v, err)
			}
		}
		if n, err := cb.Do(ctx, "SETNX", k, "t3").Int(); err != nil || n != 0 {
			t.Fatalf("%s: a third client's SETNX = %v, %v; want 0 while t2 holds", name, n, err)
		}
	}
}

// TestHeldKeyChangedElsewhereKeepsItsValue: a lock without expiry taken
// through proxy A (SETNX) and then changed in place through proxy B
// (APPEND, INCR, SETRANGE, a script by vote), or through A itself (INCR), is
// the client's data now, as on one Redis: three leases later it still holds its new value, without
// expiry, through either proxy. Before, A's renewal found another value,
// stopped, and the key expired with its last lease.
func TestHeldKeyChangedElsewhereKeepsItsValue(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	a := startProxy(t, rs, holdsHCL)
	b := startProxy(t, rs, holdsHCL)
	ca, cb := a.Client(nil), b.Client(nil)
	ctx := testCtx(t, 90*time.Second)
	cases := []struct {
		key, token string
		change     []any
		want       string
	}{
		{"chg:append", "v", []any{"APPEND", "chg:append", "x"}, "vx"},
		{"chg:incr", "5", []any{"INCR", "chg:incr"}, "6"},
		{"chg:setrange", "abc", []any{"SETRANGE", "chg:setrange", "1", "X"}, "aXc"},
		{"chg:script", "v", []any{"EVAL", "return redis.call('APPEND', KEYS[1], 'y')", "1", "chg:script"}, "vy"},
		{"chg:incr-a", "7", []any{"INCR", "chg:incr-a"}, "8"}, // through A, which keeps it
	}
	for _, tc := range cases {
		if n, err := ca.Do(ctx, "SETNX", tc.key, tc.token).Int(); err != nil || n != 1 {
			t.Fatalf("SETNX %s = %v, %v", tc.key, n, err)
		}
	}
	for _, tc := range cases {
		c := cb
		if strings.HasSuffix(tc.key, "-a") {
			c = ca
		}
		if err := c.Do(ctx, tc.change...).Err(); err != nil {
			t.Fatalf("%v: %v", tc.change, err)
		}
	}
	time.Sleep(3 * holdLease) // the holds' leases would have run out
	for _, tc := range cases {
		for _, c := range []*redis.Client{ca, cb} {
			if v, err := c.Get(ctx, tc.key).Result(); err != nil || v != tc.want {
				t.Fatalf("GET %s three leases after the change = %q, %v; want %q", tc.key, v, err, tc.want)
			}
			if ttl, err := c.TTL(ctx, tc.key).Result(); err != nil || ttl != -1 {
				t.Fatalf("TTL %s = %v, %v; want -1", tc.key, ttl, err)
			}
		}
	}
}
