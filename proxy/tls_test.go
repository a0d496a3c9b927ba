package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

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

func TestTLSListener(t *testing.T) {
	pki := testkit.NewPKI(t)
	s := startServer(t, Config{TLS: pki.ServerConfig(false)}, "", false)

	lockUnlock(t, tlsClient(t, s, pki.ClientConfig(false)), "tls-a")

	// A plaintext client is told and disconnected at once (well before a
	// TLS handshake would time out).
	c := dialServer(t, s)
	c.SendCmd("PING")
	want := strings.TrimSuffix(strings.TrimPrefix(errPlaintext, "-"), "\r\n")
	if got := c.ReadReply(); got != testkit.Error(want) {
		t.Fatalf("plaintext client got %#v, want -%s", got, want)
	}
	c.ExpectClosed(2 * time.Second)

	// A client that does not trust the server's CA fails its handshake.
	bad := tlsClient(t, s, &tls.Config{MinVersion: tls.VersionTLS12})
	if err := bad.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING with an untrusted server certificate succeeded")
	}

	// TLS clients are still served.
	lockUnlock(t, tlsClient(t, s, pki.ClientConfig(false)), "tls-b")
}

func TestTLSClientCertificates(t *testing.T) {
	pki := testkit.NewPKI(t)
	s := startServer(t, Config{TLS: pki.ServerConfig(true)}, "", false)

	// Without a certificate: the handshake (TLS 1.2) or the first read
	// (TLS 1.3, where the client learns of the refusal late) fails.
	noCert := tlsClient(t, s, pki.ClientConfig(false))
	if err := noCert.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING without a client certificate succeeded")
	}
	nc, err := tls.Dial("tcp", s.Addr().String(), pki.ClientConfig(false))
	if err == nil {
		c := testkit.NewConn(t, nc)
		_, _ = nc.Write([]byte("PING\r\n"))
		c.ExpectClosed(2 * time.Second)
	}

	lockUnlock(t, tlsClient(t, s, pki.ClientConfig(true)), "mtls")
}

// TestTLSSilentClient checks that a client that never sends its hello is
// dropped after the handshake timeout, while others are served meanwhile.
func TestTLSSilentClient(t *testing.T) {
	pki := testkit.NewPKI(t)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const handshakeTimeout = 300 * time.Millisecond
	ln := newTLSListener(tcp, pki.ServerConfig(false), handshakeTimeout, redlocktest.Logger(t))
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

	// The handshake timeout starts when the listener accepts, which is
	// after start.
	start := time.Now()
	nc, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	silent := testkit.NewConn(t, nc)

	tc, err := tls.Dial("tcp", tcp.Addr().String(), pki.ClientConfig(false))
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

	silent.ExpectClosed(5 * time.Second)
	if d := time.Since(start); d < handshakeTimeout {
		t.Fatalf("silent client dropped after %v, before the handshake timeout", d)
	}
}

// TestTLSWaitThenServe checks the guard's background read over TLS: a
// blocked LOCK … WAIT watches the socket with read deadlines, and the
// connection must read normally after the watch ends.
func TestTLSWaitThenServe(t *testing.T) {
	pki := testkit.NewPKI(t)
	s := startServer(t, Config{TLS: pki.ServerConfig(false)}, "", false)
	ctx := context.Background()
	holder := tlsClient(t, s, pki.ClientConfig(false))
	res, err := holder.Do(ctx, "LOCK", "w", "5000").Slice()
	if err != nil {
		t.Fatalf("LOCK = %v, %v", res, err)
	}
	// One connection, so the PINGs follow the WAIT on it.
	waiter := redis.NewClient(&redis.Options{
		Addr: s.Addr().String(), TLSConfig: pki.ClientConfig(false), MaxRetries: -1,
		PoolSize: 1, ReadTimeout: 10 * time.Second,
	})
	defer waiter.Close()
	got := make(chan error, 1)
	go func() {
		got <- waiter.Do(ctx, "LOCK", "w", "5000", "WAIT", "5000").Err()
	}()
	testkit.Eventually(t, 5*time.Second, "the WAIT to be queued", func() bool {
		info, _ := holder.Info(ctx, "clients").Result()
		return strings.Contains(info, "blocked_clients:1\r\n")
	})
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
