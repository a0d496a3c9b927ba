package tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// seConn replays what StackExchange.Redis 2.x sends, byte for byte, on a
// raw connection. Unlike testkit.Conn it returns errors instead of
// failing the test, so worker goroutines can use it.
type seConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialSE(t testing.TB, addr string) *seConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &seConn{c: c, r: bufio.NewReader(c)}
}

// pipeline writes every command in one write, as the multiplexer does, and
// reads one reply per command.
func (s *seConn) pipeline(cmds ...[]string) ([]any, error) {
	var buf []byte
	for _, cmd := range cmds {
		buf = append(buf, testkit.AppendCmd(nil, cmd...)...)
	}
	_ = s.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.c.Write(buf); err != nil {
		return nil, err
	}
	out := make([]any, len(cmds))
	for i := range cmds {
		v, err := testkit.ParseReply(s.r)
		if err != nil {
			return out, fmt.Errorf("reply to %q: %w", cmds[i], err)
		}
		out[i] = v
	}
	return out, nil
}

// do sends one command and reads its reply.
func (s *seConn) do(args ...string) (any, error) {
	v, err := s.pipeline(args)
	if err != nil {
		return nil, err
	}
	return v[0], nil
}

// ttlArgs is how StackExchange.Redis writes an expiry: EX for whole
// seconds, else PX.
func ttlArgs(ttl time.Duration) []string {
	if ttl%time.Second == 0 {
		return []string{"EX", strconv.FormatInt(int64(ttl/time.Second), 10)}
	}
	return []string{"PX", strconv.FormatInt(ttl.Milliseconds(), 10)}
}

// lockTake is LockTake: SET k v EX s|PX ms NX. It returns the reply.
func (s *seConn) lockTake(key, value string, ttl time.Duration) (any, error) {
	return s.do(append(append([]string{"SET", key, value}, ttlArgs(ttl)...), "NX")...)
}

// lockTx is LockRelease / LockExtend below Redis 8.4: WATCH k, GET k; the
// client compares; on a match MULTI, op, EXEC pipelined, else UNWATCH. It
// returns whether EXEC succeeded and every reply, for error messages.
func (s *seConn) lockTx(key, value string, op []string) (bool, []any, error) {
	pre, err := s.pipeline([]string{"WATCH", key}, []string{"GET", key})
	if err != nil {
		return false, pre, err
	}
	if pre[0] != "OK" {
		return false, pre, fmt.Errorf("WATCH %s = %#v, want OK", key, pre[0])
	}
	if got, _ := pre[1].(string); got != value {
		un, err := s.do("UNWATCH")
		if err == nil && un != "OK" {
			err = fmt.Errorf("UNWATCH = %#v, want OK", un)
		}
		return false, append(pre, un), err
	}
	tx, err := s.pipeline([]string{"MULTI"}, op, []string{"EXEC"})
	all := append(pre, tx...)
	if err != nil {
		return false, all, err
	}
	if tx[0] != "OK" || tx[1] != "QUEUED" {
		return false, all, fmt.Errorf("MULTI, %q = %#v, %#v; want OK, QUEUED", op, tx[0], tx[1])
	}
	switch v := tx[2].(type) {
	case nil:
		return false, all, nil
	case []any:
		if len(v) == 1 && v[0] == int64(1) {
			return true, all, nil
		}
	}
	return false, all, fmt.Errorf("EXEC = %#v, want [1] or null", tx[2])
}

func (s *seConn) lockRelease(key, value string) (bool, []any, error) {
	return s.lockTx(key, value, []string{"DEL", key})
}

func (s *seConn) lockExtend(key, value string, ttl time.Duration) (bool, []any, error) {
	if ttl%time.Second == 0 {
		return s.lockTx(key, value, []string{"EXPIRE", key, strconv.FormatInt(int64(ttl/time.Second), 10)})
	}
	return s.lockTx(key, value, []string{"PEXPIRE", key, strconv.FormatInt(ttl.Milliseconds(), 10)})
}

// redisVersionRE finds the advertised version in INFO server.
var redisVersionRE = regexp.MustCompile(`(?m)^redis_version:(\d+)\.(\d+)\.(\d+)\r?$`)

// TestInteropStackExchange: the StackExchange.Redis handshake and its lock
// calls, replayed on raw connections.
func TestInteropStackExchange(t *testing.T) {
	t.Parallel()
	_, p, bs := interopSetup(t)
	ctx := testCtx(t, 60*time.Second)

	t.Run("handshake", func(t *testing.T) {
		s := dialSE(t, p.Addr())
		const guid = "9f6b2a0e-4c1d-4b8e-9a57-3d2f1c0e8b7a"
		cmds := [][]string{
			{"CLIENT", "SETNAME", "MYHOST(SE.Redis-v2.8.16.12844)"},
			{"CLIENT", "SETINFO", "lib-name", "SE.Redis"},
			{"CLIENT", "SETINFO", "lib-ver", "2.8.16"},
			{"CLIENT", "ID"},
			{"CONFIG", "GET", "timeout"},
			{"CONFIG", "GET", "slave-read-only"},
			{"CONFIG", "GET", "databases"},
			{"SENTINEL", "MASTERS"},
			{"INFO", "replication"},
			{"INFO", "server"},
			{"CLUSTER", "NODES"},
			{"GET", "__Booksleeve_TieBreak"},
			{"ECHO", guid},
		}
		got, err := s.pipeline(cmds...)
		if err != nil {
			t.Fatalf("pipelined handshake: %v (replies so far %#v)", err, got)
		}
		want := func(i int, ok bool, what string) {
			t.Helper()
			if !ok {
				t.Errorf("%q = %#v, want %s", cmds[i], got[i], what)
			}
		}
		want(0, got[0] == "OK", "OK")
		want(1, got[1] == "OK", "OK")
		want(2, got[2] == "OK", "OK")
		_, isInt := got[3].(int64)
		want(3, isInt, "an integer id")
		for i := 4; i <= 6; i++ {
			a, isArr := got[i].([]any)
			want(i, isArr && len(a)%2 == 0, "a flat name/value array")
		}
		// Every proxy answers the Sentinel protocol for its tier, so
		// SENTINEL MASTERS is an array (SE.Redis 2.x then marks the server
		// a sentinel), but INFO server, read after it in this same
		// handshake, says redis_mode:standalone, and that is what SE.Redis
		// keeps: it treats the proxy as a standalone master.
		masters, isArr := got[7].([]any)
		want(7, isArr && len(masters) == 1, "the tier's master entry")
		repl, _ := got[8].(string)
		want(8, strings.Contains(repl, "role:master"), "a bulk string with role:master")
		server, _ := got[9].(string)
		want(9, strings.Contains(server, "redis_mode:standalone"), "a bulk string with redis_mode:standalone, after SENTINEL MASTERS")
		m := redisVersionRE.FindStringSubmatch(server)
		want(9, m != nil, "a bulk string with redis_version:x.y.z")
		ce, _ := got[10].(testkit.Error)
		want(10, strings.Contains(string(ce), "cluster support disabled"), "an error saying cluster support disabled")
		want(11, got[11] == nil, "null")
		want(12, got[12] == guid, "the exact guid")
		if m != nil {
			major, _ := strconv.Atoi(m[1])
			minor, _ := strconv.Atoi(m[2])
			if major < 8 || major == 8 && minor < 4 {
				t.Errorf("INFO server advertises redis_version %s.%s.%s: StackExchange.Redis would take the WATCH/MULTI transaction instead of the ≥ 8.4 path (SET IFEQ / DELEX) that the proxy serves in one round", m[1], m[2], m[3])
			}
			t.Logf("advertised redis_version %s.%s.%s: StackExchange.Redis releases with DELEX … IFEQ and extends with SET … IFEQ", m[1], m[2], m[3])
		}

		sub := dialSE(t, p.Addr())
		v, err := sub.do("SUBSCRIBE", "__Booksleeve_MasterChanged")
		if err != nil || fmt.Sprint(v) != fmt.Sprint([]any{"subscribe", "__Booksleeve_MasterChanged", int64(1)}) {
			t.Errorf("SUBSCRIBE __Booksleeve_MasterChanged = %#v, %v; want [subscribe __Booksleeve_MasterChanged 1]", v, err)
		}
		// Relayed: the subscription connection gets the message once (what
		// makes StackExchange.Redis reconfigure), and PUBLISH counts the
		// proxy's subscriber connection on the backends.
		if v, err := s.do("PUBLISH", "__Booksleeve_MasterChanged", "blah"); err != nil || v != int64(1) {
			t.Errorf("PUBLISH __Booksleeve_MasterChanged blah = %#v, %v; want 1", v, err)
		}
		_ = sub.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		v, err = testkit.ParseReply(sub.r)
		if err != nil || fmt.Sprint(v) != fmt.Sprint([]any{"message", "__Booksleeve_MasterChanged", "blah"}) {
			t.Errorf("message on the subscription connection = %#v, %v; want [message __Booksleeve_MasterChanged blah]", v, err)
		}
		// Nothing else came: the next thing read is PING's reply.
		v, err = sub.do("PING")
		if err != nil || fmt.Sprint(v) != fmt.Sprint([]any{"pong", ""}) {
			t.Errorf("PING on the subscription connection = %#v, %v; want [pong ]", v, err)
		}
	})

	t.Run("below-8.4", func(t *testing.T) {
		s := dialSE(t, p.Addr())
		other := dialSE(t, p.Addr())
		const key = "se:lock"
		mustReply(t, "LockTake: SET se:lock a PX 5000 NX", "OK")(s.do("SET", key, "a", "PX", "5000", "NX"))
		requireQuorum(ctx, t, bs, key, "a", "after LockTake")
		mustReply(t, "LockTake by another: SET se:lock b EX 5 NX", nil)(other.lockTake(key, "b", 5*time.Second))
		mustReply(t, "LockQuery: GET se:lock", "a")(other.do("GET", key))

		// LockExtend with PEXPIRE, then EXPIRE.
		mustTx(t, "LockExtend (PEXPIRE 8500)", true)(s.lockExtend(key, "a", 8500*time.Millisecond))
		if n := countAbove(backendPTTLs(ctx, t, bs, key), 6*time.Second); n < interopQuorum {
			t.Fatalf("after LockExtend to 8.5s, %d backends have a ttl above 6s, want at least %d", n, interopQuorum)
		}
		mustTx(t, "LockExtend (EXPIRE 12)", true)(s.lockExtend(key, "a", 12*time.Second))
		if n := countAbove(backendPTTLs(ctx, t, bs, key), 10*time.Second); n < interopQuorum {
			t.Fatalf("after LockExtend to 12s, %d backends have a ttl above 10s, want at least %d", n, interopQuorum)
		}

		// The wrong owner: the client sees the mismatch and sends UNWATCH.
		mustTx(t, "LockRelease by the wrong owner", false)(other.lockRelease(key, "b"))
		mustTx(t, "LockExtend by the wrong owner", false)(other.lockExtend(key, "b", 5*time.Second))
		requireQuorum(ctx, t, bs, key, "a", "after the wrong owner's release and extend")

		// A command no script by vote can call is refused inside MULTI,
		// and EXEC then aborts.
		got, err := s.pipeline([]string{"WATCH", key}, []string{"GET", key}, []string{"MULTI"}, []string{"LOCK", key, "1000"}, []string{"EXEC"})
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != "OK" || got[1] != "a" || got[2] != "OK" {
			t.Fatalf("WATCH, GET, MULTI = %#v, want OK, a, OK", got[:3])
		}
		if _, isErr := got[3].(testkit.Error); !isErr {
			t.Fatalf("LOCK inside MULTI = %#v, want an error", got[3])
		}
		if e, _ := got[4].(testkit.Error); string(e) != "EXECABORT Transaction discarded because of previous errors." {
			t.Fatalf("EXEC after an error inside MULTI = %#v, want EXECABORT Transaction discarded because of previous errors.", got[4])
		}
		requireQuorum(ctx, t, bs, key, "a", "after the aborted transaction")

		// LockRelease.
		mustTx(t, "LockRelease", true)(s.lockRelease(key, "a"))
		requireNowhere(ctx, t, bs, key, "a", "after LockRelease")
		mustReply(t, "LockQuery after release: GET se:lock", nil)(s.do("GET", key))
		mustTx(t, "second LockRelease", false)(s.lockRelease(key, "a"))

		// The owner changes between GET and EXEC: EXEC answers null and the
		// new owner's lock stays.
		for _, op := range []string{"DEL", "PEXPIRE"} {
			mustReply(t, "SET se:lock a PX 2000 NX", "OK")(s.do("SET", key, "a", "PX", "2000", "NX"))
			pre, err := s.pipeline([]string{"WATCH", key}, []string{"GET", key})
			if err != nil || pre[0] != "OK" || pre[1] != "a" {
				t.Fatalf("WATCH, GET = %#v, %v; want OK, a", pre, err)
			}
			waitExpired(ctx, t, bs, key)
			mustReply(t, "SET se:lock b PX 5000 NX after a's expiry", "OK")(other.do("SET", key, "b", "PX", "5000", "NX"))
			cmd := []string{op, key}
			if op == "PEXPIRE" {
				cmd = append(cmd, "20000")
			}
			tx, err := s.pipeline([]string{"MULTI"}, cmd, []string{"EXEC"})
			if err != nil {
				t.Fatal(err)
			}
			if tx[0] != "OK" || tx[1] != "QUEUED" || tx[2] != nil {
				t.Fatalf("MULTI, %q, EXEC after the lock changed owner = %#v, want OK, QUEUED, null", cmd, tx)
			}
			requireQuorum(ctx, t, bs, key, "b", "after a stale "+op+" transaction")
			if op == "PEXPIRE" && countAbove(backendPTTLs(ctx, t, bs, key), 6*time.Second) != 0 {
				t.Fatalf("a stale PEXPIRE transaction raised the new owner's ttl")
			}
			mustTx(t, "LockRelease by the new owner", true)(other.lockRelease(key, "b"))
		}
	})

	// The multiplexer puts every thread's commands on one connection: many
	// LockTakes in flight at once, release transactions between them, and
	// more LockTakes written right behind each EXEC.
	t.Run("many-in-flight", func(t *testing.T) {
		s := dialSE(t, p.Addr())
		const n = 40
		key := func(i int) string { return fmt.Sprintf("se:mux:%d", i) }
		var takes [][]string
		for i := range n {
			takes = append(takes, append(append([]string{"SET", key(i), "v" + key(i)}, ttlArgs(10*time.Second)...), "NX"))
		}
		got, err := s.pipeline(takes...)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != "OK" {
				t.Fatalf("LockTake %d of %d in flight = %#v, want OK", i, n, v)
			}
		}
		for i := range n {
			pre, err := s.pipeline([]string{"WATCH", key(i)}, []string{"GET", key(i)})
			if err != nil || pre[0] != "OK" || pre[1] != "v"+key(i) {
				t.Fatalf("WATCH, GET %s = %#v, %v", key(i), pre, err)
			}
			// EXEC, then two LockTakes of new keys and a LockQuery, in one write.
			j := n + 2*i
			tx, err := s.pipeline([]string{"MULTI"}, []string{"DEL", key(i)}, []string{"EXEC"},
				append(append([]string{"SET", key(j), "v" + key(j)}, ttlArgs(10*time.Second)...), "NX"),
				append(append([]string{"SET", key(j + 1), "v" + key(j+1)}, ttlArgs(10*time.Second)...), "NX"),
				[]string{"GET", key(i)})
			if err != nil {
				t.Fatal(err)
			}
			if tx[0] != "OK" || tx[1] != "QUEUED" || fmt.Sprint(tx[2]) != "[1]" || tx[3] != "OK" || tx[4] != "OK" || tx[5] != nil {
				t.Fatalf("release of %s with takes in flight = %#v, want OK QUEUED [1] OK OK nil", key(i), tx)
			}
		}
		for i := range n {
			requireNowhere(ctx, t, bs, key(i), "v"+key(i), "after its release")
		}
		requireQuorum(ctx, t, bs, key(3*n-1), "v"+key(3*n-1), "after the last LockTake")
	})

	t.Run("from-8.4", func(t *testing.T) {
		s := dialSE(t, p.Addr())
		const key = "se:lock84"
		mustReply(t, "LockTake: SET se:lock84 v EX 5 NX", "OK")(s.lockTake(key, "v", 5*time.Second))
		requireQuorum(ctx, t, bs, key, "v", "after LockTake")
		mustReply(t, "LockExtend by the wrong owner: SET se:lock84 w PX 8000 IFEQ w", nil)(s.do("SET", key, "w", "PX", "8000", "IFEQ", "w"))
		mustReply(t, "LockExtend: SET se:lock84 v PX 8000 IFEQ v", "OK")(s.do("SET", key, "v", "PX", "8000", "IFEQ", "v"))
		if n := countAbove(backendPTTLs(ctx, t, bs, key), 6*time.Second); n < interopQuorum {
			t.Fatalf("after SET IFEQ with PX 8000, %d backends have a ttl above 6s, want at least %d", n, interopQuorum)
		}
		mustReply(t, "LockRelease by the wrong owner: DELEX se:lock84 IFEQ w", int64(0))(s.do("DELEX", key, "IFEQ", "w"))
		requireQuorum(ctx, t, bs, key, "v", "after DELEX with the wrong value")
		mustReply(t, "LockRelease: DELEX se:lock84 IFEQ v", int64(1))(s.do("DELEX", key, "IFEQ", "v"))
		requireNowhere(ctx, t, bs, key, "v", "after DELEX")
		mustReply(t, "second DELEX se:lock84 IFEQ v", int64(0))(s.do("DELEX", key, "IFEQ", "v"))
		mustReply(t, "SET se:lock84 v PX 5000 IFEQ v on an absent key", nil)(s.do("SET", key, "v", "PX", "5000", "IFEQ", "v"))
		if n, err := backendHolders(ctx, bs, key, "v"); err != nil || n != 0 {
			t.Fatalf("SET IFEQ on an absent key created it on %d backends (%v)", n, err)
		}
	})

	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 4, 6
		const key = "se:contended"
		conns := make([]*seConn, workers)
		for i := range conns {
			conns[i] = dialSE(t, p.Addr())
		}
		var flag inUse
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				s := conns[w]
				for r := 0; r < rounds; r++ {
					tok := fmt.Sprintf("se-%d-%d", w, r)
					if err := takeWithRetry(ctx, s, key, tok); err != nil {
						t.Errorf("worker %d round %d: %v", w, r, err)
						return
					}
					if !flag.enter() {
						t.Errorf("worker %d round %d: LockTake won while another worker was inside", w, r)
					}
					if n, err := backendHolders(ctx, bs, key, tok); err != nil || n < interopQuorum {
						t.Errorf("worker %d round %d: held lock sits on %d backends (%v), want at least %d", w, r, n, err, interopQuorum)
					}
					if ok, replies, err := s.lockExtend(key, tok, 3*time.Second); err != nil || !ok {
						t.Errorf("worker %d round %d: LockExtend while held = %v, %v (replies %#v); want true", w, r, ok, err, replies)
					}
					time.Sleep(10 * time.Millisecond)
					flag.leave()
					if ok, replies, err := s.lockRelease(key, tok); err != nil || !ok {
						t.Errorf("worker %d round %d: LockRelease while held = %v, %v (replies %#v); want true", w, r, ok, err, replies)
					}
				}
			}(w)
		}
		wg.Wait()
		if v := flag.violations.Load(); v != 0 {
			t.Fatalf("%d of %d acquisitions found another worker inside", v, flag.entries.Load())
		}
	})
}

// takeWithRetry loops LockTake with a 2s expiry until it wins.
func takeWithRetry(ctx context.Context, s *seConn, key, tok string) error {
	for {
		v, err := s.lockTake(key, tok, 2*time.Second)
		if err != nil {
			return err
		}
		switch v {
		case "OK":
			return nil
		case nil:
		default:
			return fmt.Errorf("LockTake SET %s %s EX 2 NX = %#v, want OK or null", key, tok, v)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("LockTake did not win before the test's deadline")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// mustReply fails the test unless a command's reply is want.
func mustReply(t *testing.T, what string, want any) func(any, error) {
	t.Helper()
	return func(got any, err error) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s = %#v, %v; want %#v", what, got, err, want)
		}
	}
}

// mustTx fails the test unless a lock transaction's outcome is want.
func mustTx(t *testing.T, what string, want bool) func(bool, []any, error) {
	t.Helper()
	return func(ok bool, replies []any, err error) {
		t.Helper()
		if err != nil || ok != want {
			t.Fatalf("%s = %v, %v (replies %#v); want %v", what, ok, err, replies, want)
		}
	}
}
