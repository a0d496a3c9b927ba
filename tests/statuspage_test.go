package tests

import (
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestStatusPageInChromium renders the status page in headless Chromium
// against a proxy over five real redis-servers, one stopped (SIGSTOP) and
// one restarted (a new run_id: quarantined), reads the DOM (states,
// counts, events) and keeps a screenshot in the test's temp dir; a second
// load after the stopped backend resumes and a lock is released shows
// both.
func TestStatusPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts headless Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (Debian package chromium; .ci/deps.sh): status page not rendered")
	}
	t.Parallel()
	rs := startCluster(t, 5)
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	p := startProxy(t, rs, fmt.Sprintf(`metrics_listen  = %q
max_ttl         = "30s"
health_interval = "200ms"
node_timeout    = "250ms"
`, metricsAddr))
	stopped, restarted := rs[3].Addr(), rs[4].Addr()

	c := testkit.Dial(t, p.Addr())
	arr, ok := c.Do("LOCK", "secret:1", "30000").([]any)
	if !ok {
		t.Fatalf("LOCK = %#v", arr)
	}
	token := arr[0].(string)
	if _, ok := c.Do("LOCK", "secret:2", "30000", "SESSION").([]any); !ok {
		t.Fatal("LOCK SESSION refused")
	}
	oldRunID := backendOf(t, pageStatus(t, metricsAddr), restarted).RunID

	rs[3].Stop()
	rs[4].Restart()
	testkit.Eventually(t, 30*time.Second, "one backend down and one quarantined", func() bool {
		st := pageStatus(t, metricsAddr)
		return backendOf(t, st, stopped).State == "down" && backendOf(t, st, restarted).State == "quarantined"
	})

	dir := t.TempDir()
	dom := renderPage(t, chromium, metricsAddr, filepath.Join(dir, "status-1.png"))
	newRunID := backendOf(t, pageStatus(t, metricsAddr), restarted).RunID
	if newRunID == oldRunID || newRunID == "" {
		t.Fatalf("run_id %q after the restart, %q before", newRunID, oldRunID)
	}
	for _, want := range []string{
		`data-ready="true" data-voting="3" data-quorum="3"`,
		`data-addr="` + stopped + `" data-state="down"`,
		`data-addr="` + restarted + `" data-state="quarantined" data-run-id="` + newRunID + `"`,
		`s left</span>`, // the quarantine's time left
		`<td id="locks-granted">2</td>`, `<td id="locks-held">2</td>`, `<td id="locks-sessions">1</td>`,
		`data-self="true"`,
		`data-kind="backend-down" data-subject="` + stopped + `"`,
		`data-kind="quarantined" data-subject="` + restarted + `"`,
		`<code>(hidden)</code>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("first load: the DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, "secret:") {
		t.Errorf("first load shows a key name without status_keys")
	}

	// A change: the stopped backend resumes, a lock is released.
	rs[3].Cont()
	if v := c.Do("UNLOCK", "secret:1", token); v != int64(1) {
		t.Fatalf("UNLOCK = %#v", v)
	}
	testkit.Eventually(t, 30*time.Second, "the stopped backend voting again", func() bool {
		return backendOf(t, pageStatus(t, metricsAddr), stopped).State == "voting"
	})
	dom = renderPage(t, chromium, metricsAddr, filepath.Join(dir, "status-2.png"))
	for _, want := range []string{
		`data-ready="true" data-voting="4"`,
		`data-addr="` + stopped + `" data-state="voting"`,
		`data-kind="backend-up" data-subject="` + stopped + `"`,
		`<td id="locks-held">1</td>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("second load: the DOM lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// statusBackend is the part of /status.json the test reads.
type statusBackend struct {
	Addr, State string
	RunID       string `json:"run_id"`
}

func pageStatus(t *testing.T, addr string) []statusBackend {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status.json")
	if err != nil {
		t.Fatalf("GET /status.json: %v", err)
	}
	defer resp.Body.Close()
	var st struct{ Backends []statusBackend }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/status.json: %v", err)
	}
	return st.Backends
}

func backendOf(t *testing.T, bs []statusBackend, addr string) statusBackend {
	t.Helper()
	for _, b := range bs {
		if b.Addr == addr {
			return b
		}
	}
	t.Fatalf("/status.json has no backend %s: %+v", addr, bs)
	return statusBackend{}
}

// renderPage loads the status page in headless Chromium, keeps a
// screenshot at shot and returns the DOM after load.
func renderPage(t *testing.T, chromium, addr, shot string) string {
	t.Helper()
	profile, err := os.MkdirTemp("", "status-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile)
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-extensions", "--user-data-dir=" + profile, "--window-size=1200,1000"}, args...)
		args = append(args, "http://"+addr+"/")
		cmd := exec.CommandContext(ctx, chromium, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		var stderr syncBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its helpers left behind
		}
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
		}
		return string(out)
	}
	dom := run("--dump-dom")
	run("--screenshot=" + shot)
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
	return dom
}
