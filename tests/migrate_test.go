package tests

// The move from one Redis to the quorum (migrate_from): applications that
// still lock on the old single Redis and applications that already lock
// through the proxy share resources, and no two of them may hold one at
// once, whatever dialect the moved ones speak and while a backend stalls.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// compareAndDelete is the release script of the applications: delete the
// key only if it still holds our token.
var compareAndDelete = redis.NewScript(`
if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end`)

// setNXLocker locks as an application written for one Redis does: SET NX
// PX with a random token, released with compareAndDelete. Pointed at the
// old instance it is a client that has not moved; pointed at the proxy,
// one that has.
type setNXLocker struct {
	c   *redis.Client
	ttl time.Duration
}

func (l setNXLocker) acquire(ctx context.Context, key string) (grant, string) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	t0 := time.Now()
	ok, err := l.c.SetNX(ctx, key, tok, l.ttl).Result()
	t1 := time.Now()
	switch {
	case err != nil:
		return grant{}, replyKind(err)
	case !ok:
		return grant{}, "held"
	}
	// As long as one Redis keeps it, less the proxy's own drift allowance.
	valid := l.ttl - l.ttl/100 - 2*time.Millisecond
	return grant{Resource: key, Token: tok, Sent: t0, Start: t1, End: t0.Add(valid)}, "granted"
}

func (l setNXLocker) release(ctx context.Context, g grant) string {
	n, err := compareAndDelete.Run(ctx, l.c, []string{g.Resource}, g.Token).Int64()
	if err != nil {
		return "unlock:" + replyKind(err)
	}
	return fmt.Sprintf("unlock:%d", n)
}

// countedLocker counts the grants of one kind of client.
type countedLocker struct {
	chaosLocker
	n *atomic.Int64
}

func (l countedLocker) acquire(ctx context.Context, key string) (grant, string) {
	g, kind := l.chaosLocker.acquire(ctx, key)
	if kind == "granted" {
		l.n.Add(1)
	}
	return g, kind
}

// migrateSetup is three backends, the old single Redis, and a proxy with
// migrate_from pointing at it, on the chaos runs' timings.
func migrateSetup(t *testing.T) ([]*redisProc, *redisProc, *proxyProc) {
	t.Helper()
	rs := startCluster(t, 3)
	old := startRedis(t)
	p := startProxy(t, rs, chaosProxyHCL+fmt.Sprintf("\nmigrate_from = %q\n", old.URL()))
	return rs, old, p
}

// infoField reads one field of INFO section.
func infoField(t *testing.T, c *redis.Client, section, field string) string {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, field, info)
	return ""
}

// TestMigrateNoOverlap: clients locking directly on the old Redis with
// SET NX PX, and clients locking through the proxy (native LOCK, SET NX
// with the same release script, redsync) on the same four resources,
// while one of three backends is SIGSTOPped for a while: no two hold one
// resource at once, and both sides get locks.
func TestMigrateNoOverlap(t *testing.T) {
	t.Parallel()
	d := chaosDuration(t)
	rs, old, p := migrateSetup(t)
	ctx := testCtx(t, d+2*time.Minute)
	if got := infoField(t, p.Client(nil), "backends", "migrate_from_active"); got != "1" {
		t.Fatalf("INFO migrate_from_active = %q, want 1", got)
	}

	var legacy, native, setnx, rsync atomic.Int64
	run := newChaosRun(t, ctx, "migrate")
	run.startWorkers(3, func(int) chaosLocker {
		c := redis.NewClient(&redis.Options{Addr: old.Addr(), PoolSize: 1, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return countedLocker{setNXLocker{c: c, ttl: chaosTTL}, &legacy}
	})
	run.startWorkers(2, func(int) chaosLocker {
		return countedLocker{proxyLocker{c: p.Client(&redis.Options{PoolSize: 1}), ttl: chaosTTL}, &native}
	})
	run.startWorkers(2, func(int) chaosLocker {
		return countedLocker{setNXLocker{c: p.Client(&redis.Options{PoolSize: 1}), ttl: chaosTTL}, &setnx}
	})
	run.startWorkers(2, func(int) chaosLocker {
		rs := redsync.New(goredis.NewPool(p.Client(&redis.Options{PoolSize: 1})))
		return countedLocker{redsyncOnce{rs: rs, ttl: chaosTTL}, &rsync}
	})

	time.Sleep(d / 3)
	run.fault("SIGSTOP 1 of 3 backends", min(d/3, 3*time.Second), rs[0].Stop, rs[0].Cont)
	time.Sleep(time.Until(run.h.origin.Add(d)))
	rep, _ := run.finish(false)

	t.Logf("grants: %d legacy (old Redis), %d LOCK, %d SET NX, %d redsync through the proxy",
		legacy.Load(), native.Load(), setnx.Load(), rsync.Load())
	if n := rep.failures(); n > 0 {
		for _, line := range rep.details(run.h.origin, 20) {
			t.Error(line)
		}
		t.Fatalf("%d violations of mutual exclusion", n)
	}
	for name, n := range map[string]int64{"legacy": legacy.Load(), "LOCK": native.Load(), "SET NX": setnx.Load(), "redsync": rsync.Load()} {
		if n == 0 {
			t.Errorf("no %s client was granted a lock: the sides did not share the resources", name)
		}
	}
	held, _ := strconv.Atoi(infoField(t, p.Client(nil), "backends", "migrate_held_acquires"))
	if held == 0 {
		t.Error("INFO migrate_held_acquires = 0: the proxy never found a resource held on the old instance")
	}
	t.Logf("INFO migrate_held_acquires = %d, migrate_legacy_holds = %s", held,
		infoField(t, p.Client(nil), "backends", "migrate_legacy_holds"))
}

// redsyncOnce is redsync through the proxy, one try per acquire (the run
// retries), so that the workers of every kind contend evenly.
type redsyncOnce struct {
	rs  *redsync.Redsync
	ttl time.Duration
}

func (l redsyncOnce) acquire(ctx context.Context, key string) (grant, string) {
	m := l.rs.NewMutex(key, redsync.WithExpiry(l.ttl), redsync.WithTries(1))
	t0 := time.Now()
	err := m.LockContext(ctx)
	t1 := time.Now()
	if err != nil {
		return grant{}, "held"
	}
	return grant{Resource: key, Token: m.Value(), Sent: t0, Start: t1, End: m.Until()}, "granted"
}

func (l redsyncOnce) release(ctx context.Context, g grant) string {
	return redsyncLocker{rs: l.rs, ttl: l.ttl}.release(ctx, g)
}

// TestMigrateOldDown: an old instance that does not answer fails every
// acquisition with the documented error (a client that has not moved may
// hold the key there) and leaves no key on the backends; a lock taken
// before can still be released.
func TestMigrateOldDown(t *testing.T) {
	t.Parallel()
	rs, old, p := migrateSetup(t)
	ctx := testCtx(t, time.Minute)
	c := p.Client(nil)
	tok, err := c.Do(ctx, "LOCK", "before", 2000).Slice()
	if err != nil {
		t.Fatal(err)
	}
	old.Stop()
	defer old.Cont()
	// Released first, well within its 2 s ttl whatever the machine's
	// load: releases proceed on the backends with the old instance stopped.
	if n, err := c.Do(ctx, "UNLOCK", "before", tok[0]).Int64(); err != nil || n != 1 {
		t.Fatalf("UNLOCK with the old instance stopped = %d, %v; want 1 (releases proceed on the backends)", n, err)
	}
	want := "NOQUORUM migrate_from " + old.Addr() + " unreachable"
	if _, err := c.Do(ctx, "LOCK", "k", 2000).Result(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("LOCK with the old instance stopped: %v, want %q…", err, want)
	}
	// Another key: the LOCK's backend copies are undone in the background.
	if _, err := c.SetNX(ctx, "k2", "v", 2*time.Second).Result(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("SET NX with the old instance stopped: %v, want %q…", err, want)
	}
	for _, r := range rs {
		testkit.Eventually(t, 5*time.Second, "no copy of k, k2 or before left on "+r.Addr(), func() bool {
			n, err := r.Client().Exists(ctx, "k", "k2", "before").Result()
			return err == nil && n == 0
		})
	}
	// The stopped instance runs the SETs queued to it when it resumes;
	// their undo may have been given up, so a key stays until its ttl.
	old.Cont()
	testkit.Eventually(t, 10*time.Second, "LOCK granted once the old instance answers again", func() bool {
		_, err := c.Do(ctx, "LOCK", "k", 2000).Slice()
		return err == nil
	})
}

// TestMigrateRollbackOnOld: an acquisition the backends refuse, whose key
// the old instance granted, is undone there; and a key a client holds on
// the old instance is held through the proxy, for reads too.
func TestMigrateRollbackOnOld(t *testing.T) {
	t.Parallel()
	rs, old, p := migrateSetup(t)
	ctx := testCtx(t, time.Minute)
	c := p.Client(nil)
	for _, r := range rs[:2] {
		if err := r.Client().Set(ctx, "k", "other", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	setsBefore := commandCalls(t, old, "set")
	if v, err := c.Do(ctx, "LOCK", "k", 2000).Result(); err != redis.Nil {
		t.Fatalf("LOCK of a key held on a quorum = %v, %v; want null", v, err)
	}
	// The old instance's part runs beside the backends' and is not waited
	// for when the backends refuse.
	testkit.Eventually(t, 5*time.Second, "the acquisition reached the old instance", func() bool {
		return commandCalls(t, old, "set") > setsBefore
	})
	testkit.Eventually(t, 5*time.Second, "the old instance's copy of k rolled back", func() bool {
		n, err := old.Client().Exists(ctx, "k").Result()
		return err == nil && n == 0
	})

	// A legacy hold: held through the proxy, visible to reads.
	if err := old.Client().Set(ctx, "legacy", "app-1", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Do(ctx, "LOCK", "legacy", 2000).Result(); err != redis.Nil {
		t.Fatalf("LOCK of a key held on the old instance = %v, %v; want null", v, err)
	}
	// The refused LOCK's copies on the backends are undone in the
	// background (the caller does not wait for the rollback): until then a
	// quorum of backends holds its token, and a read answers that.
	testkit.Eventually(t, 10*time.Second, "GET legacy answers the old instance's value once the refused LOCK is undone", func() bool {
		v, err := c.Get(ctx, "legacy").Result()
		return err == nil && v == "app-1"
	})
	if n, err := c.Exists(ctx, "legacy").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS legacy = %d, %v; want 1", n, err)
	}
	if ms, err := c.PTTL(ctx, "legacy").Result(); err != nil || ms <= 0 {
		t.Fatalf("PTTL legacy = %v, %v; want the old instance's ttl", ms, err)
	}
	if info, err := c.Do(ctx, "LOCKINFO", "legacy").Result(); err != nil || info == nil {
		t.Fatalf("LOCKINFO legacy = %v, %v; want the legacy hold", info, err)
	}
	testkit.Eventually(t, 5*time.Second, "the refused LOCK's backend copies rolled back", func() bool {
		for _, r := range rs {
			if n, err := r.Client().Exists(ctx, "legacy").Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	if n, _ := strconv.Atoi(infoField(t, c, "backends", "migrate_legacy_holds")); n == 0 {
		t.Error("INFO migrate_legacy_holds = 0 after a legacy hold was seen")
	}
}

// commandCalls reads calls= of cmdstat_name from r's INFO commandstats.
func commandCalls(t *testing.T, r *redisProc, name string) int {
	t.Helper()
	info, err := r.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

// TestMigrateRedisPy: the same run as TestMigrateNoOverlap with redis-py
// on both sides: legacy processes locking on the old Redis with SET NX PX
// and a compare-and-delete script, and processes using redis-py's Lock
// through the proxy, one backend SIGSTOPped midway.
func TestMigrateRedisPy(t *testing.T) {
	t.Parallel()
	requirePythonRedis(t)
	d := min(chaosDuration(t), 15*time.Second)
	rs, old, p := migrateSetup(t)
	worker := pythonScript(t, "migrate_worker.py")
	keys := strings.Join(chaosKeys, ",")
	type result struct {
		Windows [][3]json.RawMessage `json:"windows"`
		Outcome map[string]int       `json:"outcomes"`
	}
	kinds := []string{"legacy", "legacy", "proxy", "proxy"}
	outs := make([]chan string, len(kinds))
	for i, kind := range kinds {
		addr := old.Addr()
		if kind == "proxy" {
			addr = p.Addr()
		}
		outs[i] = make(chan string, 1)
		go func() {
			out, err := runLimited(d+time.Minute, debianPython, worker, kind, addr, keys,
				strconv.FormatInt(d.Milliseconds(), 10), strconv.FormatInt(chaosTTL.Milliseconds(), 10))
			if err != nil {
				out = fmt.Sprintf(`{"error": %q}`, err.Error()+" "+out)
			}
			outs[i] <- out
		}()
	}
	time.Sleep(d / 3)
	rs[0].Stop()
	time.Sleep(min(d/3, 3*time.Second))
	rs[0].Cont()

	var gs []grant
	base := time.Now()
	granted := map[string]int{}
	outcomes := map[string]int{}
	for i, kind := range kinds {
		out := <-outs[i]
		var res result
		if err := json.Unmarshal([]byte(lastLine(out)), &res); err != nil || res.Windows == nil && res.Outcome == nil {
			t.Fatalf("%s worker %d printed %q: %v", kind, i, out, err)
		}
		for k, n := range res.Outcome {
			outcomes[kind+":"+k] += n
		}
		for _, w := range res.Windows {
			var key string
			var start, end int64
			if json.Unmarshal(w[0], &key) != nil || json.Unmarshal(w[1], &start) != nil || json.Unmarshal(w[2], &end) != nil {
				t.Fatalf("%s worker %d: bad window %s", kind, i, w)
			}
			// CLOCK_MONOTONIC nanoseconds, one clock for every process.
			gs = append(gs, grant{Resource: key, Worker: i, Start: base.Add(time.Duration(start)), End: base.Add(time.Duration(end))})
			granted[kind]++
		}
	}
	from, to := base, base
	for i, g := range gs {
		if i == 0 || g.Start.Before(from) {
			from = g.Start
		}
		if g.End.After(to) {
			to = g.End
		}
	}
	rep := check(gs, outcomes, from, to, false)
	t.Logf("redis-py run of %v: %s", d, rep.summary(from))
	if n := rep.failures(); n > 0 {
		for _, line := range rep.details(from, 20) {
			t.Error(line)
		}
		t.Fatalf("%d violations of mutual exclusion", n)
	}
	if granted["legacy"] == 0 || granted["proxy"] == 0 {
		t.Fatalf("grants %v: want both sides granted", granted)
	}
}

// TestMigrateWaitForLegacy: LOCK … WAIT on a key a client holds on the
// old instance waits until that client releases it, then is granted.
func TestMigrateWaitForLegacy(t *testing.T) {
	t.Parallel()
	_, old, p := migrateSetup(t)
	ctx := testCtx(t, time.Minute)
	legacy := setNXLocker{c: old.Client(), ttl: 2 * time.Second}
	g, kind := legacy.acquire(ctx, "w")
	if kind != "granted" {
		t.Fatalf("legacy SET NX on the old instance: %s", kind)
	}
	var released atomic.Int64
	go func() {
		time.Sleep(500 * time.Millisecond)
		released.Store(time.Now().UnixNano())
		legacy.release(ctx, g)
	}()
	v, err := p.Client(nil).Do(ctx, "LOCK", "w", 2000, "WAIT", 5000).Slice()
	if err != nil || len(v) != 3 {
		t.Fatalf("LOCK w 2000 WAIT 5000 = %v, %v; want a grant once the legacy client released", v, err)
	}
	if at := released.Load(); at == 0 || time.Now().UnixNano() < at {
		t.Fatal("granted before the legacy client released")
	}
	if got, _ := old.Client().Get(ctx, "w").Result(); got != v[0] {
		t.Fatalf("old instance holds %q, want the proxy's token %v", got, v[0])
	}
}

// TestMigrateHoldsKeepTheOldCopy: every kind of hold the tier keeps (a
// write without expiry, an expiry beyond max_ttl, a script by vote and a
// keyed command that leave a key without expiry, PERSIST, EXPIRE beyond
// max_ttl, GETSET) keeps its copy on the old instance for as long as the
// hold lasts, not only for the first lease: a client that has not moved
// cannot take the key there. Released through the proxy, it is free on
// both sides.
func TestMigrateHoldsKeepTheOldCopy(t *testing.T) {
	t.Parallel()
	_, old, p := migrateSetup(t) // default_ttl 1 s: the lease
	ctx := testCtx(t, time.Minute)
	c := p.Client(nil)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("SET NX", c.SetNX(ctx, "nx", "A", 0).Err())
	must("SET NX PX 100000", c.SetNX(ctx, "nx-long", "A", 100*time.Second).Err())
	must("SET", c.Set(ctx, "plain", "A", 0).Err())
	must("HSETNX", c.HSetNX(ctx, "hash", "owner", "A").Err())
	must("EVAL", c.Eval(ctx, `return redis.call('HSETNX', KEYS[1], 'owner', ARGV[1])`, []string{"script"}, "A").Err())
	must("SET PX", c.Set(ctx, "persisted", "A", time.Second).Err())
	must("PERSIST", c.Persist(ctx, "persisted").Err())
	must("SET PX", c.Set(ctx, "expired-long", "A", time.Second).Err())
	must("EXPIRE 100", c.Expire(ctx, "expired-long", 100*time.Second).Err())
	if err := c.GetSet(ctx, "getset", "A").Err(); err != redis.Nil {
		t.Fatalf("GETSET of a free key: %v, want a null reply", err)
	}
	keys := []string{"nx", "nx-long", "plain", "hash", "script", "persisted", "expired-long", "getset"}

	time.Sleep(3 * time.Second) // three leases
	for _, k := range keys {
		if ms, err := c.PTTL(ctx, k).Result(); err != nil || ms != -1 && ms < 50*time.Second {
			t.Errorf("PTTL %s through the proxy = %v, %v; want the hold (-1 or about 100 s)", k, ms, err)
		}
		if ok, err := old.Client().SetNX(ctx, k, "legacy", 10*time.Second).Result(); err != nil || ok {
			t.Errorf("SET %s legacy NX on the old instance = %v, %v three leases in: a client that has not moved took a key held through the proxy", k, ok, err)
		}
	}
	if t.Failed() {
		return
	}
	must("DEL", c.Del(ctx, keys...).Err())
	for _, k := range keys {
		if ok, err := old.Client().SetNX(ctx, k, "legacy", 10*time.Second).Result(); err != nil || !ok {
			t.Errorf("SET %s legacy NX on the old instance after the release through the proxy = %v, %v; want it free", k, ok, err)
		}
	}
}

// TestMigrateHoldEndsWithItsOldCopy: a hold whose copy on the old
// instance is gone (deleted there, or expired while the old instance did
// not answer its renewals) is no longer the client's on the old instance,
// where a client that has not moved may take it: the tier stops keeping
// it, and the key is free through the proxy within a lease.
func TestMigrateHoldEndsWithItsOldCopy(t *testing.T) {
	t.Parallel()
	_, old, p := migrateSetup(t)
	ctx := testCtx(t, time.Minute)
	c := p.Client(nil)
	for _, k := range []string{"deleted", "stalled"} {
		if ok, err := c.SetNX(ctx, k, "A", 0).Result(); err != nil || !ok {
			t.Fatalf("SET %s A NX = %v, %v", k, ok, err)
		}
	}
	if err := old.Client().Del(ctx, "deleted").Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the hold whose old copy was deleted ends: the key is free through the proxy", func() bool {
		ok, err := c.SetNX(ctx, "deleted", "B", time.Second).Result()
		return err == nil && ok
	})

	// The old instance stalls for three leases: the copy there expires
	// (nothing renews it), and once it answers again the hold ends.
	old.Stop()
	time.Sleep(3 * time.Second)
	old.Cont()
	testkit.Eventually(t, 5*time.Second, "the hold whose old copy expired ends: the key is free through the proxy", func() bool {
		ok, err := c.SetNX(ctx, "stalled", "B", time.Second).Result()
		return err == nil && ok
	})
}

// TestMigrateIncrNeverBelowOld: a counter through the proxy answers more
// than the old instance has handed out (simple-redis-mutex's fencing
// token), and clients that have not moved keep seeing it grow past what
// the proxy answered; a counter on the old instance that holds no
// integer answers Redis's error, and an old instance that does not answer
// fails the increment.
func TestMigrateIncrNeverBelowOld(t *testing.T) {
	t.Parallel()
	rs, old, p := migrateSetup(t)
	ctx := testCtx(t, time.Minute)
	c, legacy := p.Client(nil), old.Client()
	if err := legacy.Set(ctx, "fence", 100, 0).Err(); err != nil {
		t.Fatal(err)
	}
	var last int64 = 100
	for i := range 6 {
		cl, side := c, "the proxy"
		if i%2 == 1 {
			cl, side = legacy, "the old instance"
		}
		n, err := cl.Incr(ctx, "fence").Result()
		if err != nil || n <= last {
			t.Fatalf("INCR fence %d on %s = %d, %v; want more than %d", i, side, n, err, last)
		}
		last = n
	}
	// Backends ahead of the old instance (a counter written through the
	// proxy before the move): the old instance is raised past them.
	for _, r := range rs {
		if err := r.Client().Set(ctx, "ahead", 500, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := legacy.Set(ctx, "ahead", 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Incr(ctx, "ahead").Result(); err != nil || n <= 500 {
		t.Fatalf("INCR ahead through the proxy = %d, %v; want more than the backends' 500", n, err)
	}
	if n, err := legacy.Incr(ctx, "ahead").Result(); err != nil || n <= 501 {
		t.Fatalf("INCR ahead on the old instance after the proxy's = %d, %v; want more than 501", n, err)
	}

	if err := legacy.Set(ctx, "word", "abc", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Incr(ctx, "word").Result(); err == nil || err.Error() != "ERR value is not an integer or out of range" {
		t.Fatalf("INCR of a key holding no integer on the old instance: %v; want Redis's error", err)
	}
	old.Stop()
	defer old.Cont()
	want := "NOQUORUM migrate_from " + old.Addr() + " unreachable"
	if _, err := c.Incr(ctx, "fence").Result(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("INCR with the old instance stopped: %v; want %q…", err, want)
	}
}

// TestMigrateWhatIsMirrored: the table of docs/safety.md ("What reaches
// the old instance"), command by command: each write through the proxy
// leaves on the old instance what it would have left there, but for the
// signal lists and FLUSHDB, which stay on the backends.
func TestMigrateWhatIsMirrored(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	old := startRedis(t)
	p := startProxy(t, rs, chaosProxyHCL+fmt.Sprintf("\nmigrate_from = %q\nallow_flush = true\n", old.URL()))
	ctx := testCtx(t, time.Minute)
	c, o := p.Client(nil), old.Client()
	get := func(k string) string { return o.Get(ctx, k).Val() }
	for _, r := range append([]*redisProc{old}, rs...) {
		if err := r.Client().ZAdd(ctx, "z", redis.Z{Score: 1, Member: "m"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var tok string
	for _, s := range []struct {
		cmd  []any
		read func() string // on the old instance, after the command
		want string
	}{
		{[]any{"LOCK", "lock", 1000}, func() string { tok = get("lock"); return strconv.FormatBool(tok != "") }, "true"},
		{[]any{"EXTEND", "lock", &tok, 2000}, func() string { return strconv.FormatBool(o.PTTL(ctx, "lock").Val() > 1500*time.Millisecond) }, "true"},
		{[]any{"SET", "s", "a", "PX", 2000}, func() string { return get("s") }, "a"},
		{[]any{"SET", "s", "b", "XX"}, func() string { return get("s") }, "b"},
		{[]any{"SET", "s", "c", "KEEPTTL"}, func() string { return get("s") }, "c"},
		{[]any{"SET", "s", "d", "GET"}, func() string { return get("s") }, "d"},
		{[]any{"GETSET", "s", "e"}, func() string { return get("s") }, "e"},
		{[]any{"SET", "s", "f", "IFEQ", "e", "PX", 2000}, func() string { return get("s") }, "f"},
		{[]any{"PEXPIRE", "s", 1500}, func() string { return strconv.FormatBool(o.PTTL(ctx, "s").Val() <= 1500*time.Millisecond) }, "true"},
		{[]any{"DELIFEQ", "s", "f"}, func() string { return strconv.FormatInt(o.Exists(ctx, "s").Val(), 10) }, "0"},
		{[]any{"SETNX", "n", "a"}, func() string { return get("n") }, "a"},
		{[]any{"APPEND", "n", "b"}, func() string { return get("n") }, "ab"},
		{[]any{"DEL", "n"}, func() string { return strconv.FormatInt(o.Exists(ctx, "n").Val(), 10) }, "0"},
		{[]any{"INCR", "ctr"}, func() string { return get("ctr") }, "1"},
		{[]any{"HSET", "h", "f", "v"}, func() string { return o.HGet(ctx, "h", "f").Val() }, "v"},
		{[]any{"EVAL", "return redis.call('SET', KEYS[1], ARGV[1], 'PX', 2000)", 1, "e", "v"}, func() string { return get("e") }, "v"},
		{[]any{"ZREM", "z", "m"}, func() string { return strconv.FormatInt(o.ZCard(ctx, "z").Val(), 10) }, "0"},
		{[]any{"UNLOCK", "lock", &tok}, func() string { return strconv.FormatInt(o.Exists(ctx, "lock").Val(), 10) }, "0"},
		// Not mirrored: the signal lists and FLUSHDB.
		{[]any{"LPUSH", "signal", "x"}, func() string { return strconv.FormatInt(o.LLen(ctx, "signal").Val(), 10) }, "0"},
		{[]any{"FLUSHDB"}, func() string { return o.HGet(ctx, "h", "f").Val() }, "v"},
	} {
		for i, a := range s.cmd {
			if later, ok := a.(*string); ok { // the token LOCK answered
				s.cmd[i] = *later
			}
		}
		if err := c.Do(ctx, s.cmd...).Err(); err != nil && err != redis.Nil {
			t.Fatalf("%v through the proxy: %v", s.cmd, err)
		}
		if got := s.read(); got != s.want {
			t.Errorf("after %v through the proxy, the old instance shows %q, want %q", s.cmd, got, s.want)
		}
	}
}
