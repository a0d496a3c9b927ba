package tests

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// phpLibraries are the files tests/php/locks.php loads: the Debian
// packages php-symfony-lock, php-illuminate-cache (with
// php-illuminate-redis) and php-malkusch-lock.
var phpLibraries = []string{
	"/usr/share/php/Symfony/Component/Lock/autoload.php",
	"/usr/share/php/Illuminate/Cache/autoload.php",
	"/usr/share/php/Illuminate/Redis/autoload.php",
	"/usr/share/php/Malkusch/Lock/autoload.php",
}

// requirePHP fails (or, with REDLOCK_ALLOW_SKIP=1, skips) unless php runs
// with the redis extension and the lock libraries are installed; it
// returns the path of tests/php/locks.php.
func requirePHP(t *testing.T) string {
	t.Helper()
	check := `if (!extension_loaded("redis")) { echo "no redis extension"; exit(1); }
foreach (array_slice($argv, 1) as $f) { if (!is_file($f)) { echo "missing $f"; exit(1); } }`
	out, err := runLimited(20*time.Second, "php", append([]string{"-r", check, "--"}, phpLibraries...)...)
	if err != nil {
		msg := "php with php-redis and the Debian packages php-symfony-lock, php-illuminate-cache, php-illuminate-redis and php-malkusch-lock is needed (`make test` installs them): " + strings.TrimSpace(out) + " " + err.Error()
		if allowSkip() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	p, err := filepath.Abs(filepath.Join("php", "locks.php"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInteropPHPLocks: three PHP lock libraries from Debian over phpredis
// (no handshake, plain EVAL every time), through one proxy whose
// default_ttl is 2 s, so that Laravel's lock without expiry is held well
// beyond it.
//   - Symfony Lock 5.4 RedisStore: a sorted set of holders, scripts with
//     TYPE and TIME run by vote; shared (read) locks too.
//   - Laravel 8 RedisLock: SETNX when seconds is 0 (kept by the proxy:
//     TTL -1), SET EX NX otherwise; its release script is recognised.
//   - malkusch/lock 2.2 PHPRedisMutex: SET ex nx, the recognised release.
func TestInteropPHPLocks(t *testing.T) {
	t.Parallel()
	script := requirePHP(t)
	rs := startCluster(t, 5)
	p := startProxy(t, rs, `default_ttl = "2s"`)
	backends := joinAddrs(rs)
	php := func(lib, mode, name string, rest ...string) []string {
		return append([]string{"php", script, lib, mode, p.Addr(), backends, name}, rest...)
	}
	run := func(t *testing.T, lib string) map[string]any {
		t.Helper()
		a := php(lib, "scenario", "php:"+lib)
		return runJSON(t, 40*time.Second, a[0], a[1:]...)
	}
	contend := func(t *testing.T, lib string, workers, rounds int) {
		runContenders(t, workers, rounds, 60*time.Second, func(i int, startAt string) []string {
			return php(lib, "contend", "php:contended-"+lib, strconv.Itoa(rounds), "20", startAt)
		})
	}
	atLeastQuorum := func(t *testing.T, got map[string]any, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if n := jsonInt(t, got, k); n < interopQuorum {
				t.Errorf("%s = %d: the held lock sits on %d of 5 backends, want at least %d", k, n, n, interopQuorum)
			}
		}
	}

	// The scenarios mostly wait (expiries, a lock held past default_ttl):
	// they run side by side; the contention runs after them.
	t.Run("scenarios", func(t *testing.T) {
		t.Run("symfony", func(t *testing.T) {
			t.Parallel()
			got := run(t, "symfony")
			jsonCheck(t, "Symfony RedisStore", got, map[string]any{
				"acquire":                     true,
				"is_acquired":                 true,
				"other_acquire":               false,
				"release":                     "ok",
				"holders_after_release":       0,
				"exists_after_release":        0,
				"other_acquire_after_release": true,
				"other_release":               "ok",
				"read1":                       true,
				"read2":                       true,
				"write_while_read":            false,
				"write_while_one_read":        false,
				"write_after_reads":           true,
				"short_acquire":               true,
				"short_expired":               true,
				"short_is_expired":            true,
				"next_acquire":                true,
				"stale_refresh":               "LockConflictedException: ",
				"stale_release":               "ok",
			})
			atLeastQuorum(t, got, "holders", "short_holders", "next_holders")
			requireOffQuorum(t, got, "holders_after_release_now")
			if rd := jsonInts(t, got, "readers"); len(rd) != 2 || rd[0] < interopQuorum || rd[1] < interopQuorum {
				t.Errorf("two read locks sit on %v backends, want both at least %d", rd, interopQuorum)
			}
			if n := countAboveMs(jsonInts(t, got, "pttls_after_refresh"), 4000); n < interopQuorum {
				t.Errorf("after refresh(6), backend pttls are %v; want at least %d above 4000 ms", got["pttls_after_refresh"], interopQuorum)
			}
		})
		t.Run("laravel", func(t *testing.T) {
			t.Parallel()
			got := run(t, "laravel")
			jsonCheck(t, "Laravel RedisLock", got, map[string]any{
				"acquire":                    true,
				"ttl":                        -1,
				"other_acquire":              false,
				"ttl_after_5s":               -1,
				"get_after_5s":               true,
				"other_acquire_after_5s":     false,
				"foreign_release":            false,
				"release":                    true,
				"holders_after_release":      0,
				"exists_after_release":       0,
				"second_release":             false,
				"timed_acquire":              true,
				"waiter_block":               "true",
				"timed_release_after_expiry": false,
				"short_block":                "LockTimeoutException: ",
				"exists_after_force_release": 0,
			})
			// Held 5 s, more than twice default_ttl: the proxy kept it.
			atLeastQuorum(t, got, "holders", "holders_after_5s", "timed_holders", "waiter_holders", "waiter_holders_after_stale_release")
			requireOffQuorum(t, got, "holders_after_release_now")
			// SET EX 2 read back at once: 2, or 1 on a slow machine.
			if ttl := jsonInt(t, got, "timed_ttl"); ttl != 1 && ttl != 2 {
				t.Errorf("TTL right after SET EX 2 = %d, want 2 (or 1)", ttl)
			}
			if ms := jsonInt(t, got, "waiter_waited_ms"); ms < 1000 || ms > 7000 {
				t.Errorf("block() behind a 2 s lock waited %d ms, want about 2000", ms)
			}
		})
		t.Run("malkusch", func(t *testing.T) {
			t.Parallel()
			got := run(t, "malkusch")
			jsonCheck(t, "malkusch PHPRedisMutex", got, map[string]any{
				"result":          "inside",
				"other":           "TimeoutException: Timeout of 1 seconds exceeded.",
				"exists_after":    0,
				"overrun_expired": true,
			})
			atLeastQuorum(t, got, "holders")
			// SET ex 6 (timeout + 1) read back while held: 6, or 5.
			if ttl := jsonInt(t, got, "ttl"); ttl != 5 && ttl != 6 {
				t.Errorf("TTL while held = %d, want 6 (or 5)", ttl)
			}
			if s, _ := got["overrun"].(string); !strings.HasPrefix(s, "ExecutionOutsideLockException: ") {
				t.Errorf("a holder past its timeout = %q, want ExecutionOutsideLockException", got["overrun"])
			}
		})
	})

	t.Run("contention-symfony", func(t *testing.T) { contend(t, "symfony", 3, 3) })
	t.Run("contention-laravel", func(t *testing.T) { contend(t, "laravel", 3, 4) })
	t.Run("contention-malkusch", func(t *testing.T) { contend(t, "malkusch", 3, 4) })
}
