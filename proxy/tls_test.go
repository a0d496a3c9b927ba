package proxy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, all ECDSA P-256.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate
	client tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: "test leaf"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p := &testPKI{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.server = leaf(2, x509.ExtKeyUsageServerAuth)
	p.client = leaf(3, x509.ExtKeyUsageClientAuth)
	return p
}

// serverConfig is the listener's TLS; with clientCA, clients need a
// certificate.
func (p *testPKI) serverConfig(clientCA bool) *tls.Config {
	tc := &tls.Config{Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS12}
	if clientCA {
		tc.ClientCAs = p.pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc
}

// clientConfig trusts the CA; withCert presents the client certificate.
func (p *testPKI) clientConfig(withCert bool) *tls.Config {
	tc := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if withCert {
		tc.Certificates = []tls.Certificate{p.client}
	}
	return tc
}

func tlsClient(t *testing.T, s *Server, tc *tls.Config) *redis.Client {
	t.Helper()
	rc := redis.NewClient(&redis.Options{
		Addr: s.Addr().String(), TLSConfig: tc, MaxRetries: -1,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second,
	})
	t.Cleanup(func() { rc.Close() })
	return rc
}

// lockUnlock runs PING, LOCK and UNLOCK through rc.
func lockUnlock(t *testing.T, rc *redis.Client, key string) {
	t.Helper()
	ctx := context.Background()
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	res, err := rc.Do(ctx, "LOCK", key, "5000").Slice()
	if err != nil || len(res) != 3 {
		t.Fatalf("LOCK over TLS = %v, %v", res, err)
	}
	if n, err := rc.Do(ctx, "UNLOCK", key, res[0]).Int(); err != nil || n != 1 {
		t.Fatalf("UNLOCK over TLS = %d, %v", n, err)
	}
}

// expectRefused reads from c until the server closes it, within 2s, and
// returns what it sent.
func expectRefused(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var got strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open after 2s (got %q)", got.String())
			}
			return got.String()
		}
	}
}

func TestTLSListener(t *testing.T) {
	pki := newTestPKI(t)
	s := startServer(t, Config{TLS: pki.serverConfig(false)}, "", false)

	lockUnlock(t, tlsClient(t, s, pki.clientConfig(false)), "tls-a")

	// A plaintext client is told and disconnected at once.
	c, rd := dialServer(t, s)
	start := time.Now()
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if got := exchange(t, c, rd, ""); got != errPlaintext {
		t.Fatalf("plaintext client got %q, want %q", got, errPlaintext)
	}
	if rest := expectRefused(t, c); rest != "" {
		t.Fatalf("after the error: %q", rest)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("plaintext client closed after %v", d)
	}

	// A client that does not trust the server's CA fails its handshake.
	bad := tlsClient(t, s, &tls.Config{MinVersion: tls.VersionTLS12})
	if err := bad.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING with an untrusted server certificate succeeded")
	}

	// TLS clients are still served.
	lockUnlock(t, tlsClient(t, s, pki.clientConfig(false)), "tls-b")
}

func TestTLSClientCertificates(t *testing.T) {
	pki := newTestPKI(t)
	s := startServer(t, Config{TLS: pki.serverConfig(true)}, "", false)

	// Without a certificate: the handshake (TLS 1.2) or the first read
	// (TLS 1.3, where the client learns of the refusal late) fails.
	noCert := tlsClient(t, s, pki.clientConfig(false))
	if err := noCert.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING without a client certificate succeeded")
	}
	c, err := tls.Dial("tcp", s.Addr().String(), pki.clientConfig(false))
	if err == nil {
		defer c.Close()
		_, _ = c.Write([]byte("PING\r\n"))
		if got := expectRefused(t, c); got != "" {
			t.Fatalf("client without a certificate got %q", got)
		}
	}

	lockUnlock(t, tlsClient(t, s, pki.clientConfig(true)), "mtls")
}

// TestTLSSilentClient checks that a client that never sends its hello is
// dropped after the handshake timeout, while others are served meanwhile.
func TestTLSSilentClient(t *testing.T) {
	pki := newTestPKI(t)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newTLSListener(tcp, pki.serverConfig(false), 300*time.Millisecond, testLogger(t))
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte(line))
			}()
		}
	}()

	silent, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()

	tc, err := tls.Dial("tcp", tcp.Addr().String(), pki.clientConfig(false))
	if err != nil {
		t.Fatalf("TLS client while another stalls: %v", err)
	}
	defer tc.Close()
	if _, err := tc.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(tc).ReadString('\n'); got != "hello\n" {
		t.Fatalf("echo = %q, %v", got, err)
	}

	if got := expectRefused(t, silent); got != "" {
		t.Fatalf("silent client got %q", got)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("silent client dropped after %v, before the handshake timeout", d)
	}
}

// TestTLSWaitThenServe checks the guard's background read over TLS: a
// blocked LOCK … WAIT watches the socket with read deadlines, and the
// connection must read normally after the watch ends.
func TestTLSWaitThenServe(t *testing.T) {
	pki := newTestPKI(t)
	s := startServer(t, Config{TLS: pki.serverConfig(false)}, "", false)
	ctx := context.Background()
	holder := tlsClient(t, s, pki.clientConfig(false))
	res, err := holder.Do(ctx, "LOCK", "w", "5000").Slice()
	if err != nil {
		t.Fatalf("LOCK = %v, %v", res, err)
	}
	// One connection, so the PINGs follow the WAIT on it.
	waiter := redis.NewClient(&redis.Options{
		Addr: s.Addr().String(), TLSConfig: pki.clientConfig(false), MaxRetries: -1,
		PoolSize: 1, ReadTimeout: 3 * time.Second,
	})
	defer waiter.Close()
	got := make(chan error, 1)
	go func() {
		got <- waiter.Do(ctx, "LOCK", "w", "5000", "WAIT", "1500").Err()
	}()
	time.Sleep(200 * time.Millisecond)
	if n, err := holder.Do(ctx, "UNLOCK", "w", res[0]).Int(); err != nil || n != 1 {
		t.Fatalf("UNLOCK = %d, %v", n, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("LOCK … WAIT = %v", err)
	}
	for i := range 3 {
		if err := waiter.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING %d after WAIT on the same TLS connection: %v", i, err)
		}
	}
}
