package tests

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInteropNodeRedlock4: node-redlock 4 over ioredis 5 (EVALSHA, then
// EVAL on NOSCRIPT; one client, so its quorum is 1).
func TestInteropNodeRedlock4(t *testing.T) {
	t.Parallel()
	dir := requireNode(t)
	rs, p, _ := interopSetup(t)
	script := filepath.Join(dir, "redlock4.js")
	backends := joinAddrs(rs)

	t.Run("scenario", func(t *testing.T) {
		got := runJSON(t, 30*time.Second, "node", script, "scenario", p.Addr(), backends, "node4:scenario")
		jsonCheck(t, "node-redlock 4", got, map[string]any{
			"holders_after_unlock":       0,
			"exists_after_unlock":        0,
			"unlock":                     "ok",
			"multi_c_exists":             0,
			"multi_unlock":               "ok",
			"multi_holders_after_unlock": []any{0, 0},
			"short_exists_after_expiry":  0,
			"short_expired":              true,
		})
		for _, k := range []string{"holders", "holders_after_second", "holders_after_extend", "short_holders", "again_holders"} {
			if n := jsonInt(t, got, k); n < interopQuorum {
				t.Errorf("%s = %d: the held lock sits on %d of 5 backends, want at least %d", k, n, n, interopQuorum)
			}
		}
		requireOffQuorum(t, got, "holders_after_unlock_now", "multi_holders_after_unlock_now")
		mh := jsonInts(t, got, "multi_holders")
		if len(mh) != 2 || mh[0] < interopQuorum || mh[1] < interopQuorum {
			t.Errorf("redlock.lock([a, b]) holders per key = %v, want both at least %d", mh, interopQuorum)
		}
		for _, k := range []string{"second_lock", "multi_overlap"} {
			if s, _ := got[k].(string); !strings.HasPrefix(s, "LockError: Exceeded 0 attempts") {
				t.Errorf("%s = %q, want LockError: Exceeded 0 attempts to lock the resource", k, got[k])
			}
		}
		for _, k := range []string{"second_unlock", "unlock_after_expiry", "stale_unlock"} {
			if s, _ := got[k].(string); !strings.HasPrefix(s, "LockError: Unable to fully release the lock") {
				t.Errorf("%s = %q, want LockError: Unable to fully release the lock", k, got[k])
			}
		}
		if s, _ := got["stale_extend"].(string); !strings.HasPrefix(s, "LockError: Exceeded") {
			t.Errorf("extend with a stale value = %q, want a LockError", got["stale_extend"])
		}
		if n := countAboveMs(jsonInts(t, got, "pttls_after_extend"), 3000); n < interopQuorum {
			t.Errorf("after lock.extend(5000), backend pttls are %v; want at least %d above 3000 ms", got["pttls_after_extend"], interopQuorum)
		}
		if n := countAboveMs(jsonInts(t, got, "multi_pttls_after_extend"), 3000); n < interopQuorum {
			t.Errorf("after extend(4000) of [a, b], backend pttls of b are %v; want at least %d above 3000 ms", got["multi_pttls_after_extend"], interopQuorum)
		}
		if errs, _ := got["client_errors"].([]any); len(errs) != 0 {
			t.Errorf("node-redlock reported client errors (the proxy answered an error): %v", errs)
		}
	})

	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 5, 6
		runContenders(t, workers, rounds, 60*time.Second, func(i int, startAt string) []string {
			return []string{"node", script, "contend", p.Addr(), backends, "node4:contended", strconv.Itoa(rounds), "20", startAt}
		})
	})
}

// TestInteropNodeRedis6: node-redis 6, which opens every connection with
// HELLO 3 and has no RESP2 fallback: SET NX PX, GET, SET IFEQ, DELIFEQ
// and DELEX.
func TestInteropNodeRedis6(t *testing.T) {
	t.Parallel()
	dir := requireNode(t)
	rs, p, _ := interopSetup(t)
	script := filepath.Join(dir, "noderedis.js")
	backends := joinAddrs(rs)

	t.Run("scenario", func(t *testing.T) {
		got := runJSON(t, 30*time.Second, "node", script, "scenario", p.Addr(), backends, "noderedis:scenario")
		v, _ := got["v"].(string)
		jsonCheck(t, "node-redis 6", got, map[string]any{
			"ping":                  "PONG",
			"set_nx":                "OK",
			"set_nx_again":          nil,
			"set_nx_legacy_opts":    nil,
			"get":                   v,
			"exists":                1,
			"renew_wrong":           nil,
			"renew":                 "OK",
			"delifeq_wrong":         0,
			"delifeq":               1,
			"holders_after_release": 0,
			"get_after_release":     nil,
			"pttl_after_release":    -2,
			"set_w":                 "OK",
			"delex_wrong":           0,
			"delex":                 1,
			"exists_after_delex":    0,
			"set_short":             "OK",
			"short_expired":         true,
			"get_after_expiry":      nil,
			"delifeq_after_expiry":  0,
			"renew_after_expiry":    nil,
			"exists_after_expiry":   0,
		})
		requireOffQuorum(t, got, "holders_after_release_now")
		// It negotiated RESP3: the HELLO 3 reply is a map with proto 3 and
		// CLIENT INFO says resp=3.
		hello, ok := got["hello"].(map[string]any)
		if !ok || normJSON(hello["proto"]) != int64(3) {
			t.Errorf("HELLO 3 through node-redis = %#v, want a map with proto 3", got["hello"])
		}
		if info, _ := got["client_info"].(string); !strings.Contains(info, "resp=3") {
			t.Errorf("CLIENT INFO through node-redis = %q, want resp=3", got["client_info"])
		}
		for _, k := range []string{"holders", "holders_after_wrong"} {
			if n := jsonInt(t, got, k); n < interopQuorum {
				t.Errorf("%s = %d: the held lock sits on %d of 5 backends, want at least %d", k, n, n, interopQuorum)
			}
		}
		if pttl := jsonInt(t, got, "pttl"); pttl <= 0 || pttl > 5000 {
			t.Errorf("PTTL after SET NX PX 5000 = %d, want in (0, 5000]", pttl)
		}
		if n := countAboveMs(jsonInts(t, got, "pttls_after_renew"), 6000); n < interopQuorum {
			t.Errorf("after SET k v PX 8000 IFEQ v, backend pttls are %v; want at least %d above 6000 ms", got["pttls_after_renew"], interopQuorum)
		}
	})

	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 4, 6
		runContenders(t, workers, rounds, 60*time.Second, func(i int, startAt string) []string {
			return []string{"node", script, "contend", p.Addr(), backends, "noderedis:contended", strconv.Itoa(rounds), "20", startAt}
		})
	})
}

// TestInteropSesamecareRedlock: @sesamecare-oss/redlock 1.4 (node-redlock
// 5's successor) over ioredis 5. Its scripts begin with
// redis.pcall("SELECT", tonumber(ARGV[1])), the client's db; with db 0
// they are recognised as node-redlock's multi-key acquire, extend and
// release and run as quorum operations. First use on a socket is EVAL,
// later ones EVALSHA.
func TestInteropSesamecareRedlock(t *testing.T) {
	t.Parallel()
	dir := requireNode(t)
	rs, p, _ := interopSetup(t)
	script := filepath.Join(dir, "sesame.js")
	backends := joinAddrs(rs)
	const lockedOut = "ExecutionError: The operation was unable to achieve a quorum during its retry window. [ResourceLockedError: The operation was applied to: 0 of "

	t.Run("scenario", func(t *testing.T) {
		got := runJSON(t, 40*time.Second, "node", script, "scenario", p.Addr(), backends, "sesame:scenario")
		jsonCheck(t, "@sesamecare-oss/redlock", got, map[string]any{
			"release":                     "ok",
			"holders_after_release":       0,
			"exists_after_release":        0,
			"multi_c_exists":              0,
			"multi_release":               "ok",
			"multi_holders_after_release": []any{0, 0},
			"using":                       "held",
			"exists_after_using":          0,
			"short_expired":               true,
			"db1_exists":                  0,
		})
		for _, k := range []string{"holders", "holders_after_second", "using_min_holders", "short_holders", "again_holders"} {
			if n := jsonInt(t, got, k); n < interopQuorum {
				t.Errorf("%s = %d: the held lock sits on %d of 5 backends, want at least %d", k, n, n, interopQuorum)
			}
		}
		requireOffQuorum(t, got, "holders_after_release_now", "multi_holders_after_release_now")
		mh := jsonInts(t, got, "multi_holders")
		if len(mh) != 2 || mh[0] < interopQuorum || mh[1] < interopQuorum {
			t.Errorf("acquire([a, b]) holders per key = %v, want both at least %d", mh, interopQuorum)
		}
		for _, k := range []string{"second_acquire", "second_release", "multi_overlap", "release_after_expiry", "stale_extend", "stale_release"} {
			if s, _ := got[k].(string); !strings.HasPrefix(s, lockedOut) {
				t.Errorf("%s = %q, want %s…", k, got[k], lockedOut)
			}
		}
		if n := countAboveMs(jsonInts(t, got, "pttls_after_extend"), 3000); n < interopQuorum {
			t.Errorf("after extend(5000), backend pttls are %v; want at least %d above 3000 ms", got["pttls_after_extend"], interopQuorum)
		}
		if n := countAboveMs(jsonInts(t, got, "multi_pttls_after_extend"), 3000); n < interopQuorum {
			t.Errorf("after extend(4000) of [a, b], backend pttls of b are %v; want at least %d above 3000 ms", got["multi_pttls_after_extend"], interopQuorum)
		}
		// A client configured with db 1 is refused: its SELECT reaches
		// another database.
		if s, _ := got["db1_acquire"].(string); !strings.Contains(s, `SELECT with ARGV[1] = "1" reaches another database`) {
			t.Errorf("acquire with db: 1 = %q, want the proxy's refusal of SELECT 1", got["db1_acquire"])
		}
	})

	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 4, 5
		runContenders(t, workers, rounds, 60*time.Second, func(i int, startAt string) []string {
			return []string{"node", script, "contend", p.Addr(), backends, "sesame:contended", strconv.Itoa(rounds), "20", startAt}
		})
	})

	// A backend URL that selects database 1: the scripts' SELECT 0 would
	// miss the proxy's keys there, so the proxy refuses them, saying why.
	t.Run("backend-in-another-db", func(t *testing.T) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		args := []string{"-listen", addr, "-max-ttl", "5s"}
		for i, r := range rs {
			u := r.URL()
			if i == 0 {
				u += "/1"
			}
			args = append(args, "-backend", u)
		}
		other := startProxyArgs(t, addr, args...)
		got := runJSON(t, 30*time.Second, "node", script, "otherdb", other.Addr(), backends, "sesame:otherdb")
		want := fmt.Sprintf("backend %s uses database 1", rs[0].Addr())
		if s, _ := got["acquire"].(string); !strings.Contains(s, "SELECT 0 reaches database 0 of every backend, but "+want) {
			t.Errorf("acquire through a proxy with a backend in database 1 = %q, want a refusal naming %q", got["acquire"], want)
		}
	})
}

// TestInteropRedisSemaphore: redis-semaphore 5.8 over ioredis 5. Mutex is
// SET NX PX plus refresh and release scripts (recognised); Semaphore and
// MultiSemaphore keep their holders in a sorted set scored by the client's
// clock, acquired and refreshed by scripts that run by vote, and Semaphore
// releases with a bare ZREM (by vote too).
func TestInteropRedisSemaphore(t *testing.T) {
	t.Parallel()
	dir := requireNode(t)
	rs, p, _ := interopSetup(t)
	script := filepath.Join(dir, "semaphore.js")
	backends := joinAddrs(rs)

	// The subtests run side by side: the scenario mostly waits (refreshes
	// over 3 s, two expiries).
	t.Run("scenario", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, 60*time.Second, "node", script, "scenario", p.Addr(), backends, "rsem:scenario")
		jsonCheck(t, "redis-semaphore", got, map[string]any{
			"mutex_other":                 false,
			"mutex_holders_after_release": 0,
			"mutex_exists_after_release":  0,
			"short_expired":               true,
			"next_acquire":                true,
			"stale_refresh":               false,
			"sem_third":                   false,
			"sem_zcard":                   2,
			"sem_s1_after_release":        0,
			"sem_third_after_release":     true,
			"sem_zcard_after":             2,
			"sem_zcard_empty":             0,
			"sem_short_expired":           true,
			"sem_stale_refresh":           false,
			"sem_exists_after":            0,
			"multi_second":                false,
			"multi_holders_after_release": 0,
			"multi_second_after_release":  true,
			"multi_zcard_empty":           0,
			"lost":                        []any{},
		})
		requireOffQuorum(t, got, "mutex_holders_after_release_now", "sem_s1_after_release_now", "multi_holders_after_release_now")
		// Held across refreshes beyond the 2 s lockTimeout: still on a
		// quorum, with a ttl the last refresh set.
		for _, k := range []string{"mutex_holders", "mutex_holders_after_3s", "short_holders", "next_holders_after_stale_release", "sem_short_holders", "multi_holders_after_3s"} {
			if n := jsonInt(t, got, k); n < interopQuorum {
				t.Errorf("%s = %d: the holder sits on %d of 5 backends, want at least %d", k, n, n, interopQuorum)
			}
		}
		for _, k := range []string{"sem_holders", "multi_holders"} {
			if hs := jsonInts(t, got, k); len(hs) != 2 || hs[0] < interopQuorum || hs[1] < interopQuorum {
				t.Errorf("%s = %v, want both at least %d", k, hs, interopQuorum)
			}
		}
		if n := countAboveMs(jsonInts(t, got, "mutex_pttls"), 0); n < interopQuorum {
			t.Errorf("after 3 s of refreshes the mutex's backend pttls are %v; want at least %d positive", got["mutex_pttls"], interopQuorum)
		}
	})

	for _, kind := range []string{"mutex", "semaphore", "multi"} {
		t.Run("contention-"+kind, func(t *testing.T) {
			t.Parallel()
			const workers, rounds = 3, 3
			runContenders(t, workers, rounds, 60*time.Second, func(i int, startAt string) []string {
				return []string{"node", script, "contend", p.Addr(), backends, kind, "rsem:contended-" + kind, strconv.Itoa(rounds), "20", startAt}
			})
		})
	}
}
