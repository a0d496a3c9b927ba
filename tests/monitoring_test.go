package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// The monitoring that ships in docs/monitoring: the alert rules checked
// and unit-tested by promtool, the dashboard's queries evaluated by a real
// Prometheus scraping a proxy.

func monitoringFile(t *testing.T, name string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("repo root: %v", err)
	}
	return filepath.Join(root, "docs", "monitoring", name)
}

// TestAlertRules: promtool check rules passes on alerts.yml, and promtool
// test rules runs alerts_test.yml, which has a case for every alert.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus; .ci/deps.sh): alert rules not checked")
	}
	rules, cases := monitoringFile(t, "alerts.yml"), monitoringFile(t, "alerts_test.yml")
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", cases}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Dir(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// A case per alert.
	r, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(cases)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(r), "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: ")
		if !ok {
			continue
		}
		n++
		if !strings.Contains(string(c), "alertname: "+name+"\n") {
			t.Errorf("alerts_test.yml has no case for %s", name)
		}
	}
	if n < 8 {
		t.Errorf("alerts.yml has %d alerts, want at least 8", n)
	}
}

// dashboardQueries reads every target's expression from the dashboard,
// with its variables set as Grafana would for "All".
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(monitoringFile(t, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	qs := map[string]string{}
	vars := strings.NewReplacer("$instance", ".*", "$__rate_interval", "1m")
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q target %s has no expression", p.Title, tg.RefID)
			}
			qs[p.Title+" "+tg.RefID] = vars.Replace(tg.Expr)
		}
	}
	if len(qs) == 0 {
		t.Fatal("dashboard has no query")
	}
	return qs
}

// TestDashboardQueries: every query of the dashboard, evaluated by a real
// Prometheus that scrapes a proxy over real backends, returns a series.
func TestDashboardQueries(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Prometheus")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (Debian package prometheus; .ci/deps.sh): dashboard not checked")
	}
	t.Parallel()
	queries := dashboardQueries(t)
	rs := startCluster(t, 3)
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	p := startProxy(t, rs, fmt.Sprintf("metrics_listen = %q\n", metricsAddr))
	prom := startPrometheus(t, promBin, metricsAddr)

	// Something for every query to see: grants, contention, an error
	// reply, and backend call errors while one backend is stopped.
	c := testkit.Dial(t, p.Addr())
	arr, ok := c.Do("LOCK", "dash:1", "10000").([]any)
	if !ok {
		t.Fatalf("LOCK = %#v", arr)
	}
	c.Do("EXTEND", "dash:1", arr[0].(string), "10000")
	c.Do("LOCK", "dash:1", "10000")
	c.Do("LOCK", "dash:1", "-5")
	c.Do("UNLOCK", "dash:1", arr[0].(string))
	c.Do("SETNX", "dash:hold", "v")
	rs[2].Stop()
	testkit.Eventually(t, 20*time.Second, "a backend call error counted", func() bool {
		c.Do("LOCK", "dash:2", "2000") // its call to the stopped backend times out in 100 ms
		return strings.Contains(metricsText(t, metricsAddr), "redlock_proxy_backend_call_errors_total{")
	})
	rs[2].Cont()

	for name, q := range queries {
		testkit.Eventually(t, 60*time.Second, "a series from "+name+": "+q, func() bool {
			return promSeries(t, prom, q) > 0
		})
	}
}

// startPrometheus runs prometheus on a free loopback port with a storage
// dir of the test's, scraping target every second; it returns its address.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: redlock-proxy\n    static_configs:\n      - targets: [%q]\n", target)
	file := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	out := &syncBuffer{}
	cmd := exec.Command(bin, "--config.file="+file, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	testkit.Eventually(t, 30*time.Second, "prometheus ready", func() bool {
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", out.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return addr
}

// promSeries is how many series the instant query q returns.
func promSeries(t *testing.T, prom, q string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+prom+"/api/v1/query?query="+url.QueryEscape(q), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct{ Result []json.RawMessage }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	return len(r.Data.Result)
}

// metricsText is the proxy's /metrics page.
func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
