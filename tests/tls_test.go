package tests

import (
	"context"
	"fmt"
	"net"
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

// tlsPKI is a test PKI (testkit.NewPKI) with its files written.
type tlsPKI struct {
	*testkit.PKI
	testkit.PKIFiles
}

func writePKI(t *testing.T) tlsPKI {
	t.Helper()
	p := testkit.NewPKI(t)
	return tlsPKI{p, p.WriteFiles(t)}
}

// tlsLockUnlock locks and unlocks key through a TLS client.
func tlsLockUnlock(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	res, err := c.Do(ctx, "LOCK", key, "10000").Slice()
	if err != nil || len(res) != 3 {
		t.Fatalf("LOCK over TLS = %v, %v", res, err)
	}
	if n, err := c.Do(ctx, "UNLOCK", key, res[0]).Int(); err != nil || n != 1 {
		t.Fatalf("UNLOCK over TLS = %d, %v", n, err)
	}
}

// expectPlaintextRefused checks that a plaintext client is answered with
// an error and disconnected within 2s.
func expectPlaintextRefused(t *testing.T, addr string) {
	t.Helper()
	c := testkit.Dial(t, addr)
	c.SendCmd("LOCK", "k")
	v, err := c.TryReadReply(2 * time.Second)
	if e, ok := v.(testkit.Error); err != nil || !ok || !strings.HasPrefix(string(e), "ERR") || !strings.Contains(string(e), "TLS") {
		t.Fatalf("plaintext client got %#v, %v; want an -ERR about TLS", v, err)
	}
	c.ExpectClosed(2 * time.Second)
}

// TestTLSReloadOnSIGHUP: SIGHUP reads the tls block's files again: after
// the certificate files are replaced by ones from another CA, new
// connections get the new certificate; files that do not load leave the
// running certificate in place.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	oldPKI, newPKI := writePKI(t), writePKI(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	install := func(p tlsPKI) {
		t.Helper()
		for from, to := range map[string]string{p.ServerCert: cert, p.ServerKey: key} {
			b, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(oldPKI)
	p := startProxy(t, startCluster(t, 3), fmt.Sprintf("tls {\n  cert_file = %q\n  key_file = %q\n}\n", cert, key))
	ping := func(trust tlsPKI) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.Client(&redis.Options{TLSConfig: trust.ClientConfig(false), MaxRetries: -1}).Ping(ctx).Err()
	}
	if err := ping(oldPKI); err != nil {
		t.Fatalf("PING trusting the first CA: %v", err)
	}
	if err := ping(newPKI); err == nil {
		t.Fatal("PING trusting only the second CA succeeded before the rotation")
	}

	install(newPKI)
	p.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 5*time.Second, "the TLS reload to be logged", func() bool {
		return strings.Contains(p.Log(), "TLS files reloaded")
	})
	if err := ping(newPKI); err != nil {
		t.Fatalf("PING trusting the second CA after the rotation: %v", err)
	}
	if err := ping(oldPKI); err == nil {
		t.Fatal("PING trusting only the first CA succeeded after the rotation")
	}

	if err := os.WriteFile(cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 5*time.Second, "the failed TLS reload to be logged", func() bool {
		return strings.Contains(p.Log(), "TLS reload failed: keeping the running certificate")
	})
	if err := ping(newPKI); err != nil {
		t.Fatalf("PING after a failed reload: %v", err)
	}
}

func TestTLSClients(t *testing.T) {
	t.Parallel()
	pki := writePKI(t)
	backends := startCluster(t, 3)

	t.Run("server-certificate", func(t *testing.T) {
		p := startProxy(t, backends, fmt.Sprintf("tls {\n  cert_file = %q\n  key_file = %q\n}\n", pki.ServerCert, pki.ServerKey))
		tlsLockUnlock(t, p.Client(&redis.Options{TLSConfig: pki.ClientConfig(false)}), "tls-e2e")
		expectPlaintextRefused(t, p.Addr())
		// Still serving TLS after the plaintext client.
		tlsLockUnlock(t, p.Client(&redis.Options{TLSConfig: pki.ClientConfig(false)}), "tls-e2e-2")
		if !strings.Contains(p.Log(), "refused plaintext client") {
			t.Errorf("the proxy did not log the plaintext client")
		}
	})

	t.Run("client-certificates", func(t *testing.T) {
		p := startProxy(t, backends, fmt.Sprintf("tls {\n  cert_file = %q\n  key_file = %q\n  client_ca_file = %q\n}\n",
			pki.ServerCert, pki.ServerKey, pki.CA))
		noCert := p.Client(&redis.Options{TLSConfig: pki.ClientConfig(false)})
		if err := noCert.Ping(testCtx(t, 5*time.Second)).Err(); err == nil {
			t.Fatal("PING without a client certificate succeeded")
		}
		tlsLockUnlock(t, p.Client(&redis.Options{TLSConfig: pki.ClientConfig(true)}), "mtls-e2e")
	})

	t.Run("unreadable-key", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing-key.pem")
		cfg := filepath.Join(t.TempDir(), "p.hcl")
		hcl := fmt.Sprintf("listen = \"127.0.0.1:%d\"\nbackends = [%q]\ntls {\n  cert_file = %q\n  key_file = %q\n}\n",
			freePort(t), backends[0].URL(), pki.ServerCert, missing)
		if err := os.WriteFile(cfg, []byte(hcl), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := execOutput(proxyBin, "-config", cfg)
		if err == nil || !strings.Contains(out, "tls.key_file") || !strings.Contains(out, missing) {
			t.Fatalf("start with a missing key: err %v, output:\n%s", err, out)
		}
	})
}

// tlsRedis is a redis-server that serves TLS only.
type tlsRedis struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncBuffer
}

func (r *tlsRedis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }
func (r *tlsRedis) URL() string  { return "rediss://" + r.Addr() }

// redisHasTLS reports whether this redis-server was built with TLS.
func redisHasTLS(t *testing.T) bool {
	t.Helper()
	// With TLS the server fails at once on the missing key; without, on
	// the unknown directive.
	out, _ := execOutput("redis-server", "--port", "0", "--tls-port", "1", "--tls-cert-file", "/nonexistent")
	return !strings.Contains(out, "Bad directive") && strings.Contains(out, "TLS")
}

// startTLSRedis starts a TLS-only redis-server (plain port 0) on a free
// port and waits until it answers PING over TLS.
func startTLSRedis(t *testing.T, pki tlsPKI) *tlsRedis {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		r := &tlsRedis{port: freePort(t), done: make(chan struct{}), out: &syncBuffer{}}
		conf := strings.Join([]string{
			"port 0",
			"tls-port " + strconv.Itoa(r.port),
			"tls-cert-file " + pki.ServerCert,
			"tls-key-file " + pki.ServerKey,
			"tls-ca-cert-file " + pki.CA,
			"tls-auth-clients no",
			"bind 127.0.0.1",
			`save ""`,
			"appendonly no",
			"protected-mode no",
			"loglevel warning",
			"dir " + t.TempDir(),
		}, "\n") + "\n"
		r.cmd = exec.Command("redis-server", "-")
		r.cmd.Stdin = strings.NewReader(conf)
		r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
		if err := r.cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		go func() { _ = r.cmd.Wait(); close(r.done) }()
		if lastErr = r.waitPing(pki); lastErr == nil {
			t.Cleanup(func() {
				_ = r.cmd.Process.Kill()
				<-r.done
				if t.Failed() {
					t.Logf("redis-server (TLS) %s output:\n%s", r.Addr(), interestingRedisOutput(r.out.String()))
				}
			})
			return r
		}
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	t.Fatalf("start redis-server with TLS: %v", lastErr)
	return nil
}

func (r *tlsRedis) waitPing(pki tlsPKI) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			return fmt.Errorf("redis-server on port %d exited: %s", r.port, r.out.String())
		default:
		}
		c := r.client(pki)
		err := c.Ping(context.Background()).Err()
		_ = c.Close()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %d did not answer PING over TLS: %s", r.port, r.out.String())
}

// client talks to the server directly, over TLS.
func (r *tlsRedis) client(pki tlsPKI) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: r.Addr(), TLSConfig: pki.ClientConfig(false), MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, DisableIdentity: true,
	})
}

func TestTLSBackends(t *testing.T) {
	t.Parallel()
	if !redisHasTLS(t) {
		t.Skip("this redis-server was built without TLS: backend TLS is not tested")
	}
	pki := writePKI(t)
	var flags []string
	var rs []*tlsRedis
	for range 3 {
		r := startTLSRedis(t, pki)
		rs = append(rs, r)
		flags = append(flags, "-backend", r.URL())
	}
	p := startProxy(t, nil, fmt.Sprintf("backend_tls {\n  ca_file = %q\n}\n", pki.CA), flags...)
	c := p.Client(nil)
	ctx := testCtx(t, 10*time.Second)
	res, err := c.Do(ctx, "LOCK", "tls-backend", "10000").Slice()
	if err != nil || len(res) != 3 {
		t.Fatalf("LOCK = %v, %v", res, err)
	}
	token, _ := res[0].(string)
	held := 0
	for _, r := range rs {
		rc := r.client(pki)
		keys, err := rc.Keys(ctx, "*").Result()
		_ = rc.Close()
		if err != nil {
			t.Fatalf("KEYS on %s over TLS: %v", r.Addr(), err)
		}
		for _, k := range keys {
			if strings.Contains(k, "tls-backend") {
				held++
			}
		}
	}
	if held < 2 {
		t.Fatalf("the lock key is on %d of 3 TLS backends, want a quorum", held)
	}
	if n, err := c.Do(ctx, "UNLOCK", "tls-backend", token).Int(); err != nil || n != 1 {
		t.Fatalf("UNLOCK = %d, %v", n, err)
	}

	t.Run("untrusted-backend", func(t *testing.T) {
		// Without backend_tls the system roots do not know the test CA:
		// no backend is reachable, so no quorum.
		p := startProxy(t, nil, "", flags...)
		err := p.Client(nil).Do(testCtx(t, 10*time.Second), "LOCK", "tls-untrusted", "10000").Err()
		if err == nil || !strings.Contains(err.Error(), "NOQUORUM") {
			t.Fatalf("LOCK with unverifiable backends = %v, want NOQUORUM", err)
		}
	})
}
