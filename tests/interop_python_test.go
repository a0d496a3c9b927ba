package tests

import (
	"strconv"
	"testing"
	"time"
)

// TestInteropRedisPyLock: redis-py's Lock (Debian's python3-redis 4.3,
// RESP2, scripts by EVALSHA then SCRIPT LOAD) in worker processes.
func TestInteropRedisPyLock(t *testing.T) {
	t.Parallel()
	requirePythonRedis(t)
	rs, p, _ := interopSetup(t)
	worker := pythonScript(t, "lock_worker.py")
	backends := joinAddrs(rs)

	t.Run("scenario", func(t *testing.T) {
		got := runJSON(t, 30*time.Second, debianPython, worker, "scenario", p.Addr(), backends, "py:scenario")
		jsonCheck(t, "redis-py Lock", got, map[string]any{
			"acquire":                  true,
			"owned":                    true,
			"locked":                   true,
			"other_nonblocking":        false,
			"other_owned":              false,
			"other_blocking_short":     false,
			"extend":                   true,
			"extend_replace":           true,
			"reacquire":                true,
			"owned_after_release":      false,
			"locked_after_release":     false,
			"holders_after_release":    0,
			"second_release":           "LockError",
			"thief_acquire":            true,
			"stale_release":            "LockNotOwnedError",
			"holder_acquire":           true,
			"waiter_acquire":           true,
			"short_acquire":            true,
			"short_expired":            true,
			"short_owned_after_expiry": false,
			"extend_after_expiry":      "LockNotOwnedError",
			"reacquire_after_expiry":   "LockNotOwnedError",
			"release_after_expiry":     "LockNotOwnedError",
			"with_exists_after":        0,
		})
		requireOffQuorum(t, got, "holders_after_release_now")
		if got["get"] != got["token"] {
			t.Errorf("GET through the proxy = %v, want the lock's token %v", got["get"], got["token"])
		}
		for _, k := range []string{"holders", "thief_holders", "waiter_holders", "with_holders"} {
			if n := jsonInt(t, got, k); n < interopQuorum {
				t.Errorf("%s = %d: the held lock sits on %d of 5 backends, want at least %d", k, n, n, interopQuorum)
			}
		}
		if ms := jsonInt(t, got, "other_blocking_short_waited_ms"); ms < 150 {
			t.Errorf("a blocking acquire with blocking_timeout=0.3 gave up after %d ms, want about 300", ms)
		}
		// The waiter blocked until the 2s holder expired (bounds generous
		// for a loaded machine; it gives up at 8s).
		if ms := jsonInt(t, got, "waiter_waited_ms"); ms < 1000 || ms > 6000 {
			t.Errorf("blocking acquire behind a 2s holder waited %d ms, want about 2000", ms)
		}
		// extend(3) adds 3s to the remaining ~2s.
		if n := countAboveMs(jsonInts(t, got, "pttls_after_extend"), 3500); n < interopQuorum {
			t.Errorf("after extend(3) on a 2s lock, backend pttls are %v; want at least %d above 3500 ms", got["pttls_after_extend"], interopQuorum)
		}
		// PTTL through the proxy is the smallest among the backends that
		// agree on the value; one still lagging behind the extend counts.
		if pttl := jsonInt(t, got, "proxy_pttl_after_extend"); pttl <= 0 || pttl > 5000 {
			t.Errorf("PTTL through the proxy after extend(3) = %d, want in (0, 5000]", pttl)
		}
		// extend(3, replace_ttl=True) sets 3s (lowers the ttl from about
		// 5s) on a quorum; the proxy answers at a quorum, so the others may
		// lag.
		pt := jsonInts(t, got, "pttls_after_extend_replace")
		if n := countAboveMs(pt, 2000) - countAboveMs(pt, 3000); n < interopQuorum {
			t.Errorf("after extend(3, replace_ttl=True), backend pttls are %v; want at least %d in (2000, 3000] ms", pt, interopQuorum)
		}
		// reacquire() resets the ttl to timeout=2s.
		if n := countAboveMs(jsonInts(t, got, "pttls_after_reacquire"), 1500); n < interopQuorum {
			t.Errorf("after reacquire(), backend pttls are %v; want at least %d above 1500 ms", got["pttls_after_reacquire"], interopQuorum)
		}
	})

	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 5, 6
		runContenders(t, workers, rounds, 60*time.Second, func(i int, startAt string) []string {
			return []string{debianPython, worker, "contend", p.Addr(), backends, "py:contended", strconv.Itoa(rounds), "20", startAt}
		})
	})
}

// TestInteropRedisPyLockNoExpiry: redis-py's Lock with its default
// timeout=None sends SET k token NX with no expiry. Through a proxy whose
// default_ttl is 2 s the lock stays held for 5 s with TTL -1 (the proxy
// renews a lease while the key holds the token), until its release script
// deletes it; a blocking waiter gets it then.
func TestInteropRedisPyLockNoExpiry(t *testing.T) {
	t.Parallel()
	requirePythonRedis(t)
	rs := startCluster(t, 5)
	p := startProxy(t, rs, `default_ttl = "2s"`)
	worker := pythonScript(t, "lock_worker.py")
	backends := joinAddrs(rs)

	t.Run("scenario", func(t *testing.T) {
		got := runJSON(t, 30*time.Second, debianPython, worker, "noexpiry", p.Addr(), backends, "pyne:scenario")
		jsonCheck(t, "redis-py Lock(timeout=None)", got, map[string]any{
			"acquire":               true,
			"ttl":                   -1,
			"pttl":                  -1,
			"other_nonblocking":     false,
			"ttl_after_5s":          -1,
			"owned_after_5s":        true,
			"locked_after_5s":       true,
			"other_after_5s":        false,
			"extend":                "LockError",
			"reacquire":             "LockError",
			"owned_after_release":   false,
			"holders_after_release": 0,
			"exists_after_release":  0,
			"holder_acquire":        true,
			"waiter_acquire":        true,
			"waiter_ttl":            -1,
			"with_exists_after":     0,
		})
		requireOffQuorum(t, got, "holders_after_release_now")
		for _, k := range []string{"holders", "holders_after_5s", "waiter_holders", "with_holders"} {
			if n := jsonInt(t, got, k); n < interopQuorum {
				t.Errorf("%s = %d: the held lock sits on %d of 5 backends, want at least %d", k, n, n, interopQuorum)
			}
		}
		// On the backends the key has the proxy's lease: at most
		// default_ttl, renewed.
		if pt := jsonInts(t, got, "backend_pttls"); countAboveMs(pt, 0)-countAboveMs(pt, 2000) < interopQuorum {
			t.Errorf("backend pttls of a lock without expiry are %v; want at least %d in (0, 2000] ms (the lease)", pt, interopQuorum)
		}
		if ms := jsonInt(t, got, "waiter_waited_ms"); ms < 500 || ms > 6000 {
			t.Errorf("a waiter behind a holder that released after 1 s waited %d ms", ms)
		}
	})

	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 4, 4
		runContenders(t, workers, rounds, 60*time.Second, func(i int, startAt string) []string {
			return []string{debianPython, worker, "contend-noexpiry", p.Addr(), backends, "pyne:contended", strconv.Itoa(rounds), "20", startAt}
		})
	})
}

// TestInteropRedisPyTransactions: redis-py's pipeline() (MULTI … EXEC by
// default) carrying the legacy SETNX + EXPIRE lock, and transaction()'s
// check-and-set (WATCH, GET, MULTI, SET, EXEC), through the proxy.
func TestInteropRedisPyTransactions(t *testing.T) {
	t.Parallel()
	requirePythonRedis(t)
	rs, p, _ := interopSetup(t)
	worker := pythonScript(t, "lock_worker.py")
	got := runJSON(t, 30*time.Second, debianPython, worker, "pipeline", p.Addr(), joinAddrs(rs), "py:tx")
	jsonCheck(t, "redis-py transactions", got, map[string]any{
		"first":   []any{true, true, "tok"},
		"second":  []any{false, "tok"},
		"counter": float64(3),
	})
	if ttl := jsonInt(t, got, "ttl"); ttl < 1 || ttl > 10 {
		t.Errorf("TTL after the transaction's EXPIRE 10 = %d, want 1..10", ttl)
	}
	if n := jsonInt(t, got, "token_on"); n < interopQuorum {
		t.Errorf("the token sits on %d of 5 backends, want at least %d", n, interopQuorum)
	}
}
