package tests

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Holds under faults: the chaos workload with locks that outlive max_ttl,
// taken the two ways a client gets one. Half the workers lock with a hash
// lock run by vote (a script the proxy does not recognise) that asks for a
// lease of ten minutes; the other half with SET NX without expiry. Each
// kind works on resources of its own. The faults are those of
// TestChaosProxy, and the majority restart happens while a long hold of
// each kind is held, which is then kept for the quarantine and three
// leases after it. A quarter of the workers, after each release, send
// their old release again through a second proxy (staleReleaser). Each
// cycle also SIGSTOPs the proxy that made every hold for two leases: the
// second proxy renews them from the record. No two holders may overlap.

// holdValidity is how long a grant of a long hold is valid to its
// client: ten minutes (the script's lease), or without expiry.
const holdValidity = 10 * time.Minute

// voteHoldLocker takes a hash lock by vote: the key is created with the
// owner's field and a lease of holdValidity, unless it exists.
type voteHoldLocker struct{ c *redis.Client }

var (
	voteHoldAcquire = redis.NewScript(`if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], ARGV[1], "1")
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return 1`)
	voteHoldRelease = redis.NewScript(`if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 0 then return 0 end
return redis.call("DEL", KEYS[1])`)
)

func (l voteHoldLocker) acquire(ctx context.Context, key string) (grant, string) {
	key = "vh:" + key
	tok := fmt.Sprintf("%x", time.Now().UnixNano())
	t0 := time.Now()
	n, err := voteHoldAcquire.Run(ctx, l.c, []string{key}, tok, holdValidity.Milliseconds()).Int()
	t1 := time.Now()
	switch {
	case err != nil:
		return grant{}, replyKind(err)
	case n != 1:
		return grant{}, "held"
	}
	return grant{Resource: key, Token: tok, Sent: t0, Start: t1, End: t0.Add(holdValidity)}, "granted"
}

func (l voteHoldLocker) release(ctx context.Context, g grant) string {
	n, err := voteHoldRelease.Run(ctx, l.c, []string{g.Resource}, g.Token).Int()
	if err != nil {
		return "unlock:" + replyKind(err)
	}
	return fmt.Sprintf("unlock:%d", n)
}

// keepLocker takes a lock without expiry: SET NX, released by DELIFEQ.
type keepLocker struct{ c *redis.Client }

func (l keepLocker) acquire(ctx context.Context, key string) (grant, string) {
	key = "ne:" + key
	tok := fmt.Sprintf("%x", time.Now().UnixNano())
	t0 := time.Now()
	ok, err := l.c.SetNX(ctx, key, tok, 0).Result()
	t1 := time.Now()
	switch {
	case err != nil:
		return grant{}, replyKind(err)
	case !ok:
		return grant{}, "held"
	}
	return grant{Resource: key, Token: tok, Sent: t0, Start: t1, End: t0.Add(holdValidity)}, "granted"
}

func (l keepLocker) release(ctx context.Context, g grant) string {
	n, err := l.c.Do(ctx, "DELIFEQ", g.Resource, g.Token).Int()
	if err != nil {
		return "unlock:" + replyKind(err)
	}
	return fmt.Sprintf("unlock:%d", n)
}

// staleReleaser is a keepLocker whose client, after each release, sends
// its old release again through another proxy a little later, once
// another worker may hold the resource (DELIFEQ, UNLOCK, EXTEND and a
// release script in turn): none may free or shorten the current hold.
type staleReleaser struct {
	keepLocker
	other *redis.Client
	n     *int
}

func (l staleReleaser) release(ctx context.Context, g grant) string {
	out := l.keepLocker.release(ctx, g)
	time.Sleep(100 * time.Millisecond) // the next holder's turn, most often
	*l.n++
	switch *l.n % 4 {
	case 0:
		l.other.Do(ctx, "DELIFEQ", g.Resource, g.Token)
	case 1:
		l.other.Do(ctx, "UNLOCK", g.Resource, g.Token)
	case 2:
		l.other.Do(ctx, "EXTEND", g.Resource, g.Token, "1000")
	default:
		l.other.Eval(ctx, "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0", []string{g.Resource}, g.Token)
	}
	return out
}

func TestChaosHolds(t *testing.T) {
	t.Parallel()
	d := chaosDuration(t)
	rs := startCluster(t, 5)
	p := startProxy(t, rs, chaosProxyHCL)
	q := startProxy(t, rs, chaosProxyHCL) // where stale releases go
	ctx := testCtx(t, d+3*time.Minute)
	const maxTTL, lease = 2 * time.Second, time.Second

	run := newChaosRun(t, ctx, "holds")
	run.startWorkers(chaosWorkers, func(w int) chaosLocker {
		c := p.Client(&redis.Options{PoolSize: 1})
		switch w % 4 {
		case 0, 2:
			return voteHoldLocker{c}
		case 3:
			return staleReleaser{keepLocker{c}, q.Client(&redis.Options{PoolSize: 1}), new(int)}
		}
		return keepLocker{c}
	})
	holders := []chaosLocker{voteHoldLocker{p.Client(nil)}, keepLocker{p.Client(nil)}}

	end := run.h.origin.Add(d)
	const cycle = 19 * time.Second // the faults below, end to end
	for n := 0; n == 0 || time.Until(end) > cycle; n++ {
		time.Sleep(time.Second)
		run.fault("SIGSTOP 1 backend", chaosStall, rs[0].Stop, rs[0].Cont)
		time.Sleep(500 * time.Millisecond)
		l := holders[n%len(holders)]
		held := run.holdThrough(l, func() {
			ev := chaosEvent{name: fmt.Sprintf("kill -9 + empty restart of 3 of 5 backends (%T held)", l), at: time.Now()}
			restartAtOnce(t, rs[1:4])
			ev.until = time.Now()
			run.events = append(run.events, ev)
		}, func(grant) time.Duration { return maxTTL + 3*lease })
		if !held {
			run.cancel()
			run.wg.Wait()
			t.Fatalf("cycle %d: could not take a hold through the proxy within 5s to keep across the restart", n)
		}
		run.fault("SIGSTOP 2 backends", chaosStall,
			func() { rs[3].Stop(); rs[4].Stop() },
			func() { rs[3].Cont(); rs[4].Cont() })
		time.Sleep(time.Second)
		// The proxy that made every hold stops renewing for two leases:
		// the other renews them from the record (nothing handed over), and
		// when it resumes both renew them for a while.
		run.fault("SIGSTOP the proxy that made the holds", 2*lease,
			func() { p.Signal(syscall.SIGSTOP) },
			func() { p.Signal(syscall.SIGCONT) })
		time.Sleep(time.Second)
	}
	time.Sleep(time.Until(end))
	rep, _ := run.finish(false)
	for _, line := range rep.details(run.h.origin, 50) {
		t.Error(line)
	}
	if rep.Grants == 0 {
		t.Errorf("no grant at all")
	}
	if strings.Contains(p.Log(), "panic") {
		t.Errorf("the proxy log mentions a panic")
	}
	t.Logf("FIGURES holds: duration=%v grants=%d overlaps=%d NOQUORUM=%d",
		d, rep.Grants+rep.Empty, len(rep.Overlaps), rep.Outcomes["NOQUORUM"])
}
