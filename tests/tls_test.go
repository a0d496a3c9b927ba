package tests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
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
)

// pkiFiles is a test CA and certificates for 127.0.0.1 written as PEM files.
type pkiFiles struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	pool                                             *x509.CertPool
	client                                           tls.Certificate
}

// writePKI generates a CA (ECDSA P-256), a server and a client
// certificate signed by it, and writes them to a temporary directory.
func writePKI(t *testing.T) *pkiFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redlock-proxy test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &pkiFiles{ca: write("ca.pem", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string, cert tls.Certificate) {
		key := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "PRIVATE KEY", keyDER),
			tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p.serverCert, p.serverKey, _ = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey, p.client = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// clientTLS trusts the test CA; withCert presents the client certificate.
func (p *pkiFiles) clientTLS(withCert bool) *tls.Config {
	tc := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if withCert {
		tc.Certificates = []tls.Certificate{p.client}
	}
	return tc
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
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("*2\r\n$4\r\nLOCK\r\n$1\r\nk\r\n")); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 256)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("plaintext client still connected after 2s (got %q)", got)
			}
			break
		}
	}
	if !strings.HasPrefix(string(got), "-ERR") || !strings.Contains(string(got), "TLS") {
		t.Fatalf("plaintext client got %q, want an -ERR about TLS", got)
	}
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
	install := func(p *pkiFiles) {
		t.Helper()
		for from, to := range map[string]string{p.serverCert: cert, p.serverKey: key} {
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
	ping := func(trust *pkiFiles) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.Client(&redis.Options{TLSConfig: trust.clientTLS(false), MaxRetries: -1}).Ping(ctx).Err()
	}
	if err := ping(oldPKI); err != nil {
		t.Fatalf("PING trusting the first CA: %v", err)
	}
	if err := ping(newPKI); err == nil {
		t.Fatal("PING trusting only the second CA succeeded before the rotation")
	}

	install(newPKI)
	p.Signal(syscall.SIGHUP)
	waitFor(t, 5*time.Second, "the TLS reload to be logged", func() bool {
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
	waitFor(t, 5*time.Second, "the failed TLS reload to be logged", func() bool {
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
		p := startProxy(t, backends, fmt.Sprintf("tls {\n  cert_file = %q\n  key_file = %q\n}\n", pki.serverCert, pki.serverKey))
		tlsLockUnlock(t, p.Client(&redis.Options{TLSConfig: pki.clientTLS(false)}), "tls-e2e")
		expectPlaintextRefused(t, p.Addr())
		// Still serving TLS after the plaintext client.
		tlsLockUnlock(t, p.Client(&redis.Options{TLSConfig: pki.clientTLS(false)}), "tls-e2e-2")
		if !strings.Contains(p.Log(), "refused plaintext client") {
			t.Errorf("the proxy did not log the plaintext client")
		}
	})

	t.Run("client-certificates", func(t *testing.T) {
		p := startProxy(t, backends, fmt.Sprintf("tls {\n  cert_file = %q\n  key_file = %q\n  client_ca_file = %q\n}\n",
			pki.serverCert, pki.serverKey, pki.ca))
		noCert := p.Client(&redis.Options{TLSConfig: pki.clientTLS(false)})
		if err := noCert.Ping(testCtx(t, 5*time.Second)).Err(); err == nil {
			t.Fatal("PING without a client certificate succeeded")
		}
		tlsLockUnlock(t, p.Client(&redis.Options{TLSConfig: pki.clientTLS(true)}), "mtls-e2e")
	})

	t.Run("unreadable-key", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing-key.pem")
		cfg := filepath.Join(t.TempDir(), "p.hcl")
		hcl := fmt.Sprintf("listen = \"127.0.0.1:%d\"\nbackends = [%q]\ntls {\n  cert_file = %q\n  key_file = %q\n}\n",
			freePort(t), backends[0].URL(), pki.serverCert, missing)
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
func startTLSRedis(t *testing.T, pki *pkiFiles) *tlsRedis {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		r := &tlsRedis{port: freePort(t), done: make(chan struct{}), out: &syncBuffer{}}
		conf := strings.Join([]string{
			"port 0",
			"tls-port " + strconv.Itoa(r.port),
			"tls-cert-file " + pki.serverCert,
			"tls-key-file " + pki.serverKey,
			"tls-ca-cert-file " + pki.ca,
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

func (r *tlsRedis) waitPing(pki *pkiFiles) error {
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
func (r *tlsRedis) client(pki *pkiFiles) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: r.Addr(), TLSConfig: pki.clientTLS(false), MaxRetries: -1,
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
	p := startProxy(t, nil, fmt.Sprintf("backend_tls {\n  ca_file = %q\n}\n", pki.ca), flags...)
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
