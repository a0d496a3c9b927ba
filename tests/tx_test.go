package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTransactionsAsOneRedis: go-redis's transactions (MULTI … EXEC)
// that write answer through a proxy over three backends what one
// redis-server answers, in RESP2 and RESP3, each command's reply or error
// in place; the backends end up holding the same, and the legacy lock of
// SETNX and EXPIRE in one transaction takes the key with its ttl on every
// backend.
func TestTransactionsAsOneRedis(t *testing.T) {
	t.Parallel()
	ref := startRedis(t)
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 60*time.Second)
	for _, proto := range []int{2, 3} {
		direct := redis.NewClient(&redis.Options{Addr: ref.Addr(), Protocol: proto, DisableIdentity: true, MaxRetries: -1})
		t.Cleanup(func() { _ = direct.Close() })
		proxy := p.Client(&redis.Options{Protocol: proto, DisableIdentity: true})
		k := func(s string) string { return fmt.Sprintf("%s:%d", s, proto) }
		txs := []func(redis.Pipeliner){
			func(p redis.Pipeliner) {
				p.Set(ctx, k("a"), "1", 0)
				p.Incr(ctx, k("a"))
				p.HSet(ctx, k("h"), "f", "v", "g", "w")
				p.HGetAll(ctx, k("h"))
				p.LPush(ctx, k("a"), "x")
				p.Get(ctx, k("nokey"))
				p.ZAdd(ctx, k("z"), redis.Z{Score: 1.5, Member: "m"})
				p.ZRangeWithScores(ctx, k("z"), 0, -1)
				p.SAdd(ctx, k("s"), "b", "a")
				p.SMembers(ctx, k("s"))
			},
			func(p redis.Pipeliner) {
				p.SetNX(ctx, k("lock"), "t1", 0)
				p.Expire(ctx, k("lock"), 10*time.Second)
			},
			func(p redis.Pipeliner) {
				p.SetNX(ctx, k("lock"), "t2", 0)
				p.Get(ctx, k("lock"))
				p.Del(ctx, k("a"), k("h"))
			},
		}
		for i, tx := range txs {
			want, werr := direct.TxPipelined(ctx, func(p redis.Pipeliner) error { tx(p); return nil })
			got, gerr := proxy.TxPipelined(ctx, func(p redis.Pipeliner) error { tx(p); return nil })
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || len(want) != len(got) {
				t.Fatalf("RESP%d transaction %d: proxy %v (%v), one Redis %v (%v)", proto, i, got, gerr, want, werr)
			}
			for j := range want {
				w, g := fmt.Sprint(want[j]), fmt.Sprint(got[j])
				if sm, ok := got[j].(*redis.StringSliceCmd); ok && j == 9 { // a set: its order is each server's own
					w, g = fmt.Sprint(len(want[j].(*redis.StringSliceCmd).Val())), fmt.Sprint(len(sm.Val()))
				}
				if w != g {
					t.Errorf("RESP%d transaction %d, command %d: proxy %s, one Redis %s", proto, i, j, g, w)
				}
			}
		}
		for i, r := range rs {
			b := r.Client()
			if v, err := b.Get(ctx, k("lock")).Result(); err != nil || v != "t1" {
				t.Errorf("backend %d: %s = %q (%v), want t1", i, k("lock"), v, err)
			}
			if ttl := b.PTTL(ctx, k("lock")).Val(); ttl <= 0 || ttl > 10*time.Second {
				t.Errorf("backend %d: %s has ttl %v, want at most the 10 s the transaction gave", i, k("lock"), ttl)
			}
			if n := b.Exists(ctx, k("a"), k("h")).Val(); n != 0 {
				t.Errorf("backend %d: %d of the deleted keys left", i, n)
			}
		}
	}
}

// TestWatchedCounterThroughTwoProxies: Redis's optimistic counter
// (go-redis Watch: WATCH k, GET k, MULTI, SET k n+1, EXEC, again when
// the transaction did not run), by four clients through two proxies over
// the same three backends: no increment is lost, none is counted twice.
func TestWatchedCounterThroughTwoProxies(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	const hcl = `node_timeout = "1s"` // no NOQUORUM, whose outcome is unknown, on a loaded machine
	ps := []*proxyProc{startProxy(t, rs, hcl), startProxy(t, rs, hcl)}
	ctx := testCtx(t, 90*time.Second)
	const clients, each = 4, 15
	errs := make(chan error, clients)
	for i := range clients {
		c := ps[i%2].Client(nil)
		go func() {
			for range each {
				for {
					err := c.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.Get(ctx, "counter").Int()
						if err != nil && err != redis.Nil {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, "counter", n+1, 0)
							return nil
						})
						return err
					}, "counter")
					if err == redis.TxFailedErr {
						continue // another client's increment came first
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range rs {
		if v, err := r.Client().Get(ctx, "counter").Int(); err != nil || v != clients*each {
			t.Errorf("backend %d: counter = %d (%v), want %d", i, v, err, clients*each)
		}
	}
}
