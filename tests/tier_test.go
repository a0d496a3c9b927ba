package tests

// The tier of proxies end to end: three proxies over five real backends
// find each other through the backends, give every Sentinel client the
// same answer, and move it when the advertised proxy dies. Clients are
// the real ones: go-redis NewFailoverClient and SentinelClient, redis-py
// Sentinel (Debian's python3-redis 4.3), raw subscribers.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// tierProxy is one proxy of a tier: its config file stays, so it can be
// killed and started again on the same address (same announce).
type tierProxy struct {
	t    *testing.T
	addr string
	file string

	mu sync.Mutex
	p  *proxyProc
}

// startTier starts n proxies over backends, one after another (the first
// joins first, so it is the one advertised), each announcing its listen
// address. extraHCL is appended to every config; without node_timeout or
// startup_quarantine in it they default as startProxy's do.
func startTier(t *testing.T, backends []*redisProc, n int, extraHCL string) []*tierProxy {
	t.Helper()
	dir := t.TempDir()
	urls := make([]string, len(backends))
	for i, b := range backends {
		urls[i] = strconv.Quote(b.URL())
	}
	tier := make([]*tierProxy, n)
	for i := range tier {
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
			cfg := fmt.Sprintf("listen = %q\nbackends = [%s]\nlog_level = \"debug\"\n", addr, strings.Join(urls, ", "))
			if !strings.Contains(extraHCL, "node_timeout") {
				cfg += "node_timeout = \"1s\"\n"
			}
			if !strings.Contains(extraHCL, "startup_quarantine") {
				cfg += "startup_quarantine = false\n"
			}
			cfg += extraHCL + "\n"
			file := filepath.Join(dir, fmt.Sprintf("proxy-%d-%d.hcl", i, attempt))
			if err = os.WriteFile(file, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			tp := &tierProxy{t: t, addr: addr, file: file}
			if err = tp.start(); err == nil {
				tier[i] = tp
				break
			}
			if !strings.Contains(err.Error(), "address already in use") {
				break
			}
		}
		if err != nil {
			t.Fatalf("start proxy %d of the tier: %v", i, err)
		}
		// Joined stamps are milliseconds: keep the order unambiguous.
		time.Sleep(20 * time.Millisecond)
	}
	return tier
}

// start runs the proxy on its address.
func (tp *tierProxy) start() error {
	p, err := runProxy(tp.t, tp.addr, []string{"-config", tp.file})
	if err != nil {
		return err
	}
	tp.mu.Lock()
	tp.p = p
	tp.mu.Unlock()
	return nil
}

// restart starts it again after a kill, on the same address.
func (tp *tierProxy) restart() {
	tp.t.Helper()
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = tp.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tp.t.Fatalf("restart proxy %s: %v", tp.addr, err)
}

// kill sends SIGKILL and waits for the process to be gone.
func (tp *tierProxy) kill() {
	tp.mu.Lock()
	p := tp.p
	tp.mu.Unlock()
	p.kill()
}

// proc is the running (or last) process.
func (tp *tierProxy) proc() *proxyProc {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.p
}

func tierAddrs(tier []*tierProxy) []string {
	out := make([]string, len(tier))
	for i, tp := range tier {
		out[i] = tp.addr
	}
	return out
}

// sentinelClient is a go-redis SentinelClient for one proxy.
func sentinelClient(t *testing.T, addr string) *redis.SentinelClient {
	s := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// masterAddr asks one proxy which proxy it advertises ("" on error).
func masterAddr(ctx context.Context, s *redis.SentinelClient) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := s.GetMasterAddrByName(ctx, "redlock").Result()
	if err != nil || len(v) != 2 {
		return ""
	}
	return net.JoinHostPort(v[0], v[1])
}

// sameAnswer waits until every client names the same proxy, and returns it.
func sameAnswer(t *testing.T, ctx context.Context, within time.Duration, clients ...*redis.SentinelClient) string {
	t.Helper()
	var answers []string
	testkit.Eventually(t, within, "the same SENTINEL answer from every proxy", func() bool {
		answers = answers[:0]
		for _, s := range clients {
			answers = append(answers, masterAddr(ctx, s))
		}
		for _, a := range answers {
			if a == "" || a != answers[0] {
				return false
			}
		}
		return true
	})
	return answers[0]
}

// TestTierDiscovery: three proxies over five backends. Every proxy
// advertises the first one, lists the other two as sentinels, answers as
// a master (INFO, ROLE, HELLO 3), and redis-py's Sentinel locks through
// the proxy it discovers.
func TestTierDiscovery(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	tier := startTier(t, rs, 3, "")
	ctx := testCtx(t, 90*time.Second)
	clients := make([]*redis.SentinelClient, len(tier))
	for i, tp := range tier {
		clients[i] = sentinelClient(t, tp.addr)
	}
	if got := sameAnswer(t, ctx, 10*time.Second, clients...); got != tier[0].addr {
		t.Fatalf("the proxies advertise %s, want the one that joined first, %s", got, tier[0].addr)
	}
	// Each proxy hears of the ones that started after it at their first
	// heartbeats (every second).
	testkit.Eventually(t, 10*time.Second, "every proxy sees the other two", func() bool {
		for _, s := range clients {
			if l, err := s.Sentinels(ctx, "redlock").Result(); err != nil || len(l) != 2 {
				return false
			}
		}
		return true
	})
	for i, s := range clients {
		sentinels, err := s.Sentinels(ctx, "redlock").Result()
		if err != nil {
			t.Fatalf("proxy %d: SENTINEL sentinels: %v", i, err)
		}
		var got []string
		for _, m := range sentinels {
			got = append(got, net.JoinHostPort(m["ip"], m["port"]))
			if m["flags"] != "sentinel" {
				t.Errorf("proxy %d: sentinel entry flags %q", i, m["flags"])
			}
		}
		var want []string
		for j, tp := range tier {
			if j != i {
				want = append(want, tp.addr)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("proxy %d: SENTINEL sentinels lists %v, want the other two %v", i, got, want)
		}
		master, err := s.Master(ctx, "redlock").Result()
		if err != nil || master["flags"] != "master" || master["num-other-sentinels"] != "2" ||
			net.JoinHostPort(master["ip"], master["port"]) != tier[0].addr {
			t.Errorf("proxy %d: SENTINEL master = %v, %v", i, master, err)
		}
		if err := s.Master(ctx, "other").Err(); err == nil || !strings.Contains(err.Error(), "No such master") {
			t.Errorf("proxy %d: SENTINEL master other = %v, want No such master", i, err)
		}
	}

	// The advertised proxy is a master to whoever dials it, in RESP3 too.
	c := tier[0].proc().Client(&redis.Options{Protocol: 3})
	if info, err := c.Info(ctx, "replication").Result(); err != nil || !strings.Contains(info, "role:master") {
		t.Errorf("INFO replication = %q, %v", info, err)
	}
	if role, err := c.Do(ctx, "ROLE").Slice(); err != nil || len(role) != 3 || role[0] != "master" {
		t.Errorf("ROLE = %v, %v", role, err)
	}
	if hello, err := c.Do(ctx, "HELLO", "3").Result(); err != nil || fmt.Sprint(hello) == "" {
		t.Errorf("HELLO 3 = %v, %v", hello, err)
	}
	info, err := c.Info(ctx, "tier").Result()
	if err != nil || !strings.Contains(info, "live_proxies:3") || !strings.Contains(info, "advertised:"+tier[0].addr) {
		t.Errorf("INFO tier = %q, %v", info, err)
	}
	// The membership lives under a reserved key: clients cannot touch it.
	if err := c.Del(ctx, "redlock-proxy:tier:redlock").Err(); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("DEL of the membership key = %v, want a reserved-key error", err)
	}

	t.Run("redis-py", func(t *testing.T) {
		requirePythonRedis(t)
		got := runJSON(t, 30*time.Second, debianPython, pythonScript(t, "sentinel_worker.py"),
			strings.Join(tierAddrs(tier), ","), "redlock", "py:tier", tier[2].addr)
		jsonCheck(t, "redis-py Sentinel", got, map[string]any{
			"master":          tier[0].addr,
			"acquired":        true,
			"owned":           true,
			"seen_elsewhere":  true,
			"other_acquire":   false,
			"released":        true,
			"unknown_service": "MasterNotFoundError",
		})
	})
}

// TestTierFailover: a go-redis failover client (SentinelAddrs = the three
// proxies) locks through the advertised proxy; that proxy is killed with
// -9; the client locks again through the proxy the others advertise next,
// and the time that takes is the failover time. Subscribers of
// +switch-master on the surviving proxies hear the switch.
func TestTierFailover(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	tier := startTier(t, rs, 3, "")
	ctx := testCtx(t, 2*time.Minute)
	clients := make([]*redis.SentinelClient, len(tier))
	for i, tp := range tier {
		clients[i] = sentinelClient(t, tp.addr)
	}
	if got := sameAnswer(t, ctx, 10*time.Second, clients...); got != tier[0].addr {
		t.Fatalf("the proxies advertise %s, want %s", got, tier[0].addr)
	}

	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "redlock",
		SentinelAddrs: tierAddrs(tier),
		MaxRetries:    -1,
		DialTimeout:   500 * time.Millisecond,
		ReadTimeout:   2 * time.Second,
		WriteTimeout:  2 * time.Second,
	})
	t.Cleanup(func() { _ = fc.Close() })
	lockOnce := func(key string) error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		v, err := fc.Do(cctx, "LOCK", key, 5000).Slice()
		if err != nil {
			return err
		}
		tok, _ := v[0].(string)
		return fc.Do(cctx, "UNLOCK", key, tok).Err()
	}
	if err := lockOnce("failover:before"); err != nil {
		t.Fatalf("LOCK/UNLOCK through the failover client: %v", err)
	}
	// The failover client is connected to the advertised proxy.
	clientList, err := tier[0].proc().Client(nil).ClientList(ctx).Result()
	if err != nil || strings.Count(clientList, "\n") < 2 {
		t.Fatalf("CLIENT LIST on the advertised proxy = %q, %v", clientList, err)
	}

	// Raw subscribers on the two proxies that survive.
	type message struct {
		proxy   int
		payload string
	}
	msgs := make(chan message, 8)
	for i := 1; i < 3; i++ {
		sub := tier[i].proc().Client(nil).Subscribe(ctx, "+switch-master")
		t.Cleanup(func() { _ = sub.Close() })
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatalf("SUBSCRIBE +switch-master on proxy %d: %v", i, err)
		}
		go func() {
			for m := range sub.Channel() {
				msgs <- message{i, m.Payload}
			}
		}()
	}

	killed := time.Now()
	tier[0].kill()
	var recovered time.Time
	var lastErr error
	for time.Since(killed) < 60*time.Second {
		if lastErr = lockOnce("failover:after"); lastErr == nil {
			recovered = time.Now()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if recovered.IsZero() {
		t.Fatalf("the failover client did not lock again within 60s of the kill; last error: %v", lastErr)
	}
	recovery := recovered.Sub(killed)

	next := sameAnswer(t, ctx, 10*time.Second, clients[1:]...)
	if next != tier[1].addr {
		t.Errorf("after the kill the proxies advertise %s, want the next to have joined, %s", next, tier[1].addr)
	}
	oldHost, oldPort, _ := net.SplitHostPort(tier[0].addr)
	newHost, newPort, _ := net.SplitHostPort(tier[1].addr)
	want := strings.Join([]string{"redlock", oldHost, oldPort, newHost, newPort}, " ")
	heard := map[int]bool{}
	for len(heard) < 2 {
		select {
		case m := <-msgs:
			if m.payload != want {
				t.Errorf("proxy %d published +switch-master %q, want %q", m.proxy, m.payload, want)
			}
			heard[m.proxy] = true
		case <-time.After(15 * time.Second):
			t.Fatalf("+switch-master heard from proxies %v within 15s of the new answer, want from both survivors", heard)
		}
	}
	// The bound is generous (a loaded -race box); the figure is in
	// docs/operations.md. Entries live 3s after the last heartbeat.
	if recovery > 15*time.Second {
		t.Errorf("the failover client locked again %v after the kill, want well under 10s", recovery.Round(time.Millisecond))
	}
	t.Logf("FIGURES failover: go-redis NewFailoverClient locked again %v after kill -9 of the advertised proxy", recovery.Round(time.Millisecond))
}
