package tests

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// tokenRE is what a proxy-made token looks like: ≥ 22 URL-safe characters
// (128 bits in base64url is 22 characters).
var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_~.-]{22,}$`)

// lockReply is a decoded successful LOCK reply.
type lockReply struct {
	Token    string
	Validity int64
	Fence    any
}

// lock sends LOCK key ttl [extra…] through c. It returns redis.Nil when the
// lock is held, the server's error for an error reply, and fails the test
// when a success reply has the wrong shape.
func lock(ctx context.Context, t testing.TB, c *redis.Client, key string, ttl int, extra ...any) (lockReply, error) {
	t.Helper()
	args := append([]any{"LOCK", key, ttl}, extra...)
	v, err := c.Do(ctx, args...).Slice()
	if err != nil {
		return lockReply{}, err
	}
	return checkLockReply(t, v, ttl), nil
}

func checkLockReply(t testing.TB, v []any, ttl int) lockReply {
	t.Helper()
	if len(v) != 3 {
		t.Fatalf("LOCK reply = %#v, want an array of 3", v)
	}
	tok, ok := v[0].(string)
	if !ok || !tokenRE.MatchString(tok) {
		t.Fatalf("LOCK token = %#v, want a URL-safe string of at least 22 characters", v[0])
	}
	validity, ok := v[1].(int64)
	if !ok || validity <= 0 || validity > int64(ttl) {
		t.Fatalf("LOCK validity = %#v, want an integer in (0, %d]", v[1], ttl)
	}
	if v[2] != nil {
		t.Fatalf("LOCK fence = %#v, want null without FENCE", v[2])
	}
	return lockReply{Token: tok, Validity: validity, Fence: v[2]}
}

// mustLock locks key and fails the test unless it succeeds.
func mustLock(ctx context.Context, t testing.TB, c *redis.Client, key string, ttl int, extra ...any) lockReply {
	t.Helper()
	r, err := lock(ctx, t, c, key, ttl, extra...)
	if err != nil {
		t.Fatalf("LOCK %s %d %v: %v, want success", key, ttl, extra, err)
	}
	return r
}

// unlock sends UNLOCK key token and returns its integer reply.
func unlock(ctx context.Context, t testing.TB, c *redis.Client, key, token string) int64 {
	t.Helper()
	n, err := c.Do(ctx, "UNLOCK", key, token).Int64()
	if err != nil {
		t.Fatalf("UNLOCK %s %s: %v", key, token, err)
	}
	return n
}

// holders counts the backends on which key currently holds value.
func holders(ctx context.Context, t testing.TB, rs []*redisProc, key, value string) int {
	t.Helper()
	n := 0
	for _, r := range rs {
		c := r.Client()
		got, err := c.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET %q on backend %s: %v", key, r.Addr(), err)
		}
		if err == nil && got == value {
			n++
		}
	}
	return n
}

// TestLockUnlockExtend: the native commands against five real backends.
func TestLockUnlockExtend(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	c := p.Client(nil)
	other := p.Client(nil)
	ctx := testCtx(t, 30*time.Second)
	const key = "orders:42"

	first := mustLock(ctx, t, c, key, 10000)
	t.Logf("LOCK %s 10000 -> token %q validity %d", key, first.Token, first.Validity)
	if n := holders(ctx, t, rs, key, first.Token); n < 3 {
		t.Fatalf("after LOCK the key holds the token on %d of 5 backends, want at least 3", n)
	}

	if _, err := lock(ctx, t, other, key, 10000); !errors.Is(err, redis.Nil) {
		t.Fatalf("second LOCK %s on a held key: err = %v, want null (redis.Nil)", key, err)
	}
	if _, err := lock(ctx, t, c, key, 10000); !errors.Is(err, redis.Nil) {
		t.Fatalf("LOCK %s again on the same connection: err = %v, want null (redis.Nil)", key, err)
	}
	if n := unlock(ctx, t, other, key, "not-the-token-AAAAAAAAAAAA"); n != 0 {
		t.Fatalf("UNLOCK with a wrong token = %d, want 0", n)
	}
	if n := holders(ctx, t, rs, key, first.Token); n < 3 {
		t.Fatalf("after UNLOCK with a wrong token the key holds the token on %d backends, want at least 3", n)
	}
	if n := unlock(ctx, t, c, key, first.Token); n != 1 {
		t.Fatalf("UNLOCK with the right token = %d, want 1", n)
	}
	// UNLOCK answers at the quorum: at most a minority may still hold the
	// token for a moment, and none shortly after.
	if n := holders(ctx, t, rs, key, first.Token); n > 2 {
		t.Fatalf("after UNLOCK the key holds the token on %d backends, want at most 2", n)
	}
	waitKeyGone(ctx, t, rs, key)
	if n := unlock(ctx, t, c, key, first.Token); n != 0 {
		t.Fatalf("second UNLOCK with the same token = %d, want 0", n)
	}

	second := mustLock(ctx, t, other, key, 10000)
	if second.Token == first.Token {
		t.Fatalf("two acquisitions got the same token %q", first.Token)
	}
	newValidity, err := other.Do(ctx, "EXTEND", key, second.Token, 30000).Int64()
	if err != nil || newValidity <= 0 || newValidity > 30000 {
		t.Fatalf("EXTEND %s <token> 30000 = %d, %v; want a validity in (0, 30000]", key, newValidity, err)
	}
	raised := 0
	for _, r := range rs {
		pttl, err := r.Client().PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL on backend %s: %v", r.Addr(), err)
		}
		if pttl > 10000 {
			raised++
		}
	}
	if raised < 3 {
		t.Fatalf("after EXTEND to 30000 ms, PTTL > 10000 on %d backends, want at least 3", raised)
	}
	if _, err := other.Do(ctx, "EXTEND", key, "wrong-token-AAAAAAAAAAAAAA", 30000).Int64(); !errors.Is(err, redis.Nil) {
		t.Fatalf("EXTEND with a wrong token: err = %v, want null", err)
	}
	if n := unlock(ctx, t, other, key, second.Token); n != 1 {
		t.Fatalf("UNLOCK after EXTEND = %d, want 1", n)
	}
	// UNLOCK answers at the quorum: at most a minority may still hold the
	// token for a moment, and none shortly after.
	if n := holders(ctx, t, rs, key, second.Token); n > 2 {
		t.Fatalf("after UNLOCK the key holds the token on %d backends, want at most 2", n)
	}
	waitKeyGone(ctx, t, rs, key)
	if v, err := other.Do(ctx, "EXTEND", key, second.Token, 30000).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("EXTEND after UNLOCK = %#v, %v; want null", v, err)
	}
}

// TestLockExpires: a lock whose ttl ran out can be taken by someone else, and
// the old token no longer unlocks or extends.
func TestLockExpires(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	c := p.Client(nil)
	ctx := testCtx(t, 30*time.Second)

	// 2 s, not shorter: each backend call gets 5% of the ttl. The test
	// waits until the key has left every backend, not for a time.
	old := mustLock(ctx, t, c, "short", 2000)
	waitKeyGone(ctx, t, rs, "short")
	fresh := mustLock(ctx, t, c, "short", 10000)
	if n := unlock(ctx, t, c, "short", old.Token); n != 0 {
		t.Fatalf("UNLOCK with an expired token = %d, want 0", n)
	}
	if v, err := c.Do(ctx, "EXTEND", "short", old.Token, 10000).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("EXTEND with an expired token = %#v, %v; want null", v, err)
	}
	if n := holders(ctx, t, rs, "short", fresh.Token); n < 3 {
		t.Fatalf("the new holder's key is on %d backends after the old token's UNLOCK/EXTEND, want at least 3", n)
	}
	if n := unlock(ctx, t, c, "short", fresh.Token); n != 1 {
		t.Fatalf("UNLOCK by the new holder = %d, want 1", n)
	}
}

// TestLockRace: 16 clients race for one key, round after round; exactly one
// wins each round and its lock survives the losers' rollbacks.
func TestLockRace(t *testing.T) {
	t.Parallel()
	const (
		racers = 16
		rounds = 20
		key    = "contended"
	)
	rs := startCluster(t, 5)
	// The harness's generous node_timeout (1 s): this test is about mutual
	// exclusion, and 16 cold connections per backend under -race on a
	// small CI box are slow.
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 60*time.Second)
	clients := make([]*redis.Client, racers)
	for i := range clients {
		clients[i] = p.Client(&redis.Options{PoolSize: 1})
		if err := clients[i].Ping(ctx).Err(); err != nil {
			t.Fatalf("client %d PING: %v", i, err)
		}
	}

	zeroRounds := 0
	for round := 0; round < rounds; round++ {
		var (
			start   = make(chan struct{})
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []int
			tokens  = make([]string, racers)
			errs    []string
		)
		for i := range clients {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				v, err := clients[i].Do(ctx, "LOCK", key, 10000).Slice()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, redis.Nil):
				case err != nil:
					errs = append(errs, fmt.Sprintf("client %d: %v", i, err))
				case len(v) != 3:
					errs = append(errs, fmt.Sprintf("client %d: reply %#v", i, v))
				default:
					tok, _ := v[0].(string)
					tokens[i] = tok
					winners = append(winners, i)
				}
			}(i)
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: LOCK errors: %s", round, strings.Join(errs, "; "))
		}
		if len(winners) > 1 {
			t.Fatalf("round %d: %d clients hold the lock at once: %v", round, len(winners), winners)
		}
		if len(winners) == 0 {
			zeroRounds++
			var votes []string
			for _, r := range rs {
				v, _ := r.Client().Get(ctx, key).Result()
				votes = append(votes, fmt.Sprintf("%.6s", v))
			}
			t.Logf("round %d: per-backend holders right after the race (may be partly rolled back): %q", round, votes)
			t.Errorf("round %d: no client of %d got the lock (split vote not resolved by the proxy)", round, racers)
			// Let the losers' rollbacks and the ttl clear the key for the next round.
			waitKeyGone(ctx, t, rs, key)
			continue
		}
		w := winners[0]
		if n := holders(ctx, t, rs, key, tokens[w]); n < 3 {
			t.Fatalf("round %d: winner's token on %d backends after the race, want at least 3 (a loser's rollback deleted it?)", round, n)
		}
		if n := unlock(ctx, t, clients[w], key, tokens[w]); n != 1 {
			t.Fatalf("round %d: winner's UNLOCK = %d, want 1", round, n)
		}
		waitKeyGone(ctx, t, rs, key)
	}
	if zeroRounds > 0 {
		t.Logf("%d of %d rounds had no winner", zeroRounds, rounds)
	}
}

// waitKeyGone waits until no backend holds key (deleted by a release or a
// rollback in flight, or expired), for at most 12s.
func waitKeyGone(ctx context.Context, t testing.TB, rs []*redisProc, key string) {
	t.Helper()
	testkit.Eventually(t, 12*time.Second, fmt.Sprintf("key %q to leave every backend", key), func() bool {
		for _, r := range rs {
			n, err := r.Client().Exists(ctx, key).Result()
			if err != nil {
				t.Fatalf("EXISTS on %s: %v", r.Addr(), err)
			}
			if n != 0 {
				return false
			}
		}
		return true
	})
}

// TestQuorumWithDeadBackends: with 2 of 5 backends killed locks still work;
// with 3 killed LOCK fails fast with NOQUORUM. Each backend call has 250 ms
// (5% of the 5 s ttl): room for the live backends on a loaded machine, and
// still well under the 1 s that NOQUORUM must take at most.
func TestQuorumWithDeadBackends(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	c := p.Client(nil)
	ctx := testCtx(t, 30*time.Second)

	mustLock(ctx, t, c, "warmup", 5000)
	rs[0].Kill()
	rs[3].Kill()
	for i := 0; i < 3; i++ {
		key := "k" + strconv.Itoa(i)
		r := mustLock(ctx, t, c, key, 5000)
		if n := holders(ctx, t, []*redisProc{rs[1], rs[2], rs[4]}, key, r.Token); n != 3 {
			t.Fatalf("with 2 backends dead the key is on %d of the 3 live ones, want 3", n)
		}
		if _, err := lock(ctx, t, c, key, 5000); !errors.Is(err, redis.Nil) {
			t.Fatalf("LOCK on a held key with 2 backends dead: %v, want null", err)
		}
		if n := unlock(ctx, t, c, key, r.Token); n != 1 {
			t.Fatalf("UNLOCK with 2 backends dead = %d, want 1", n)
		}
	}

	rs[1].Kill()
	for i := 0; i < 3; i++ {
		start := time.Now()
		_, err := lock(ctx, t, c, "nq", 5000)
		elapsed := time.Since(start)
		t.Logf("LOCK with 3 of 5 backends dead: %v after %v", err, elapsed)
		if err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM ") {
			for _, r := range rs {
				t.Logf("backend %s answers PING: %v", r.Addr(), pingRaw(r.Addr(), 200*time.Millisecond) == nil)
			}
			t.Fatalf("LOCK with 3 of 5 backends dead: err = %v, want an error starting with \"NOQUORUM \"", err)
		}
		if elapsed > time.Second {
			t.Fatalf("NOQUORUM took %v, want well under 1s with 250 ms per backend call", elapsed)
		}
	}
	if !p.Alive() {
		t.Fatal("proxy exited")
	}
}

// TestStalledBackend: a SIGSTOPped backend does not slow LOCK down: the
// quorum of the other four decides. The calls to the stopped backend end at
// their deadline, min(node_timeout, 5% of the ttl) = 2 s here; a LOCK that
// waited for it would take that long, so a median under 1 s (generous for
// a loaded machine) shows it did not.
func TestStalledBackend(t *testing.T) {
	t.Parallel()
	const ttl = 40000 // ms: 5% is 2 s, so the node_timeout decides
	rs := startCluster(t, 5)
	p := startProxy(t, rs, `node_timeout = "2s"`)
	c := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)

	mustLock(ctx, t, c, "warmup", ttl)
	rs[2].Stop()
	defer rs[2].Cont()

	const cycles = 20
	lat := make([]time.Duration, 0, cycles)
	for i := 0; i < cycles; i++ {
		key := "stall" + strconv.Itoa(i%3)
		start := time.Now()
		r := mustLock(ctx, t, c, key, ttl)
		lat = append(lat, time.Since(start))
		if n := unlock(ctx, t, c, key, r.Token); n != 1 {
			t.Fatalf("UNLOCK with one backend stopped = %d, want 1", n)
		}
	}
	sorted := append([]time.Duration(nil), lat...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	median := sorted[len(sorted)/2]
	t.Logf("LOCK latency with one backend stopped: median %v, max %v, all %v", median, sorted[len(sorted)-1], lat)
	if median >= time.Second {
		t.Fatalf("median LOCK latency with one backend SIGSTOPped = %v, want < 1s (the stopped backend's calls take 2s)", median)
	}
	rs[2].Cont()
	r := mustLock(ctx, t, c, "after-cont", 10000)
	if n := unlock(ctx, t, c, "after-cont", r.Token); n != 1 {
		t.Fatalf("UNLOCK after SIGCONT = %d, want 1", n)
	}
}

// TestLockArgumentErrors: ttl bounds, non-numeric numbers, unknown options
// and arity, with the exact Redis-style error texts.
func TestLockArgumentErrors(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	// -max-ttl alone must be enough to start (DESIGN §6: "Tests use a small
	// -max-ttl"); the default default_ttl (30s) must not make it refuse.
	t.Run("max-ttl flag alone", func(t *testing.T) {
		p := startProxy(t, rs, "", "-max-ttl", "5s")
		ctx := testCtx(t, 10*time.Second)
		c := p.Client(nil)
		if err := c.Do(ctx, "LOCK", "k", 6000).Err(); err == nil || err.Error() != "ERR ttl 6000 is out of range: must be between 10 and 5000 ms" {
			t.Fatalf("LOCK k 6000 with -max-ttl 5s: %v", err)
		}
	})
	p := startProxy(t, rs, `default_ttl = "5s"`, "-max-ttl", "5s")
	ctx := testCtx(t, 30*time.Second)
	for _, proto := range []int{2, 3} {
		c := p.Client(&redis.Options{Protocol: proto})
		cases := []struct {
			args []any
			want string
		}{
			{[]any{"LOCK", "k", 6000}, "ERR ttl 6000 is out of range: must be between 10 and 5000 ms"},
			{[]any{"LOCK", "k", 1}, "ERR ttl 1 is out of range: must be between 10 and 5000 ms"},
			{[]any{"LOCK", "k", 0}, "ERR ttl 0 is out of range: must be between 10 and 5000 ms"},
			{[]any{"LOCK", "k", -5}, "ERR ttl -5 is out of range: must be between 10 and 5000 ms"},
			{[]any{"LOCK", "k", "abc"}, "ERR value is not an integer or out of range"},
			{[]any{"LOCK", "k", "1.5"}, "ERR value is not an integer or out of range"},
			{[]any{"LOCK", "k", "99999999999999999999999"}, "ERR value is not an integer or out of range"},
			{[]any{"LOCK", "k", 1000, "WAIT", "soon"}, "ERR value is not an integer or out of range"},
			{[]any{"LOCK", "k", 1000, "BOGUS"}, "ERR syntax error"},
			{[]any{"LOCK", "k", 1000, "WAIT"}, "ERR syntax error"},
			{[]any{"LOCK", "k"}, "ERR wrong number of arguments for 'lock' command"},
			{[]any{"lock"}, "ERR wrong number of arguments for 'lock' command"},
			{[]any{"UNLOCK", "k"}, "ERR wrong number of arguments for 'unlock' command"},
			{[]any{"UNLOCK", "k", "t", "x"}, "ERR wrong number of arguments for 'unlock' command"},
			{[]any{"EXTEND", "k", "t"}, "ERR wrong number of arguments for 'extend' command"},
			{[]any{"EXTEND", "k", "t", "abc"}, "ERR value is not an integer or out of range"},
			{[]any{"EXTEND", "k", "t", 6000}, "ERR ttl 6000 is out of range: must be between 10 and 5000 ms"},
		}
		for _, tc := range cases {
			v, err := c.Do(ctx, tc.args...).Result()
			if err == nil || err.Error() != tc.want {
				t.Errorf("RESP%d %v = %#v, %v; want error %q", proto, tc.args, v, err, tc.want)
			}
		}
		// Neither bad request took the lock; the bounds themselves are allowed.
		r := mustLock(ctx, t, c, "k", 5000)
		if n := unlock(ctx, t, c, "k", r.Token); n != 1 {
			t.Fatalf("UNLOCK = %d, want 1", n)
		}
	}
}

// TestLockWait: WAIT retries until the holder lets go, and gives up with null
// when it does not; max_wait caps it.
func TestLockWait(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, `max_wait = "2s"`)
	holder := p.Client(nil)
	waiter := p.Client(nil)
	info := testkit.Dial(t, p.Addr())
	hello3(t, info)
	ctx := testCtx(t, 30*time.Second)

	h := mustLock(ctx, t, holder, "w", 10000)
	start := time.Now()
	_, err := lock(ctx, t, waiter, "w", 10000, "WAIT", 300)
	elapsed := time.Since(start)
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("LOCK w 10000 WAIT 300 on a held key: %v, want null", err)
	}
	t.Logf("WAIT 300 gave up after %v", elapsed)
	if elapsed < 250*time.Millisecond || elapsed > 2*time.Second {
		t.Fatalf("WAIT 300 returned null after %v, want about 300ms", elapsed)
	}

	start = time.Now()
	_, err = lock(ctx, t, waiter, "w", 10000, "WAIT", 60000)
	elapsed = time.Since(start)
	t.Logf("WAIT 60000 with max_wait 2s gave up after %v", elapsed)
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("LOCK w 10000 WAIT 60000 on a held key: %v, want null", err)
	}
	if elapsed > 4*time.Second {
		t.Fatalf("WAIT 60000 took %v, want it capped by max_wait 2s", elapsed)
	}

	// The holder unlocks once the waiter is queued: the waiter gets it.
	type reply struct {
		v   []any
		err error
	}
	waited := make(chan reply, 1)
	start = time.Now()
	go func() {
		v, err := waiter.Do(ctx, "LOCK", "w", 10000, "WAIT", 2000).Slice()
		waited <- reply{v, err}
	}()
	waitersQueued(t, info, "w", 1)
	if n := unlock(ctx, t, holder, "w", h.Token); n != 1 {
		t.Fatalf("holder's UNLOCK = %d, want 1", n)
	}
	w := <-waited
	if w.err != nil {
		t.Fatalf("LOCK w 10000 WAIT 2000 while the holder unlocks: %v, want the lock", w.err)
	}
	got := checkLockReply(t, w.v, 10000)
	t.Logf("WAIT 2000 got the lock after %v", time.Since(start))
	if n := unlock(ctx, t, waiter, "w", got.Token); n != 1 {
		t.Fatalf("UNLOCK = %d, want 1", n)
	}
}

// TestBackendRestart: a backend that restarts empty neither breaks locking
// nor frees a lock that the other backends still hold.
func TestBackendRestart(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	c := p.Client(nil)
	ctx := testCtx(t, 30*time.Second)

	held := mustLock(ctx, t, c, "survivor", 20000)
	rs[0].Restart()
	if _, err := lock(ctx, t, c, "survivor", 10000); !errors.Is(err, redis.Nil) {
		t.Fatalf("LOCK on a key held on 4 of 5 backends after one restarted empty: %v, want null", err)
	}
	r := mustLock(ctx, t, c, "fresh", 10000)
	if n := unlock(ctx, t, c, "fresh", r.Token); n != 1 {
		t.Fatalf("UNLOCK after a backend restart = %d, want 1", n)
	}
	if n := unlock(ctx, t, c, "survivor", held.Token); n != 1 {
		t.Fatalf("UNLOCK of the lock taken before the restart = %d, want 1", n)
	}
}

// TestNoQuorumStalled: with 3 of 5 backends SIGSTOPped, LOCK and UNLOCK
// answer NOQUORUM within a small multiple of node_timeout instead of hanging.
// node_timeout is 250 ms: room for the live backends on a loaded machine,
// and a quarter of the 1 s bound.
func TestNoQuorumStalled(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, `node_timeout = "250ms"`)
	c := p.Client(nil)
	ctx := testCtx(t, 30*time.Second)

	held := mustLock(ctx, t, c, "stalled", 10000)
	for _, r := range rs[:3] {
		r.Stop()
		defer r.Cont()
	}
	start := time.Now()
	_, err := lock(ctx, t, c, "nq-stalled", 10000)
	elapsed := time.Since(start)
	t.Logf("LOCK with 3 of 5 backends stopped: %v after %v", err, elapsed)
	if err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM ") {
		t.Fatalf("LOCK with 3 of 5 backends stopped: err = %v, want an error starting with \"NOQUORUM \"", err)
	}
	if elapsed > time.Second {
		t.Fatalf("NOQUORUM with stopped backends took %v, want about node_timeout (250ms)", elapsed)
	}
	start = time.Now()
	n, err := c.Do(ctx, "UNLOCK", "stalled", held.Token).Int64()
	elapsed = time.Since(start)
	t.Logf("UNLOCK with 3 of 5 backends stopped: %d, %v after %v", n, err, elapsed)
	if err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM ") {
		t.Fatalf("UNLOCK with 3 of 5 backends stopped = %d, %v; want an error starting with \"NOQUORUM \" (not 0: the lock may still be held)", n, err)
	}
	if elapsed > time.Second {
		t.Fatalf("UNLOCK NOQUORUM took %v", elapsed)
	}
	for _, r := range rs[:3] {
		r.Cont()
	}
	// Back to a quorum. A NOQUORUM UNLOCK's outcome is unknown: its deletes
	// were already on their way to the stopped backends and run when they
	// resume, so the lock is either still held (UNLOCK → 1) or released
	// (UNLOCK → 0). Either way it is not held afterwards: LOCK succeeds.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err = c.Do(ctx, "UNLOCK", "stalled", held.Token).Int64()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || n > 1 {
		t.Fatalf("UNLOCK after SIGCONT = %d, %v; want 1 or 0", n, err)
	}
	again := mustLock(ctx, t, c, "stalled", 10000)
	if k := holders(ctx, t, rs, "stalled", again.Token); k < 3 {
		t.Fatalf("relocked key held on %d backends", k)
	}
}

// TestRollbackOnFailedAcquire: a LOCK that loses (a foreign value holds the
// key on 3 of 5 backends) removes its own keys from the 2 nodes that granted
// it, and never touches the foreign ones.
func TestRollbackOnFailedAcquire(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	c := p.Client(nil)
	ctx := testCtx(t, 30*time.Second)

	for _, r := range rs[:3] {
		if err := r.Client().Set(ctx, "contested", "foreign", 30*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lock(ctx, t, c, "contested", 10000); !errors.Is(err, redis.Nil) {
		t.Fatalf("LOCK with the key held on 3 of 5 backends: %v, want null", err)
	}
	// The rollback runs in the background: wait for it (a bound, not a pause).
	waitKeyGone(ctx, t, rs[3:], "contested")
	if n := holders(ctx, t, rs, "contested", "foreign"); n != 3 {
		t.Fatalf("the foreign value is on %d backends after the failed LOCK, want 3 untouched", n)
	}

	// A token that holds only on a minority is not "held": UNLOCK says 0.
	for _, r := range rs[3:] {
		if err := r.Client().Set(ctx, "minority", "tok-minority-AAAAAAAAAAAA", 30*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n := unlock(ctx, t, c, "minority", "tok-minority-AAAAAAAAAAAA"); n != 0 {
		t.Fatalf("UNLOCK of a token held on 2 of 5 backends = %d, want 0", n)
	}
}
