package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The -idle measurement: what an idle client connection costs the proxy
// in resident memory. N connections each send one PING, read PONG and stay
// open; after idleSettle the proxy's VmRSS is compared with its value
// before the first connection. RSS counts pages the proxy touched, so the
// figure includes each connection's goroutine stack and buffers as the
// kernel sees them, not what the Go heap thinks it uses. Linux only
// (/proc).

// idleSettle is how long the connections stay open before RSS is read.
const idleSettle = 2 * time.Second

// idleDialers is how many connections are opened at once.
const idleDialers = 64

// fdHeadroom is the file descriptors either process needs besides the idle
// connections: backends, listeners, the benchmark's own clients, logs.
const fdHeadroom = 200

// idleResult is the -idle line of the report.
type idleResult struct {
	Connections    int     `json:"connections"`
	RSSBeforeBytes int64   `json:"rss_before_bytes"`
	RSSAfterBytes  int64   `json:"rss_after_bytes"`
	PerConnBytes   float64 `json:"per_connection_bytes"`
}

func (r *idleResult) String() string {
	return fmt.Sprintf("idle: %d connections, proxy RSS %s → %s (%+.1f KiB per connection)",
		r.Connections, fmtMiB(r.RSSBeforeBytes), fmtMiB(r.RSSAfterBytes), r.PerConnBytes/1024)
}

func fmtMiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// raiseFileLimit raises this process's RLIMIT_NOFILE to its hard limit
// and checks that need descriptors fit. It must run before the proxy is
// spawned: the child inherits the limit. (Go raises its own soft limit at
// start but gives children the original one back, unless the program
// called Setrlimit itself, as here.)
func raiseFileLimit(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("-idle: getrlimit: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return fmt.Errorf("-idle: raise the open-files limit to %d: %w", lim.Max, err)
		}
	}
	if lim.Cur < uint64(need) {
		return fmt.Errorf("-idle: needs %d open files, the hard limit is %d (raise it: ulimit -Hn, or LimitNOFILE)", need, lim.Max)
	}
	return nil
}

// procOpenFiles is the soft "Max open files" of process pid.
func procOpenFiles(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if f[0] == "unlimited" {
					return 1 << 62, nil
				}
				return strconv.ParseUint(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no Max open files line")
}

// procRSS is the VmRSS of process pid in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "18632 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, errors.New("no VmRSS line")
}

// measureIdle opens n idle connections to the spawned proxy, waits
// idleSettle, and reports the proxy's RSS before and after. The
// connections are closed before it returns.
func measureIdle(ctx context.Context, c *cluster, n int, stderr io.Writer) (*idleResult, error) {
	pid := c.proxy.cmd.Process.Pid
	if limit, err := procOpenFiles(pid); err != nil {
		return nil, fmt.Errorf("-idle: proxy open-files limit: %w", err)
	} else if limit < uint64(n+fdHeadroom) {
		return nil, fmt.Errorf("-idle: the proxy may open %d files, needs %d", limit, n+fdHeadroom)
	}
	before, err := procRSS(pid)
	if err != nil {
		return nil, fmt.Errorf("-idle: proxy RSS: %w", err)
	}
	conns, err := openIdle(ctx, c.targets.proxy, n)
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("-idle: %d of %d connections open: %w", len(conns), n, err)
	}
	fmt.Fprintf(stderr, "redlock-bench: %d idle connections open; waiting %v\n", n, idleSettle)
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := procRSS(pid)
	if err != nil {
		return nil, fmt.Errorf("-idle: proxy RSS: %w", err)
	}
	return &idleResult{
		Connections:    n,
		RSSBeforeBytes: before,
		RSSAfterBytes:  after,
		PerConnBytes:   float64(after-before) / float64(n),
	}, nil
}

// openIdle opens n connections to addr, idleDialers at a time, each after
// one PING answered with PONG. It returns those it opened, and the first
// error.
func openIdle(ctx context.Context, addr string, n int) ([]net.Conn, error) {
	var (
		mu       sync.Mutex
		conns    = make([]net.Conn, 0, n)
		firstErr error
		next     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for range idleDialers {
		wg.Go(func() {
			for range next {
				cn, err := pingConn(ctx, addr)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns = append(conns, cn)
				}
				mu.Unlock()
			}
		})
	}
	for range n {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return conns, firstErr
}

// pingConn dials addr, sends PING and reads +PONG, and returns the open
// connection.
func pingConn(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	cn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = cn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(cn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		cn.Close()
		return nil, err
	}
	// No bufio.Reader kept per connection: read the line, then drop it.
	line, err := bufio.NewReaderSize(cn, 16).ReadString('\n')
	if err != nil {
		cn.Close()
		return nil, err
	}
	if line != "+PONG\r\n" {
		cn.Close()
		return nil, fmt.Errorf("PING: %q", strings.TrimSpace(line))
	}
	_ = cn.SetDeadline(time.Time{})
	return cn, nil
}
