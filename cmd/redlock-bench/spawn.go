package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cluster is what -spawn started: N redis-servers and a proxy in front of
// them (two with -handoff), all on loopback, all killed by close.
type cluster struct {
	targets
	dir      string
	procs    []*proc  // backends first, the proxies last
	proxy    *proc    // the first proxy
	settings []string // more lines of the proxies' config file, "key = value"
}

// proc is one child process whose output goes to a log file in the
// cluster's directory.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
}

// spawnCluster starts n redis-servers and a proxy over them, and a second
// proxy over the same backends when second is set. The proxy is proxyBin,
// or built from the enclosing module when proxyBin is empty; settings are
// more lines of its config file ("key = value").
func spawnCluster(ctx context.Context, n int, proxyBin string, settings []string, second bool) (*cluster, error) {
	dir, err := os.MkdirTemp("", "redlock-bench-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, settings: settings}
	if err := c.start(ctx, n, proxyBin, second); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *cluster) start(ctx context.Context, n int, proxyBin string, second bool) error {
	if proxyBin == "" {
		var err error
		if proxyBin, err = buildProxy(ctx, c.dir); err != nil {
			return err
		}
	}
	for i := range n {
		addr, err := c.startRedis(ctx, i)
		if err != nil {
			return err
		}
		c.backends = append(c.backends, addr)
		c.backendPIDs = append(c.backendPIDs, c.procs[len(c.procs)-1].cmd.Process.Pid) // the one that answered
	}
	p, addr, metrics, err := c.startProxy(ctx, proxyBin, "proxy")
	if err != nil {
		return err
	}
	c.proxy, c.targets.proxy, c.targets.metrics = p, addr, metrics
	c.proxyPID = p.cmd.Process.Pid
	if second {
		if _, c.targets.proxy2, _, err = c.startProxy(ctx, proxyBin, "proxy2"); err != nil {
			return err
		}
	}
	return nil
}

// close kills every child and removes the directory. It is safe to call
// on a partly started cluster.
func (c *cluster) close() {
	for _, p := range c.procs {
		p.kill()
	}
	_ = os.RemoveAll(c.dir)
}

// writeProxyLog copies the proxy's output to w, for a failed run.
func (c *cluster) writeProxyLog(w io.Writer) {
	if c.proxy == nil {
		return
	}
	out := c.proxy.output()
	if out == "" {
		return
	}
	const limit = 8 << 10
	if len(out) > limit {
		out = "…" + out[len(out)-limit:]
	}
	fmt.Fprintf(w, "redlock-bench: proxy log:\n%s\n", strings.TrimRight(out, "\n"))
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run inside the redlock-proxy module or give -proxy-bin")
		}
		dir = parent
	}
}

// buildProxy runs go build ./cmd/redlock-proxy into dir.
func buildProxy(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "redlock-proxy")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/redlock-proxy")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/redlock-proxy in %s: %w\n%s", root, err, out)
	}
	return bin, nil
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before we use it; the callers retry on "address already in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

const startAttempts = 3

// startRedis starts backend i with its configuration on stdin.
func (c *cluster) startRedis(ctx context.Context, i int) (string, error) {
	var lastErr error
	for attempt := range startAttempts {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command("redis-server", "-")
		cmd.Stdin = strings.NewReader(fmt.Sprintf("port %d\nbind 127.0.0.1\nsave \"\"\nappendonly no\n"+
			"protected-mode no\ndaemonize no\nloglevel warning\ndir %s\n", port, c.dir))
		p, err := c.launch(fmt.Sprintf("redis-%d-%d", i, attempt), cmd)
		if err != nil {
			return "", fmt.Errorf("start redis-server: %w", err)
		}
		if lastErr = p.waitPing(ctx, addr); lastErr == nil {
			return addr, nil
		}
		p.kill()
		if !strings.Contains(lastErr.Error(), "already in use") {
			break
		}
	}
	return "", fmt.Errorf("redis-server: %w", lastErr)
}

// startProxy runs the proxy over the backends with a config file that
// turns off start-up quarantine (fresh backends would otherwise not vote
// for max_ttl), serves metrics on a free loopback port (read for the
// per-cycle cost columns) and keeps its log to warnings. A proxy too old
// to know startup_quarantine or metrics_listen is started again without
// it.
func (c *cluster) startProxy(ctx context.Context, bin, name string) (*proc, string, string, error) {
	quarantineOff, metricsOn := true, true
	var lastErr error
	for attempt := range startAttempts + 2 {
		port, err := freePort()
		if err != nil {
			return nil, "", "", err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		// The tool's own lines, each unless the caller sets its key.
		hcl := ""
		own := func(key, value string) {
			if _, set := settingOf(c.settings, key); !set {
				hcl += key + " = " + value + "\n"
			}
		}
		own("log_level", `"warn"`)
		if quarantineOff {
			own("startup_quarantine", "false")
		}
		metrics := ""
		if v, ok := settingOf(c.settings, "metrics_listen"); ok {
			metrics, _ = strconv.Unquote(v) // the caller's: scraped there
		} else if metricsOn {
			mport, err := freePort()
			if err != nil {
				return nil, "", "", err
			}
			metrics = net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
			own("metrics_listen", strconv.Quote(metrics))
		}
		for _, line := range c.settings {
			hcl += line + "\n"
		}
		file := filepath.Join(c.dir, fmt.Sprintf("%s-%d.hcl", name, attempt))
		if err := os.WriteFile(file, []byte(hcl), 0o600); err != nil {
			return nil, "", "", err
		}
		args := []string{"-config", file, "-listen", addr}
		for _, b := range c.backends {
			args = append(args, "-backend", b)
		}
		p, err := c.launch(fmt.Sprintf("%s-%d", name, attempt), exec.Command(bin, args...))
		if err != nil {
			return nil, "", "", fmt.Errorf("start %s: %w", bin, err)
		}
		if lastErr = p.waitPing(ctx, addr); lastErr == nil {
			return p, addr, metrics, nil
		}
		p.kill()
		switch msg := lastErr.Error(); {
		case strings.Contains(msg, "already in use"):
			// the proxy's or the metrics port was taken meanwhile: retry
		case quarantineOff && strings.Contains(msg, "startup_quarantine"):
			quarantineOff = false
		case metricsOn && strings.Contains(msg, "metrics_listen"):
			metricsOn = false
		default:
			return nil, "", "", fmt.Errorf("redlock-proxy: %w", lastErr)
		}
	}
	return nil, "", "", fmt.Errorf("redlock-proxy: %w", lastErr)
}

// settingOf finds key in "key = value" lines: its value as written.
func settingOf(lines []string, key string) (string, bool) {
	for _, line := range lines {
		if k, v, _ := strings.Cut(line, "="); strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// launch starts cmd with its output in a log file and remembers it for close.
func (c *cluster) launch(name string, cmd *exec.Cmd) (*proc, error) {
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return p, nil
}

// waitPing waits until addr answers PING, the process exits, or 10 s pass.
func (p *proc) waitPing(ctx context.Context, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start: %s", p.name, strings.TrimSpace(p.output()))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if pingRaw(addr, 200*time.Millisecond) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer PING on %s within 10s: %s", p.name, addr, strings.TrimSpace(p.output()))
}

// kill ends the process and waits for it: SIGTERM first, so that a proxy
// run with -cpuprofile (through a -proxy-bin wrapper) writes its profile,
// then SIGKILL after killGrace.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(killGrace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// killGrace is how long kill waits after SIGTERM.
const killGrace = 5 * time.Second

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// pingRaw sends an inline PING and waits for +PONG, without a client
// library, so a server that is still starting costs nothing to poll.
func pingRaw(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING %s: %q", addr, strings.TrimSpace(line))
	}
	return nil
}

// redisVersion is the first backend's redis_version, or "" if it will not
// say.
func redisVersion(ctx context.Context, t targets) string {
	if len(t.backends) == 0 {
		return ""
	}
	c := newClient(t.backends[0])
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
