package tests

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// quiet is how long a count of deliveries waits, after the expected ones
// arrived, for a duplicate to show: copies of one message arrive within
// a backend round trip of each other.
const quiet = 500 * time.Millisecond

// collector counts what a go-redis subscription receives, by payload.
type collector struct {
	mu  sync.Mutex
	got []string
}

func collect(t *testing.T, ps *redis.PubSub) *collector {
	c := &collector{}
	ch := ps.Channel()
	done := make(chan struct{})
	go func() { // owned: ends when the subscription closes, awaited at cleanup
		defer close(done)
		for m := range ch {
			c.mu.Lock()
			if m.Pattern != "" {
				c.got = append(c.got, "p:"+m.Channel+":"+m.Payload)
			} else {
				c.got = append(c.got, m.Channel+":"+m.Payload)
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ps.Close()
		<-done
	})
	return c
}

func (c *collector) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// expect waits until want arrived, then for a quiet spell, and checks
// that exactly want arrived (in any order), then forgets it.
func (c *collector) expect(t *testing.T, want ...string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("the messages %q", want), func() bool { return len(c.list()) >= len(want) })
	time.Sleep(quiet)
	got := c.list()
	slices.Sort(got)
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, w) {
		t.Fatalf("delivered %q, want exactly %q", got, w)
	}
	c.mu.Lock()
	c.got = nil
	c.mu.Unlock()
}

// pubsubSetup starts five backends and two proxies over them.
func pubsubSetup(t *testing.T) ([]*redisProc, *proxyProc, *proxyProc) {
	rs := startCluster(t, 5)
	return rs, startProxy(t, rs, ""), startProxy(t, rs, "")
}

// publishEverywhere publishes on every backend directly: what a script
// that publishes does when the proxy runs it on every backend.
func publishEverywhere(ctx context.Context, t *testing.T, rs []*redisProc, channel, payload string) {
	t.Helper()
	for _, r := range rs {
		if err := r.Client().Publish(ctx, channel, payload).Err(); err != nil {
			t.Fatalf("PUBLISH on backend %s: %v", r.Addr(), err)
		}
	}
}

// TestPubSubExactlyOnce: go-redis subscribers (RESP2 and RESP3, channel
// and pattern) on one proxy get each message exactly once, published
// through the same proxy, through the other one, or on every backend;
// two identical messages in a row both arrive.
func TestPubSubExactlyOnce(t *testing.T) {
	t.Parallel()
	rs, pa, pb := pubsubSetup(t)
	ctx := testCtx(t, 2*time.Minute)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ch := fmt.Sprintf("ch%d", proto)
			sub := pa.Client(&redis.Options{Protocol: proto})
			ps := sub.Subscribe(ctx, ch)
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatalf("SUBSCRIBE: %v", err)
			}
			if err := ps.PSubscribe(ctx, ch+"*"); err != nil {
				t.Fatalf("PSUBSCRIBE: %v", err)
			}
			// go-redis's PSubscribe and Ping only send: the confirmation
			// is read here, before anything is published.
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatalf("PSUBSCRIBE's confirmation: %v", err)
			}
			msgs := collect(t, ps)
			if err := ps.Ping(ctx); err != nil {
				t.Fatalf("PING while subscribed: %v", err)
			}
			a, b := pa.Client(nil), pb.Client(nil)

			n, err := a.Publish(ctx, ch, "same-proxy").Result()
			if err != nil || n < 1 {
				t.Fatalf("PUBLISH through the same proxy = %d, %v", n, err)
			}
			msgs.expect(t, ch+":same-proxy", "p:"+ch+":same-proxy")

			if err := b.Publish(ctx, ch, "other-proxy").Err(); err != nil {
				t.Fatal(err)
			}
			msgs.expect(t, ch+":other-proxy", "p:"+ch+":other-proxy")

			publishEverywhere(ctx, t, rs, ch, "script")
			msgs.expect(t, ch+":script", "p:"+ch+":script")

			for range 2 {
				if err := b.Publish(ctx, ch, "twice").Err(); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				publishEverywhere(ctx, t, rs, ch, "twice-everywhere")
			}
			msgs.expect(t, ch+":twice", ch+":twice", "p:"+ch+":twice", "p:"+ch+":twice",
				ch+":twice-everywhere", ch+":twice-everywhere", "p:"+ch+":twice-everywhere", "p:"+ch+":twice-everywhere")

			if n, err := pa.Client(nil).PubSubNumSub(ctx, ch).Result(); err != nil || n[ch] != 1 {
				t.Fatalf("PUBSUB NUMSUB through the subscriber's proxy = %v, %v", n, err)
			}
		})
	}
}

// TestPubSubCountedIsDelivered: a message that PUBLISH counted for a
// subscription is delivered to it, even when it is published while the
// subscription is still being confirmed (the subscriber's PSUBSCRIBE not
// yet answered). PUBLISH answers the largest count a backend reported, so
// a count that includes the pattern means some backend had it and sent
// its copy; a count without it means none did. Messages are published in
// a loop across the PSUBSCRIBE, through the same proxy and the other.
func TestPubSubCountedIsDelivered(t *testing.T) {
	t.Parallel()
	_, pa, pb := pubsubSetup(t)
	ctx := testCtx(t, 2*time.Minute)
	for _, pub := range []*proxyProc{pa, pb} {
		for round := range 3 {
			ch := fmt.Sprintf("counted-%s-%d", pub.Addr(), round)
			ps := pa.Client(nil).Subscribe(ctx, ch)
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatalf("SUBSCRIBE: %v", err)
			}
			msgs := collect(t, ps)
			publisher := pub.Client(nil)
			var withPattern, without []string
			for i := 0; i < 5000 && len(withPattern) < 20; i++ {
				if i == 10 {
					if err := ps.PSubscribe(ctx, ch+"*"); err != nil {
						t.Fatalf("PSUBSCRIBE: %v", err)
					}
				}
				payload := strconv.Itoa(i)
				n, err := publisher.Publish(ctx, ch, payload).Result()
				switch {
				case err != nil:
					t.Fatalf("PUBLISH: %v", err)
				case n == 0:
					// No backend had even the channel yet (SUBSCRIBE
					// answers after at most 1 s without every
					// confirmation): nothing is delivered.
				case n >= 2:
					withPattern = append(withPattern, payload)
				default:
					without = append(without, payload)
				}
			}
			if len(withPattern) < 20 {
				t.Fatalf("PUBLISH never counted the pattern subscription (%d publishes)", len(without))
			}
			var want []string
			for _, p := range without {
				want = append(want, ch+":"+p)
			}
			for _, p := range withPattern {
				want = append(want, ch+":"+p, "p:"+ch+":"+p)
			}
			msgs.expect(t, want...)
		}
	}
}

// TestPubSubBackendRestart: a backend killed and restarted under a
// subscription; messages keep flowing meanwhile, and the restarted
// backend is subscribed again, each message still delivered once.
func TestPubSubBackendRestart(t *testing.T) {
	t.Parallel()
	rs, pa, pb := pubsubSetup(t)
	ctx := testCtx(t, 2*time.Minute)
	ps := pa.Client(nil).Subscribe(ctx, "restart")
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := collect(t, ps)
	b := pb.Client(nil)

	rs[0].Kill()
	if err := b.Publish(ctx, "restart", "while-down").Err(); err != nil {
		t.Fatalf("PUBLISH with a backend down: %v", err)
	}
	msgs.expect(t, "restart:while-down")

	rs[0].Restart()
	testkit.Eventually(t, 20*time.Second, "the restarted backend subscribed again", func() bool {
		n, err := rs[0].Client().PubSubNumSub(ctx, "restart").Result()
		return err == nil && n["restart"] >= 1
	})
	if err := rs[0].Client().Publish(ctx, "restart", "restarted-only").Err(); err != nil {
		t.Fatal(err)
	}
	msgs.expect(t, "restart:restarted-only")
	if err := b.Publish(ctx, "restart", "after").Err(); err != nil {
		t.Fatal(err)
	}
	publishEverywhere(ctx, t, rs, "restart", "everywhere-after")
	msgs.expect(t, "restart:after", "restart:everywhere-after")
}

// TestPubSubRueidis: a rueidis subscriber with default options (RESP3,
// pushes on its command connections) gets each message once.
func TestPubSubRueidis(t *testing.T) {
	t.Parallel()
	rs, pa, pb := pubsubSetup(t)
	ctx := testCtx(t, time.Minute)
	c := newRueidis(t, pa.Addr())
	var mu sync.Mutex
	var got []string
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { // owned: stopped and awaited below
		done <- c.Receive(rctx, c.B().Subscribe().Channel("rch").Build(), func(m rueidis.PubSubMessage) {
			mu.Lock()
			got = append(got, m.Message)
			mu.Unlock()
		})
	}()
	defer func() {
		stop()
		<-done
	}()
	testkit.Eventually(t, 10*time.Second, "the rueidis subscription", func() bool {
		n, err := pa.Client(nil).PubSubNumSub(ctx, "rch").Result()
		return err == nil && n["rch"] == 1
	})
	if err := c.Do(ctx, c.B().Publish().Channel("rch").Message("same-proxy").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := pb.Client(nil).Publish(ctx, "rch", "other-proxy").Err(); err != nil {
		t.Fatal(err)
	}
	publishEverywhere(ctx, t, rs, "rch", "script")
	want := []string{"other-proxy", "same-proxy", "script"}
	testkit.Eventually(t, 10*time.Second, "three messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	})
	time.Sleep(quiet)
	mu.Lock()
	defer mu.Unlock()
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Fatalf("rueidis received %q, want each of %q once", got, want)
	}
}
