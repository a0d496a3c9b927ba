package tests

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestScriptKillAtMaxClients: a runaway script by vote is stopped on every
// backend although each is at maxclients (refusing new connections): the
// proxy's SCRIPT KILL goes over the connection it keeps open for it. Once
// the backends accept connections again, LOCK is granted.
func TestScriptKillAtMaxClients(t *testing.T) {
	t.Parallel()
	backends := startCluster(t, 3)
	p := startProxy(t, backends, "script_timeout = \"300ms\"\nnode_timeout = \"100ms\"")
	ctx := testCtx(t, 60*time.Second)
	c := p.Client(&redis.Options{ReadTimeout: 20 * time.Second})
	mustLock(ctx, t, c, "warm", 10000)

	// The kill line sent nothing yet (no password): cmd=NULL.
	for _, b := range backends {
		testkit.Eventually(t, 10*time.Second, "the proxy's SCRIPT KILL connection open on "+b.Addr(), func() bool {
			list, err := b.Client().ClientList(ctx).Result()
			return err == nil && strings.Contains(list, "cmd=NULL")
		})
	}
	// Each backend full: maxclients is the clients it has, this test's
	// admin connection included (kept to lift the limit afterwards).
	admins := make([]*redis.Conn, len(backends))
	for i, b := range backends {
		admin := redis.NewClient(&redis.Options{Addr: b.Addr(), DisableIdentity: true, MaxRetries: -1, PoolSize: 1})
		t.Cleanup(func() { _ = admin.Close() })
		conn := admin.Conn()
		admins[i] = conn
		info, err := conn.Info(ctx, "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(infoLine(info, "connected_clients"))
		if n == 0 {
			t.Fatalf("INFO clients of %s: %q", b.Addr(), info)
		}
		if err := conn.ConfigSet(ctx, "maxclients", strconv.Itoa(n)).Err(); err != nil {
			t.Fatalf("CONFIG SET maxclients %d on %s: %v", n, b.Addr(), err)
		}
	}
	if line := firstLine(t, backends[0].Addr()); !strings.Contains(line, "max number of clients") {
		t.Fatalf("a new connection to a full backend got %q", line)
	}

	start := time.Now()
	err := c.Eval(ctx, runawayScript, []string{"runaway"}, runawayArgv...).Err()
	t.Logf("runaway script answered after %v: %v", time.Since(start), err)
	if err == nil || !strings.Contains(err.Error(), "script timed out") || !strings.Contains(err.Error(), "stopped on 3") {
		t.Fatalf("EVAL of a runaway script at maxclients = %v, want it stopped on 3 backends", err)
	}
	// Redis answers SCRIPT KILL's OK before the script stops at its next
	// hook check: until it has, a backend answers BUSY.
	for i, conn := range admins {
		var err error
		testkit.Eventually(t, 10*time.Second, "CONFIG SET maxclients on "+backends[i].Addr()+" once its script stopped", func() bool {
			err = conn.ConfigSet(ctx, "maxclients", "10000").Err()
			return err == nil || !strings.HasPrefix(err.Error(), "BUSY")
		})
		if err != nil {
			t.Fatalf("CONFIG SET maxclients on %s: %v", backends[i].Addr(), err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "a LOCK after the script was stopped", func() bool {
		_, err := lock(ctx, t, c, "after", 10000)
		return err == nil
	})
}

// infoLine is field's value in an INFO text, "" when absent.
func infoLine(info, field string) string {
	v, _ := infoValue(info, field)
	return v
}

// firstLine dials addr, sends PING inline and returns the first line back.
func firstLine(t *testing.T, addr string) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err.Error()
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = nc.Write([]byte("PING\r\n"))
	line, _ := bufio.NewReader(nc).ReadString('\n')
	return line
}
