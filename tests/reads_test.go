package tests

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReadAnswersWhatAQuorumHolds: PTTL through the proxy answers how long
// a quorum of backends will still hold the key, so a backend that missed
// an extend never shows the older ttl, whichever backend answers first.
func TestReadAnswersWhatAQuorumHolds(t *testing.T) {
	t.Parallel()
	rs, p, bs := interopSetup(t)
	ctx := testCtx(t, 60*time.Second)
	c := p.Client(nil)

	// One backend set back to 4 s, as a missed extend leaves it: four
	// backends hold the key for 30 s.
	if err := c.Set(ctx, "k", "tok", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	settled(t, bs, "k with a 30 s ttl", func(b *redis.Client) bool {
		return b.PTTL(ctx, "k").Val() > 20*time.Second
	})
	if err := bs[2].PExpire(ctx, "k", 4*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if ms, err := c.PTTL(ctx, "k").Result(); err != nil || ms < 20*time.Second {
			t.Fatalf("round %d: PTTL = %v, %v; four of five backends hold the key for 30 s", i, ms, err)
		}
	}
	// Three set back: now a quorum holds it for 4 s at most.
	for _, b := range bs[:2] {
		if err := b.PExpire(ctx, "k", 4*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if ms, err := c.PTTL(ctx, "k").Result(); err != nil || ms > 4*time.Second {
		t.Fatalf("PTTL = %v, %v; only two backends hold the key beyond 4 s", ms, err)
	}

	// An EXTEND while one backend is stopped succeeds on the others; PTTL
	// then shows the extension, while the backend is stopped and after.
	r, err := c.Do(ctx, "LOCK", "e", "4000", "TOKEN", "t").Result()
	if err != nil || r == nil {
		t.Fatalf("LOCK = %v, %v", r, err)
	}
	rs[0].Stop()
	if v, err := c.Do(ctx, "EXTEND", "e", "t", "30000").Int64(); err != nil || v < 20000 {
		t.Fatalf("EXTEND with one backend stopped = %v, %v", v, err)
	}
	if ms, err := c.PTTL(ctx, "e").Result(); err != nil || ms < 20*time.Second {
		t.Fatalf("PTTL while a backend is stopped = %v, %v; want the extension", ms, err)
	}
	rs[0].Cont()
	if ms, err := c.PTTL(ctx, "e").Result(); err != nil || ms < 20*time.Second {
		t.Fatalf("PTTL after it resumed = %v, %v; want the extension", ms, err)
	}
}

// TestInteropRedisPyExtendThenPTTL: redis-py's Lock extends, then the
// application checks the remaining time: it must see the extension every
// time (the extend adds 30 s to about 20 s left). A 20 s lock, not a 2 s
// one: the proxy gives each backend call 5% of the ttl, and 100 ms (of a
// 2 s lock) is a deadline a loaded machine misses (NOQUORUM at acquire
// under make test with -parallel 8, load 10); 1 s is not.
func TestInteropRedisPyExtendThenPTTL(t *testing.T) {
	t.Parallel()
	requirePythonRedis(t)
	_, p, _ := interopSetup(t)
	const rounds = 150
	code := `
import sys, redis
host, port = sys.argv[1].rsplit(":", 1)
r = redis.Redis(host=host, port=int(port))
stale = []
for i in range(int(sys.argv[2])):
    lock = r.lock("pyext", timeout=20)
    assert lock.acquire(blocking=False)
    assert lock.extend(30)
    left = r.pttl("pyext")
    if left <= 30000:
        stale.append(left)
    lock.release()
print("stale", len(stale), stale[:5])
`
	out, err := runLimited(2*time.Minute, debianPython, "-c", code, p.Addr(), strconv.Itoa(rounds))
	if err != nil {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
	if got := lastLine(out); !strings.HasPrefix(got, "stale 0 ") {
		t.Fatalf("PTTL right after extend showed the old ttl: %s (of %d rounds)", got, rounds)
	}
}
