package tests

// No one client can stall the tier: a runaway script by vote is stopped at
// script_timeout, and per-client resources on the shared backend
// connections are bounded (docs/operations.md, "Bounds per client").

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// runawayScript runs about 10^10 Lua instructions: its one loop turns
// 900,000 times, within the work a run may do (docs/compatibility.md,
// Loops), but each turn is 4,000 statements long, which no count of
// turns bounds. A backend running it serves nobody else until it is
// stopped (Redis looks for SCRIPT KILL every 100,000 instructions, so
// it is stopped at once). Call it with runawayArgv.
var runawayScript = "local s = 0 for i = 1, tonumber(ARGV[1]) do " + strings.Repeat("s = s + i ", 4000) + "end return s"

var runawayArgv = []any{"900000"}

// TestScriptWorkBounded: loops nested in loops are counted together:
// over a reply (each counted as its cap), and over ARGV numbers (counted
// on each run); a reply longer than the cap fails a script that walks
// it, at the call, with a clear error, and a shorter one is walked.
func TestScriptWorkBounded(t *testing.T) {
	t.Parallel()
	backends := startCluster(t, 3)
	p := startProxy(t, backends, "")
	ctx := testCtx(t, 60*time.Second)
	c := p.Client(nil)
	nested := "local t = redis.call('lrange', KEYS[1], 0, -1) local n = 0\n" +
		"for _, a in ipairs(t) do for _, b in ipairs(t) do n = n + 1 end end return n"
	if err := c.Eval(ctx, nested, []string{"list"}).Err(); err == nil || !strings.Contains(err.Error(), "times in all") {
		t.Fatalf("EVAL of loops nested over a reply = %v, want refused for its work", err)
	}
	byArgs := "local n = 0 for i = 1, tonumber(ARGV[1]) do for j = 1, tonumber(ARGV[2]) do n = n + 1 end end return n"
	if n, err := c.Eval(ctx, byArgs, []string{"k"}, 100, 100).Int(); err != nil || n != 10000 {
		t.Fatalf("EVAL of 100 x 100 turns = %v, %v; want 10000", n, err)
	}
	if err := c.Eval(ctx, byArgs, []string{"k"}, 2000, 2000).Err(); err == nil || !strings.Contains(err.Error(), "times in all") {
		t.Fatalf("EVAL of 2000 x 2000 turns = %v, want refused for its work", err)
	}
	walk := "local n = 0 for _, v in ipairs(redis.call('lrange', KEYS[1], 0, -1)) do n = n + 1 end return n"
	for _, size := range []int{5000, 20000} {
		key := fmt.Sprintf("list%d", size)
		for i := 0; i < size; i += 1000 {
			vals := make([]any, 1000)
			for j := range vals {
				vals[j] = i + j
			}
			if err := c.RPush(ctx, key, vals...).Err(); err != nil {
				t.Fatalf("RPUSH: %v", err)
			}
		}
		n, err := c.Eval(ctx, walk, []string{key}).Int()
		switch {
		case size <= 10000 && (err != nil || n != size):
			t.Errorf("walk of %d elements = %v, %v", size, n, err)
		case size > 10000 && (err == nil || !strings.Contains(err.Error(), "more than 10000 elements")):
			t.Errorf("walk of %d elements = %v, %v; want the reply cap's error", size, n, err)
		}
	}
}

// TestRunawayScriptStopped: a script by vote that never ends is stopped
// on every backend at script_timeout (SCRIPT KILL), its client gets a
// clear error, and a LOCK through another proxy, sent while it runs, is
// granted; the backends serve again and later LOCKs through both proxies
// are granted.
func TestRunawayScriptStopped(t *testing.T) {
	backends := startCluster(t, 3)
	const hcl = `script_timeout = "300ms"`
	other := startProxy(t, backends, hcl)
	runner := startProxy(t, backends, hcl+"\nnode_timeout = \"100ms\"")
	ctx := testCtx(t, 60*time.Second)
	rc := runner.Client(&redis.Options{ReadTimeout: 20 * time.Second})
	oc := other.Client(&redis.Options{ReadTimeout: 20 * time.Second})
	mustLock(ctx, t, oc, "warm", 10000)
	rconn := rc.Conn()
	defer rconn.Close()

	type result struct {
		err     error
		elapsed time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		err := rconn.Eval(ctx, runawayScript, []string{"runaway"}, runawayArgv...).Err()
		done <- result{err, time.Since(start)}
	}()
	// The script runs once a backend stops answering at once, or answers
	// -BUSY (past lua-time-limit, which the proxy sets to script_timeout).
	// A loaded machine may look only after the script was stopped: the
	// answer then arrives first, and is checked below all the same.
	var answered *result
	testkit.Eventually(t, 10*time.Second, "a backend busy with the script, or the script's answer", func() bool {
		select {
		case r := <-done:
			answered = &r
			return true
		default:
		}
		return busyRaw(backends[0].Addr(), 20*time.Millisecond)
	})
	// A client of the other proxy retrying LOCK: no backend serves anyone
	// while the script runs (Redis runs one thing at a time), so its
	// attempts fail until the script is stopped, then one is granted.
	granted := make(chan time.Duration, 1)
	go func() {
		for ctx.Err() == nil {
			if _, err := lock(ctx, t, oc, "meanwhile", 10000); err == nil {
				granted <- time.Since(start)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	var r result
	if answered != nil {
		r = *answered
	} else {
		r = <-done
	}
	t.Logf("runaway script answered after %v: %v", r.elapsed, r.err)
	if r.err == nil || !strings.Contains(r.err.Error(), "script timed out") {
		t.Fatalf("EVAL of a runaway script = %v, want the script timeout error", r.err)
	}
	// Redis reads no other connection, SCRIPT KILL included, until a
	// script has run for its busy threshold (5 s unless the proxy set it):
	// an answer well before that shows the proxy's bound stopped it.
	if r.elapsed > 4*time.Second {
		t.Fatalf("runaway script stopped after %v: the backends' busy threshold, not script_timeout, stopped it", r.elapsed)
	}
	// SCRIPT KILL's OK comes before the script stops: Redis stops it at
	// its next hook check, so a PING at once may still meet BUSY.
	for _, b := range backends {
		var err error
		testkit.Eventually(t, 5*time.Second, "backend "+b.Addr()+" answers after the script was stopped", func() bool {
			err = b.Client().Ping(ctx).Err()
			return err == nil
		})
	}
	select {
	case at := <-granted:
		t.Logf("LOCK through the other proxy granted %v after the script started", at)
	case <-time.After(10 * time.Second):
		t.Fatal("no LOCK through the other proxy was granted within 10s of the script being stopped")
	}
	mustLock(ctx, t, oc, "after-other", 10000)
	testkit.Eventually(t, 5*time.Second, "a LOCK through the script's proxy", func() bool {
		_, err := lock(ctx, t, rc, "after-runner", 10000)
		return err == nil
	})
	// It cools down: the same text is refused from any connection, and
	// its connection runs no script by vote, while another's does.
	if err := rc.Eval(ctx, runawayScript, []string{"runaway"}, runawayArgv...).Err(); err == nil || !strings.Contains(err.Error(), "ran past script_timeout and is refused for") {
		t.Errorf("the runaway script again = %v, want refused while it cools down", err)
	}
	write := "redis.call('hset', KEYS[1], 'a', 1) return 1"
	if err := rconn.Eval(ctx, write, []string{"h"}).Err(); err == nil || !strings.Contains(err.Error(), "a script of this connection ran past script_timeout") {
		t.Errorf("another script from the runaway's connection = %v, want refused while it cools down", err)
	}
	if err := oc.Eval(ctx, write, []string{"h"}).Err(); err != nil {
		t.Errorf("the script from another client: %v", err)
	}
}

// TestTrackingPrefixFlood: one BCAST watcher stays connected while short-
// lived clients each try to add 500 prefixes (refused: over the bound
// per connection), then add as many as one connection may, one more
// (refused), and leave. Their prefixes are released when they leave, so
// every client's allowed share is absorbed although together they hold
// more than the bound for all clients; lock cycles through another proxy
// keep succeeding, the refusals are counted, and the watcher is still
// told of changes under its prefix.
func TestTrackingPrefixFlood(t *testing.T) {
	backends := startCluster(t, 3)
	flooded, metrics := startProxyWithMetrics(t, backends, "")
	locker := startProxy(t, backends, "")
	ctx := testCtx(t, 120*time.Second)

	watcher := testkit.Dial(t, flooded.Addr())
	watcher.Do("HELLO", "3")
	doWant(t, watcher, "OK", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "watch:")

	// Lock cycles through the other proxy for as long as the flood lasts.
	stop := make(chan struct{})
	type tally struct{ ok, all int }
	cycles := make(chan tally, 1)
	var started atomic.Int64
	go func() {
		c := locker.Client(nil)
		var n tally
		defer func() { cycles <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			n.all++
			started.Add(1)
			key := "cycle:" + strconv.Itoa(i)
			if r, err := lock(ctx, t, c, key, 10000); err == nil {
				if c.Do(ctx, "UNLOCK", key, r.Token).Err() == nil {
					n.ok++
				}
			}
		}
	}()

	const clients = 12 // 12 × 32 prefixes: more than the 256 for all clients
	for i := range clients {
		c := testkit.Dial(t, flooded.Addr())
		c.Do("HELLO", "3")
		flood := []string{"CLIENT", "TRACKING", "ON", "BCAST"}
		for j := range 500 { // 1004 arguments: within max_args
			flood = append(flood, "PREFIX", fmt.Sprintf("flood:%d:%d:", i, j))
		}
		if err, _ := c.Do(flood...).(testkit.Error); !strings.Contains(string(err), "too many tracking prefixes") {
			t.Fatalf("client %d: 500 prefixes at once answered %v, want the per-connection limit", i, err)
		}
		for j := 0; j < 32; j += 8 {
			add := []string{"CLIENT", "TRACKING", "ON", "BCAST"}
			for k := j; k < j+8; k++ {
				add = append(add, "PREFIX", fmt.Sprintf("flood:%d:%d:", i, k))
			}
			// Absorbed once the earlier clients' prefixes are released.
			testkit.Eventually(t, 10*time.Second, fmt.Sprintf("client %d's prefixes %d–%d absorbed", i, j, j+7), func() bool {
				return c.Do(add...) == "OK"
			})
		}
		if err, _ := c.Do("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", fmt.Sprintf("flood:%d:x:", i)).(testkit.Error); !strings.Contains(string(err), "too many tracking prefixes") {
			t.Fatalf("client %d: a 33rd prefix answered %v, want the per-connection limit", i, err)
		}
		c.Close()
	}
	// However the machine shares its time between the flood and the
	// cycles, the check covers at least 20 of them.
	testkit.Eventually(t, 30*time.Second, "20 lock cycles beside the flood", func() bool { return started.Load() > 20 })
	close(stop)
	n := <-cycles
	t.Logf("lock cycles through the other proxy during the flood: %d of %d succeeded", n.ok, n.all)
	if n.all < 20 || n.ok*100 < n.all*99 {
		t.Fatalf("lock cycles during the flood: %d of %d succeeded, want at least 20 and 99%%", n.ok, n.all)
	}

	_, body := httpGet(metrics + "/metrics")
	if v, _ := metricValue(body, "redlock_proxy_limit_refusals_total", "limit", "tracking_prefixes_per_client"); v < 2*clients {
		t.Fatalf("refusals per client counted %v, want at least %d", v, 2*clients)
	}
	w := locker.Client(nil)
	if err := w.Set(ctx, "watch:1", "x", 0).Err(); err != nil {
		t.Fatalf("SET watch:1: %v", err)
	}
	expect(t, watcher, invalidate("watch:1"), "the watcher's prefix after the flood")
}

// TestLocksBesideClientWork: client work that occupies backend
// connections without occupying the backends (a blocking pop waiting on
// every backend, BCAST tracking, subscriptions) has connections of its
// own, so lock cycles through the same proxy are not queued behind it.
func TestLocksBesideClientWork(t *testing.T) {
	backends := startCluster(t, 3)
	p := startProxy(t, backends, "")
	ctx := testCtx(t, 60*time.Second)

	popper := testkit.Dial(t, p.Addr())
	popper.SendCmd("BLPOP", "never-pushed", "0")
	testkit.Eventually(t, 10*time.Second, "the pop blocked on every backend", func() bool {
		for _, b := range backends {
			info, err := b.Client().Info(ctx, "clients").Result()
			if err != nil || !strings.Contains(info, "blocked_clients:1") {
				return false
			}
		}
		return true
	})
	watcher := testkit.Dial(t, p.Addr())
	watcher.Do("HELLO", "3")
	bcast := []string{"CLIENT", "TRACKING", "ON", "BCAST"}
	for i := range 32 {
		bcast = append(bcast, "PREFIX", fmt.Sprintf("w:%d:", i))
	}
	doWant(t, watcher, "OK", bcast...)
	subscriber := testkit.Dial(t, p.Addr())
	sub := []string{"SUBSCRIBE"}
	for i := range 1000 {
		sub = append(sub, fmt.Sprintf("ch:%d", i))
	}
	subscriber.SendCmd(sub...)
	for range 1000 {
		subscriber.ReadReply()
	}

	c := p.Client(nil)
	for i := range 50 {
		key := "beside:" + strconv.Itoa(i)
		r := mustLock(ctx, t, c, key, 10000)
		if n := unlock(ctx, t, c, key, r.Token); n != 1 {
			t.Fatalf("UNLOCK %s = %d, want 1", key, n)
		}
	}
	if _, err := popper.TryReadReply(50 * time.Millisecond); err == nil {
		t.Fatal("the blocking pop answered, want it still blocked")
	}
}

// busyRaw reports a Redis at addr busy: it answers PING with -BUSY, or
// not within timeout.
func busyRaw(addr string, timeout time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return true
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return true
	}
	buf := make([]byte, 256)
	n, _ := c.Read(buf)
	return n == 0 || bytes.HasPrefix(buf[:n], []byte("-BUSY"))
}
