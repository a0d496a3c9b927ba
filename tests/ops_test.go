package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// Operations: the metrics endpoint, health and readiness, SIGHUP reload
// and -check-config (docs/operations.md).

// startProxyWithMetrics starts a proxy with metrics_listen on a free port
// and returns it with the metrics base URL.
func startProxyWithMetrics(t *testing.T, backends []*redisProc, extraHCL string) (*proxyProc, string) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	p := startProxy(t, backends, fmt.Sprintf("metrics_listen = %q\n%s", addr, extraHCL))
	base := "http://" + addr
	testkit.Eventually(t, 5*time.Second, "the metrics server to answer", func() bool {
		code, _ := httpGet(base + "/healthz")
		return code == 200
	})
	return p, base
}

// httpGet returns the status and body of a GET, or 0 when it failed.
func httpGet(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metricValue finds the sample of name whose labels include every
// k="v" in labels, in a text exposition; ok is false when there is none.
func metricValue(body, name string, labels ...string) (float64, bool) {
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, found := strings.Cut(line, " ")
		if !found || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(series, labels[i]+"="+strconv.Quote(labels[i+1])) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		return v, err == nil
	}
	return 0, false
}

func TestOpsMetricsCountTraffic(t *testing.T) {
	rs := startCluster(t, 3)
	p, base := startProxyWithMetrics(t, rs, "")
	ctx := testCtx(t, 30*time.Second)
	c := p.Client(nil)

	const locks = 7
	for i := range locks {
		if _, err := c.Do(ctx, "LOCK", fmt.Sprintf("ops:%d", i), 5000).Result(); err != nil {
			t.Fatalf("LOCK %d: %v", i, err)
		}
	}
	if v, err := c.Do(ctx, "LOCK", "ops:0", 5000).Result(); err != redis.Nil {
		t.Fatalf("LOCK of a held key = %v, %v; want nil", v, err)
	}
	if n, err := c.Do(ctx, "UNLOCK", "ops:1", "not-the-token").Int(); err != nil || n != 0 {
		t.Fatalf("UNLOCK with a wrong token = %d, %v", n, err)
	}
	if ok, err := c.SetNX(ctx, "ops:legacy", "me", 5*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET NX = %v, %v", ok, err)
	}

	code, body := httpGet(base + "/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d: %s", code, body)
	}
	for _, tc := range []struct {
		name    string
		labels  []string
		atLeast float64
	}{
		{"redlock_proxy_lock_operations_total", []string{"command", "lock", "dialect", "native", "result", "ok"}, locks},
		{"redlock_proxy_lock_operations_total", []string{"command", "lock", "dialect", "native", "result", "held"}, 1},
		{"redlock_proxy_lock_operations_total", []string{"command", "unlock", "dialect", "native", "result", "not_held"}, 1},
		{"redlock_proxy_lock_operations_total", []string{"command", "set", "dialect", "legacy", "result", "ok"}, 1},
		{"redlock_proxy_lock_operation_duration_seconds_count", []string{"command", "lock"}, locks + 1},
		{"redlock_proxy_clients_connected", nil, 1},
		{"redlock_proxy_backends_voting", nil, 3},
		{"redlock_proxy_backends_quorum", nil, 2},
		{"redlock_proxy_backend_voting", []string{"backend", rs[0].Addr()}, 1},
		{"redlock_proxy_backend_state", []string{"backend", rs[2].Addr(), "state", "up"}, 1},
		{"redlock_proxy_backend_call_duration_seconds_count", []string{"backend", rs[0].Addr()}, locks},
		{"redlock_proxy_session_locks", nil, 0},
		{"redlock_proxy_lock_waiters", nil, 0},
		{"go_goroutines", nil, 1},
		{"process_resident_memory_bytes", nil, 1},
	} {
		v, ok := metricValue(body, tc.name, tc.labels...)
		if !ok || v < tc.atLeast {
			t.Errorf("%s%v = %v (found %v), want >= %v", tc.name, tc.labels, v, ok, tc.atLeast)
		}
	}
	if v, _ := metricValue(body, "redlock_proxy_backend_quarantine_seconds", "backend", rs[1].Addr()); v != 0 {
		t.Errorf("quarantine seconds of an up backend = %v", v)
	}

	// Counters move with traffic.
	if _, err := c.Do(ctx, "LOCK", "ops:more", 5000).Result(); err != nil {
		t.Fatal(err)
	}
	_, after := httpGet(base + "/metrics")
	was, _ := metricValue(body, "redlock_proxy_lock_operations_total", "command", "lock", "result", "ok")
	now, _ := metricValue(after, "redlock_proxy_lock_operations_total", "command", "lock", "result", "ok")
	if now != was+1 {
		t.Errorf("lock ok counter went from %v to %v after one LOCK", was, now)
	}
	if code, body := httpGet(base + "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
}

func TestOpsReadyzFollowsQuorum(t *testing.T) {
	rs := startCluster(t, 5)
	_, base := startProxyWithMetrics(t, rs, `max_ttl = "1s"
default_ttl = "1s"
health_interval = "100ms"`)

	ready := func() (int, string) { return httpGet(base + "/readyz") }
	if code, body := ready(); code != 200 || !strings.Contains(body, "5 of 5 backends voting") {
		t.Fatalf("/readyz with 5 of 5 up = %d %q", code, body)
	}
	for _, r := range rs[:3] {
		r.Kill()
	}
	testkit.Eventually(t, 10*time.Second, "/readyz to answer 503 with 3 of 5 backends killed", func() bool {
		code, _ := ready()
		return code == 503
	})
	if code, body := ready(); code != 503 || !strings.Contains(body, "2 of 5 backends voting, quorum 3") {
		t.Fatalf("/readyz with 3 of 5 killed = %d %q", code, body)
	}
	_, metrics := httpGet(base + "/metrics")
	if v, ok := metricValue(metrics, "redlock_proxy_backend_state", "backend", rs[0].Addr(), "state", "down"); !ok || v != 1 {
		t.Errorf("killed backend's down state = %v (found %v)", v, ok)
	}

	// They come back empty with a new run_id: quarantined for max_ttl (+
	// drift) from when the proxy sees it, which is after restarting began.
	restarting := time.Now()
	for _, r := range rs[:3] {
		r.Restart()
	}
	restarted := time.Now()
	sawQuarantine := false
	testkit.Eventually(t, 15*time.Second, "/readyz to answer 200 after the backends returned", func() bool {
		if !sawQuarantine {
			// Any of the three: the first one's quarantine may end while
			// the others restart.
			_, m := httpGet(base + "/metrics")
			for _, r := range rs[:3] {
				if v, _ := metricValue(m, "redlock_proxy_backend_state", "backend", r.Addr(), "state", "quarantined"); v == 1 {
					left, _ := metricValue(m, "redlock_proxy_backend_quarantine_seconds", "backend", r.Addr())
					sawQuarantine = sawQuarantine || left > 0 && left <= 1.1
				}
			}
		}
		code, _ := ready()
		return code == 200
	})
	if el := time.Since(restarting); el < time.Second {
		t.Errorf("/readyz was 200 %v after a majority began to restart, before their quarantine (max_ttl 1s) ended", el)
	}
	t.Logf("/readyz 200 again %v after the restarts ended", time.Since(restarted).Round(time.Millisecond))
	if !sawQuarantine {
		t.Errorf("metrics never showed a restarted backend quarantined")
	}
	// The three restarts were staggered; their quarantines end in turn.
	testkit.Eventually(t, 5*time.Second, "all 5 backends voting again", func() bool {
		code, body := ready()
		return code == 200 && strings.Contains(body, "5 of 5 backends voting")
	})
}

// configPath is the -config file the harness wrote for p.
func configPath(t *testing.T, p *proxyProc) string {
	t.Helper()
	for i, a := range p.cmd.Args {
		if a == "-config" && i+1 < len(p.cmd.Args) {
			return p.cmd.Args[i+1]
		}
	}
	t.Fatal("proxy has no -config")
	return ""
}

// badInput sends a protocol error on a new connection and waits until the
// proxy closed it; the proxy logs it at debug level.
func badInput(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$abc\r\n")); err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(c) // the error reply, then EOF
}

func TestOpsSighupReload(t *testing.T) {
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	file := configPath(t, p)
	const debugLine = "client sent bad input"

	// A client connected before the reload, on one raw connection.
	conn, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	ping := func() {
		t.Helper()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			t.Fatalf("PING on the old connection: %v", err)
		}
		if line, err := rd.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("PING on the old connection = %q, %v", line, err)
		}
	}
	ping()

	badInput(t, p.Addr())
	testkit.Eventually(t, 5*time.Second, "the debug line at log_level debug", func() bool {
		return strings.Contains(p.Log(), debugLine)
	})

	rewrite := func(from, to string) {
		t.Helper()
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), from) {
			t.Fatalf("config lacks %q:\n%s", from, src)
		}
		if err := os.WriteFile(file, []byte(strings.Replace(string(src), from, to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(`log_level = "debug"`, "log_level = \"info\"\nmax_clients = 500\nprocs = 1\nmax_wait = \"5s\"")
	p.Signal(syscall.SIGHUP)
	reloaded := []string{
		"config changed: key=log_level old=debug new=info",
		"config changed: key=max_clients",
		"config changed: key=procs old=0 new=1",
		"threads: threads=1",
		"config change refused: restart to apply: key=max_wait running=10s file=5s",
	}
	testkit.Eventually(t, 5*time.Second, fmt.Sprintf("the reload logged as %q", reloaded), func() bool {
		log := p.Log()
		for _, want := range reloaded {
			if !strings.Contains(log, want) {
				return false
			}
		}
		return true
	})
	ping()

	// At info the debug line no longer appears. Its absence cannot be
	// waited for: this bad input is checked at the end, when the one sent
	// back at debug has been logged (exactly one more line, not two).
	before := strings.Count(p.Log(), debugLine)
	badInput(t, p.Addr())

	// A broken file is refused as a whole; the proxy keeps running.
	rewrite(`log_level = "info"`, `log_level = "loud"`)
	p.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 5*time.Second, "the failed reload to be logged", func() bool {
		return strings.Contains(p.Log(), "config reload failed: keeping the running config")
	})
	ping()

	// And back to debug.
	rewrite(`log_level = "loud"`, `log_level = "debug"`)
	p.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 5*time.Second, "the second reload", func() bool {
		return strings.Contains(p.Log(), "config changed: key=log_level old=info new=debug")
	})
	badInput(t, p.Addr())
	testkit.Eventually(t, 5*time.Second, "the debug line back at log_level debug", func() bool {
		return strings.Count(p.Log(), debugLine) > before
	})
	if n := strings.Count(p.Log(), debugLine); n != before+1 {
		t.Errorf("%d debug lines since log_level info, want 1: the one at debug (the bad input at info was logged too)", n-before)
	}
	ping()

	// SIGTERM: a graceful stop, exit 0.
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(10 * time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
	if !strings.Contains(p.Log(), "stopped") {
		t.Errorf("no stopped line in the log")
	}
}

func TestOpsCheckConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	check := func(args ...string) (int, string) {
		t.Helper()
		out, err := exec.Command(proxyBin, args...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}

	good := write("good.hcl", `backends = ["redis://u:s3cret@10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"]
requirepass = "hunter2"
max_ttl = "30s"
metrics_listen = "127.0.0.1:9121"
`)
	code, out := check("-check-config", good)
	if code != 0 || !strings.HasPrefix(out, "config ok\n") {
		t.Fatalf("-check-config good file: exit %d\n%s", code, out)
	}
	for _, want := range []string{"max_ttl=30s", "metrics_listen=127.0.0.1:9121", "requirepass=<set>", "redis://u:xxxxx@10.0.0.1:6379"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") || strings.Contains(out, "s3cret") {
		t.Errorf("output shows a secret:\n%s", out)
	}
	// Flags still apply over the file.
	if code, out := check("-check-config", good, "-max-ttl", "5s"); code != 0 || !strings.Contains(out, "max_ttl=5s") {
		t.Errorf("-check-config with -max-ttl: exit %d\n%s", code, out)
	}

	for _, tc := range []struct{ name, src, want string }{
		{"bound", "backends = [\"a:1\"]\nmax_ttl = \"48h\"\n", "max_ttl = 48h: must be <= 24h"},
		{"unknown key", "backends = [\"a:1\"]\nmetrics_listn = \":1\"\n", `key.hcl:2:1: Unsupported argument: An argument named "metrics_listn" is not expected here. Did you mean "metrics_listen"?`},
		{"metrics_listen", "backends = [\"a:1\"]\nmetrics_listen = \"nope\"\n", "metrics_listen"},
		{"tls files", "backends = [\"a:1\"]\ntls {\n  cert_file = \"" + filepath.Join(dir, "no-cert.pem") + "\"\n  key_file = \"" + filepath.Join(dir, "no-key.pem") + "\"\n}\n", "no-cert.pem"},
	} {
		code, out := check("-check-config", write(tc.name+".hcl", tc.src))
		if code != 2 || !strings.Contains(out, tc.want) || strings.Contains(out, "config ok") {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s", tc.name, code, tc.want, out)
		}
	}
	if code, _ := check("-check-config", filepath.Join(dir, "missing.hcl")); code != 2 {
		t.Errorf("missing file: exit %d, want 2", code)
	}
}
