package tests

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// redisPyScript reads one of redis-py's Lock scripts from the installed
// library, so the test sends the exact bytes a redis-py app sends.
func redisPyScript(t *testing.T, attr string) string {
	t.Helper()
	requirePythonRedis(t)
	out, err := runLimited(20*time.Second, debianPython, "-c",
		"import redis.lock, sys; sys.stdout.write(redis.lock.Lock."+attr+")")
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("read redis.lock.Lock.%s from %s: %v %q", attr, debianPython, err, out)
	}
	return out
}

// TestInteropRedisCLI: an app that scripts its lock with redis-cli, the
// SET NX PX acquire and redis-py's own release and extend scripts sent
// with EVAL.
func TestInteropRedisCLI(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not on PATH: run `make test`, which installs it")
	}
	release := redisPyScript(t, "LUA_RELEASE_SCRIPT")
	extend := redisPyScript(t, "LUA_EXTEND_SCRIPT")
	_, p, bs := interopSetup(t)
	ctx := testCtx(t, 60*time.Second)

	// cli runs one redis-cli command and returns its output without the
	// trailing newline (redis-cli prints nil as an empty line when stdout
	// is not a terminal).
	cli := func(args ...string) (string, error) {
		out, err := runLimited(10*time.Second, "redis-cli", append([]string{"-h", "127.0.0.1", "-p", p.Port()}, args...)...)
		return strings.TrimRight(out, "\n"), err
	}
	mustCLI := func(want string, args ...string) {
		t.Helper()
		out, err := cli(args...)
		if err != nil || out != want {
			t.Fatalf("redis-cli %s printed %q (%v), want %q", showArgs(args), out, err, want)
		}
	}

	const key = "cli:lock"
	mustCLI("OK", "SET", key, "v1", "NX", "PX", "5000")
	requireQuorum(ctx, t, bs, key, "v1", "after SET NX PX")
	mustCLI("", "SET", key, "v2", "NX", "PX", "5000")
	mustCLI("", "set", key, "v2", "px", "5000", "nx")
	mustCLI("v1", "GET", key)
	requireQuorum(ctx, t, bs, key, "v1", "after a refused SET NX")

	// Extend with redis-py's extend script, replacing the ttl (ARGV[3]="1").
	mustCLI("0", "EVAL", extend, "1", key, "v2", "20000", "1")
	mustCLI("1", "EVAL", extend, "1", key, "v1", "20000", "1")
	if n := countAbove(backendPTTLs(ctx, t, bs, key), 10*time.Second); n < interopQuorum {
		t.Fatalf("after the extend script set a 20s ttl, %d backends have a ttl above 10s, want at least %d", n, interopQuorum)
	}

	// Release: wrong token 0 and the key stays; right token 1; again 0.
	mustCLI("0", "EVAL", release, "1", key, "v2")
	requireQuorum(ctx, t, bs, key, "v1", "after the release script with another token")
	mustCLI("1", "EVAL", release, "1", key, "v1")
	requireNowhere(ctx, t, bs, key, "v1", "after the release script")
	mustCLI("0", "EVAL", release, "1", key, "v1")
	mustCLI("", "GET", key)
	mustCLI("-2", "PTTL", key)

	// Release after expiry answers 0.
	mustCLI("OK", "SET", key, "short", "PX", "2000", "NX")
	waitExpired(ctx, t, bs, key)
	mustCLI("0", "EVAL", release, "1", key, "short")
	mustCLI("0", "EVAL", extend, "1", key, "short", "5000", "0")
	mustCLI("0", "EXISTS", key)

	// EVALSHA of the release script's SHA after EVAL works; an unknown SHA
	// is NOSCRIPT; an unknown script is refused with the proxy's error.
	sha, err := cli("SCRIPT", "LOAD", release)
	if err != nil || sha != "c3f8721cbb97f72bc19e972846bd7aaf91901658" {
		t.Fatalf("redis-cli SCRIPT LOAD <redis-py release script> printed %q (%v), want c3f8721cbb97f72bc19e972846bd7aaf91901658", sha, err)
	}
	mustCLI("OK", "SET", key, "v3", "NX", "EX", "5")
	mustCLI("1", "EVALSHA", sha, "1", key, "v3")
	out, _ := cli("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "1", key, "v3")
	if !strings.Contains(out, "NOSCRIPT No matching script. Please use EVAL.") {
		t.Fatalf("redis-cli EVALSHA <unknown sha> printed %q, want NOSCRIPT No matching script. Please use EVAL.", out)
	}
	out, _ = cli("EVAL", "return redis.call('KEYS', '*')", "0")
	if !strings.Contains(out, "ERR redlock-proxy cannot run this script") || !strings.Contains(out, "line 1") {
		t.Fatalf("redis-cli EVAL of a script that scans the keyspace printed %q, want an error naming the line and why", out)
	}

	// Contention: workers each loop SET NX PX until they win, extend with
	// the script, and release with the script.
	const workers, rounds = 4, 4
	const ckey = "cli:contended"
	var flag inUse
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				tok := fmt.Sprintf("cli-worker-%d-round-%d", w, r)
				deadline := time.Now().Add(30 * time.Second)
				for {
					out, err := cli("SET", ckey, tok, "NX", "PX", "5000")
					if err == nil && out == "OK" {
						break
					}
					if (err != nil || out != "") || time.Now().After(deadline) {
						t.Errorf("worker %d: redis-cli SET %s %s NX PX 5000 printed %q (%v), want OK or nil", w, ckey, tok, out, err)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				if !flag.enter() {
					t.Errorf("worker %d acquired %s while another worker was inside", w, ckey)
				}
				if n, err := backendHolders(ctx, bs, ckey, tok); err != nil || n < interopQuorum {
					t.Errorf("worker %d: held %s sits on %d backends (%v), want at least %d", w, ckey, n, err, interopQuorum)
				}
				if out, err := cli("EVAL", extend, "1", ckey, tok, "5000", "1"); err != nil || out != "1" {
					t.Errorf("worker %d: EVAL <redis-py extend> while held printed %q (%v), want 1", w, out, err)
				}
				time.Sleep(10 * time.Millisecond)
				flag.leave()
				if out, err := cli("EVAL", release, "1", ckey, tok); err != nil || out != "1" {
					t.Errorf("worker %d: EVAL <redis-py release> while held printed %q (%v), want 1", w, out, err)
				}
			}
		}(w)
	}
	wg.Wait()
	if v := flag.violations.Load(); v != 0 {
		t.Fatalf("%d of %d acquisitions found another worker inside", v, flag.entries.Load())
	}
	if e := flag.entries.Load(); e != workers*rounds {
		t.Fatalf("%d acquisitions, want %d", e, workers*rounds)
	}
}

// showArgs prints a command line with long arguments (scripts) shortened.
func showArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 40 {
			a = strings.Join(strings.Fields(a), " ")
			if len(a) > 40 {
				a = a[:40] + "…"
			}
		}
		out[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(out, " ")
}
