// Package tests holds the black-box end-to-end tests of redlock-proxy: real
// redis-server processes on free loopback ports, the proxy binary built once
// with -race, real clients (go-redis, redis-cli, raw sockets) and fault
// injection by SIGSTOP, kill -9 and restart.
package tests

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// proxyBin is the path of the proxy binary built by TestMain.
var proxyBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("tests: skipped under -short: the end-to-end tests need redis-server, redis-cli, node and npm, /usr/bin/python3 with python3-redis, php with php-redis and the Debian PHP lock libraries, and a -race build of the proxy (make test)")
		return 0
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: redis-server is not on PATH; the end-to-end tests need a real Redis: run `make test`, which installs it")
		return 1
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot find the repository root:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "redlock-proxy-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	proxyBin = filepath.Join(dir, "redlock-proxy")
	build := exec.Command("go", "build", "-race", "-o", proxyBin, "./cmd/redlock-proxy")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: go build -race ./cmd/redlock-proxy: %v\n%s\n", err, out)
		return 1
	}
	return m.Run()
}

// repoRoot is the directory holding go.mod (the parent of tests/).
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	abs, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		return "", err
	}
	return abs, nil
}

// freePort returns a loopback port that was free a moment ago, below the
// kernel's ephemeral range: a port from that range, once its server is
// killed, may be taken as the source port of any outgoing connection
// (the proxies' own connections to the backends), and a restart on it
// then fails with "address already in use". Ports below the range are
// only ever bound on purpose. Ports are handed out in turn from a start
// that depends on the process, so parallel tests never get the same one.
func freePort(t testing.TB) int {
	t.Helper()
	portsOnce.Do(func() {
		lo := ephemeralLow()
		portsLow, portsHigh = 10000, lo
		portsNext.Store(int64(portsLow + (os.Getpid()*7919)%(portsHigh-portsLow)))
	})
	for range portsHigh - portsLow {
		p := portsLow + int(portsNext.Add(1))%(portsHigh-portsLow)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatalf("free port: none free in [%d, %d)", portsLow, portsHigh)
	return 0
}

var (
	portsOnce           sync.Once
	portsLow, portsHigh int
	portsNext           atomic.Int64
)

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 11000 {
		return 32768
	}
	return lo
}

// syncBuffer collects a child process's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ---------------------------------------------------------------------------
// redis-server

// redisProc is one real redis-server on a loopback port.
type redisProc struct {
	t    testing.TB
	port int
	dir  string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool
	out     *syncBuffer
	holdFD  int           // a bound, non-listening socket that keeps a killed server's port, or -1
	client  *redis.Client // made by Client, once
}

// startRedis starts a redis-server on a free port and waits until it answers PING.
func startRedis(t testing.TB) *redisProc {
	t.Helper()
	r := &redisProc{t: t, dir: t.TempDir(), holdFD: -1}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		r.port = freePort(t)
		if err = r.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		r.Kill()
		r.releasePort()
		if t.Failed() {
			if out := interestingRedisOutput(r.out.String()); out != "" {
				t.Logf("redis-server %s output:\n%s", r.Addr(), out)
			}
		}
	})
	return r
}

// interestingRedisOutput drops redis-server's usual start-up lines.
func interestingRedisOutput(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		boring := strings.TrimSpace(line) == ""
		for _, s := range []string{"Reading config", "oO0OoO0Oo", "Redis version=", "Configuration loaded", "Server initialized", "Memory overcommit"} {
			boring = boring || strings.Contains(line, s)
		}
		if !boring {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// startCluster starts n independent redis-servers.
func startCluster(t testing.TB, n int) []*redisProc {
	t.Helper()
	rs := make([]*redisProc, n)
	for i := range rs {
		rs[i] = startRedis(t)
	}
	return rs
}

func (r *redisProc) start() error {
	conf := strings.Join([]string{
		"port " + strconv.Itoa(r.port),
		"bind 127.0.0.1",
		`save ""`,
		"appendonly no",
		"daemonize no",
		"protected-mode no",
		"loglevel warning",
		"dir " + r.dir,
	}, "\n") + "\n"
	cmd := exec.Command("redis-server", "-")
	cmd.Stdin = strings.NewReader(conf)
	out := &syncBuffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	r.mu.Lock()
	r.cmd, r.done, r.out, r.stopped = cmd, done, out, false
	r.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited: %s", r.port, out.String())
		default:
		}
		if pingRaw(r.Addr(), 200*time.Millisecond) == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("redis-server on port %d did not answer PING: %s", r.port, out.String())
}

// Addr is host:port.
func (r *redisProc) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// URL is the backend URL for the proxy config.
func (r *redisProc) URL() string { return "redis://" + r.Addr() }

// Stop freezes the server with SIGSTOP: connections stay open, nothing answers.
func (r *redisProc) Stop() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		r.t.Fatalf("SIGSTOP redis %s: %v", r.Addr(), err)
	}
	r.stopped = true
}

// Cont resumes a stopped server.
func (r *redisProc) Cont() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		r.t.Fatalf("SIGCONT redis %s: %v", r.Addr(), err)
	}
	r.stopped = false
}

// Kill sends SIGKILL and waits for the process to be gone. Idempotent.
func (r *redisProc) Kill() {
	r.mu.Lock()
	cmd, done, stopped := r.cmd, r.done, r.stopped
	r.stopped = false
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	if stopped {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = cmd.Process.Kill()
	<-done
	r.holdPort()
}

// holdPort keeps the dead server's port from being taken by a server that
// a parallel test starts: a socket bound without SO_REUSEADDR and not
// listening makes every other bind fail while connects still get "refused".
func (r *redisProc) holdPort() {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: r.port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return
	}
	r.mu.Lock()
	r.holdFD = fd
	r.mu.Unlock()
}

func (r *redisProc) releasePort() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holdFD >= 0 {
		_ = syscall.Close(r.holdFD)
		r.holdFD = -1
	}
}

// Restart starts the server again, empty, on the same port.
func (r *redisProc) Restart() {
	r.t.Helper()
	r.Kill()
	r.releasePort()
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = r.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("restart redis-server on %s: %v", r.Addr(), err)
}

// Client is a go-redis client talking to this server directly. There is
// one per server, closed at the end of the test that started it: tests
// that poll the backends call it in loops.
func (r *redisProc) Client() *redis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == nil {
		c := redis.NewClient(&redis.Options{
			Addr:            r.Addr(),
			MaxRetries:      -1,
			DialTimeout:     time.Second,
			ReadTimeout:     time.Second,
			WriteTimeout:    time.Second,
			DisableIdentity: true,
		})
		r.t.Cleanup(func() { _ = c.Close() })
		r.client = c
	}
	return r.client
}

// pingRaw dials addr, sends PING and waits for any complete reply line.
func pingRaw(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if n > 0 && bytes.Contains(buf[:n], []byte("\r\n")) {
		return nil
	}
	if err == nil {
		err = errors.New("short reply")
	}
	return err
}

// ---------------------------------------------------------------------------
// the proxy

// proxyProc is one running redlock-proxy process.
type proxyProc struct {
	t    testing.TB
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncBuffer

	mu   sync.Mutex
	code int
}

// startProxy writes an HCL config naming backends and runs the proxy with
// -config plus flags. extraHCL is appended to the config file verbatim.
func startProxy(t testing.TB, backends []*redisProc, extraHCL string, flags ...string) *proxyProc {
	t.Helper()
	urls := make([]string, len(backends))
	for i, b := range backends {
		urls[i] = b.URL()
	}
	return startProxyURLs(t, urls, extraHCL, flags...)
}

// startProxyURLs is startProxy over backend URLs (with credentials, say).
func startProxyURLs(t testing.TB, backendURLs []string, extraHCL string, flags ...string) *proxyProc {
	t.Helper()
	dir := t.TempDir()
	urls := make([]string, len(backendURLs))
	for i, u := range backendURLs {
		urls[i] = strconv.Quote(u)
	}
	var lastLog string
	for attempt := 0; attempt < 3; attempt++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		cfg := fmt.Sprintf("listen = %q\nbackends = [%s]\nlog_level = \"debug\"\n", addr, strings.Join(urls, ", "))
		if !strings.Contains(extraHCL, "node_timeout") {
			// Tests about function, not latency, must not flake on a loaded
			// CI box (-race, 2 CPUs): give each node call room. The per-node
			// deadline is still min(node_timeout, ttl × 0.05).
			cfg += "node_timeout = \"1s\"\n"
		}
		if !strings.Contains(extraHCL, "startup_quarantine") {
			// Every test starts fresh backends: without this each would wait
			// out the start-up quarantine (max_ttl). Quarantine tests opt in.
			cfg += "startup_quarantine = false\n"
		}
		cfg += extraHCL + "\n"
		file := filepath.Join(dir, fmt.Sprintf("redlock-proxy-%d.hcl", attempt))
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatalf("write config: %v", err)
		}
		args := append([]string{"-config", file}, flags...)
		p, err := runProxy(t, addr, args)
		if err == nil {
			return p
		}
		lastLog = err.Error()
		if !strings.Contains(lastLog, "address already in use") {
			break
		}
	}
	t.Fatalf("start proxy: %s", lastLog)
	return nil
}

// startProxyArgs runs the proxy with exactly args; addr is where it listens.
func startProxyArgs(t testing.TB, addr string, args ...string) *proxyProc {
	t.Helper()
	p, err := runProxy(t, addr, args)
	if err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	return p
}

func runProxy(t testing.TB, addr string, args []string) (*proxyProc, error) {
	t.Helper()
	cmd := exec.Command(proxyBin, args...)
	out := &syncBuffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proxyProc{t: t, addr: addr, cmd: cmd, done: make(chan struct{}), out: out, code: -1}
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		p.mu.Lock()
		p.code = code
		p.mu.Unlock()
		close(p.done)
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("proxy %v exited with code %d before answering PING; output:\n%s", args, p.exitCode(), out.String())
		default:
		}
		if pingRaw(addr, 250*time.Millisecond) == nil {
			break
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("proxy %v did not answer PING on %s within 10s; output:\n%s", args, addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		p.terminate()
		if t.Failed() {
			t.Logf("proxy %v output:\n%s", args, out.String())
		}
	})
	return p, nil
}

func (p *proxyProc) exitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

func (p *proxyProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// terminate sends SIGTERM, waits up to 5s, then kills.
func (p *proxyProc) terminate() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.t.Logf("proxy did not exit within 5s of SIGTERM; killing it")
		p.kill()
	}
}

// Addr is host:port the proxy listens on.
func (p *proxyProc) Addr() string { return p.addr }

// Port is the proxy's port as a string (for redis-cli -p).
func (p *proxyProc) Port() string {
	_, port, _ := net.SplitHostPort(p.addr)
	return port
}

// Log is everything the proxy wrote to stdout and stderr so far.
func (p *proxyProc) Log() string { return p.out.String() }

// Signal sends sig to the proxy process.
func (p *proxyProc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal proxy: %v", err)
	}
}

// Wait waits up to timeout for the proxy to exit and returns its exit code;
// it fails the test when the process is still running.
func (p *proxyProc) Wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.exitCode()
	case <-time.After(timeout):
		p.t.Fatalf("proxy still running after %v", timeout)
		return -1
	}
}

// Alive reports whether the process is still running.
func (p *proxyProc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Client returns a go-redis client for the proxy. opts may be nil; Addr is
// filled in, and unset timeouts get short defaults, with no retries.
func (p *proxyProc) Client(opts *redis.Options) *redis.Client {
	var o redis.Options
	if opts != nil {
		o = *opts
	}
	o.Addr = p.addr
	if o.MaxRetries == 0 {
		o.MaxRetries = -1
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 5 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 2 * time.Second
	}
	c := redis.NewClient(&o)
	p.t.Cleanup(func() { _ = c.Close() })
	return c
}

// ---------------------------------------------------------------------------
// small helpers shared by the tests

// backendAddrs lists the addresses of rs.
func backendAddrs(rs []*redisProc) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Addr()
	}
	return out
}

// testCtx is a context bounded by d and cancelled at the end of the test.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// execOutput runs a short command with a 10s limit and returns its combined output.
func execOutput(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
