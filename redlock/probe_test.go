package redlock

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

func TestCheckBackends(t *testing.T) {
	f := newFakes(t, 3, Options{})
	f.nodes[0].setProbe(Probe{Uptime: -1, MaxMemoryPolicy: "allkeys-lru", Role: "master"})
	f.nodes[1].setProbe(Probe{Uptime: -1, MaxMemoryPolicy: "noeviction", Role: "slave"})
	f.nodes[2].setProbe(Probe{Uptime: -1, MaxMemoryPolicy: "noeviction", Role: "master", Replicas: 1})
	got := f.r.CheckBackends(context.Background())
	want := []string{
		"backend fake-0: maxmemory-policy allkeys-lru may evict locks; set noeviction",
		"backend fake-1: role slave; every backend must be an independent master",
		"backend fake-2: has 1 replicas; a failover may promote one that missed recent locks",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("CheckBackends = %q, want %q", got, want)
	}
}

// RedisNode over miniredis: the connection report (no run_id) reaches a
// Redlock made after the connection, the probe works, and nothing is
// quarantined.
func TestRedisNodeObserverMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	n, err := DialNode(mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	if _, err := n.Do(ctx, "PING"); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int32
	n.SetObserver(func(p Probe) {
		if p.RunID == "" && p.Uptime == -1 {
			got.Add(1)
		}
	})
	if got.Load() != 1 {
		t.Fatalf("late observer got %d reports, want 1", got.Load())
	}
	p, err := n.Probe(ctx)
	if err != nil || p.Time.IsZero() {
		t.Fatalf("Probe = %+v, %v", p, err)
	}
	r := New([]Node{n}, Options{MaxTTL: time.Minute, NodeTimeout: testTimeout, Logger: testLogger(t)})
	if probs := r.CheckBackends(ctx); len(probs) != 0 {
		t.Fatalf("CheckBackends on miniredis: %q", probs)
	}
	if _, err := r.Acquire(ctx, "k", "tok", ttl); err != nil {
		t.Fatal(err)
	}
	if s := r.Status()[0]; s.State != StateUp {
		t.Fatalf("%+v", s)
	}
}

// redisServer runs a real redis-server on port; kill stops it.
type redisServer struct{ cmd *exec.Cmd }

func redisOnPort(tb testing.TB, port string) *redisServer {
	tb.Helper()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &redisServer{cmd}
	tb.Cleanup(s.kill)
	deadline := time.Now().Add(10 * time.Second) // a bound: start-up is slower on a loaded machine
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redis-server on %s did not start: %v", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *redisServer) kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

func freePort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func TestRedisRestartQuarantine(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server: skipped under -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	port := freePort(t)
	srv := redisOnPort(t, port)
	addr := "127.0.0.1:" + port
	ctx := context.Background()

	n, err := DialNode(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	r := New([]Node{n}, Options{MaxTTL: time.Minute, TrustFreshBackends: true, NodeTimeout: testTimeout, Logger: testLogger(t)})
	if _, err := r.Acquire(ctx, "k", "tok", ttl); err != nil {
		t.Fatal(err)
	}
	s := r.Status()[0]
	if s.State != StateUp || s.RunID == "" {
		t.Fatalf("after the first connection: %+v", s)
	}
	p, err := n.Probe(ctx)
	if err != nil || p.RunID != s.RunID || p.Uptime < 0 || p.Time.IsZero() || p.MaxMemoryPolicy != "noeviction" {
		t.Fatalf("Probe = %+v, %v", p, err)
	}
	if probs := r.CheckBackends(ctx); len(probs) != 0 {
		t.Fatalf("CheckBackends: %q", probs)
	}

	srv.kill()
	redisOnPort(t, port)
	// The pipelined connection to the old server fails once; the new one
	// reports the new run_id before its first command.
	for range 10 {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _ = n.Do(cctx, "PING")
		cancel()
		if r.Status()[0].State == StateQuarantined {
			break
		}
	}
	s2 := r.Status()[0]
	if s2.State != StateQuarantined || s2.Reason != "restarted: run_id changed" || s2.RunID == s.RunID {
		t.Fatalf("after the restart: %+v (before %+v)", s2, s)
	}
	_, err = r.Acquire(ctx, "k2", "tok", ttl)
	mustNotVoting(t, err, 1)

	// A Redlock meeting the same young server without trust quarantines
	// it for the rest of max_ttl.
	n2, err := DialNode(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	r2 := New([]Node{n2}, Options{MaxTTL: time.Minute, NodeTimeout: testTimeout, Logger: testLogger(t)})
	_, err = r2.Acquire(ctx, "k3", "tok", ttl)
	mustNotVoting(t, err, 1)
	if s := r2.Status()[0]; s.State != StateQuarantined || !strings.HasPrefix(s.Reason, "fresh at start: uptime") {
		t.Fatalf("fresh server: %+v", s)
	}
	for _, rl := range []*Redlock{r, r2} {
		if err := rl.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
