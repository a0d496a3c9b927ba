package tests

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/zeebo/xxh3"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// xxh3Hex is what DIGEST answers for value (Redis 8.4).
func xxh3Hex(value string) string { return fmt.Sprintf("%016x", xxh3.HashString(value)) }

// TestConditionalWrites: SET IFEQ|IFNE|IFDEQ|IFDNE, DELEX with each
// condition and DIGEST answer as Redis 8.4 does, over redis-server 7
// backends, and leave on the backends what they say.
func TestConditionalWrites(t *testing.T) {
	t.Parallel()
	_, p, bs := interopSetup(t)
	ctx := testCtx(t, 60*time.Second)
	c := p.Client(nil)
	const key = "cond:k"

	isNull := func(cmd *redis.Cmd) bool { return errors.Is(cmd.Err(), redis.Nil) }
	text := func(args ...any) string {
		t.Helper()
		s, err := c.Do(ctx, args...).Text()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return s
	}
	integer := func(args ...any) int64 {
		t.Helper()
		n, err := c.Do(ctx, args...).Int64()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return n
	}

	// A free key: DIGEST null, IFEQ/IFDEQ do not create it, IFNE/IFDNE do.
	if cmd := c.Do(ctx, "DIGEST", key); !isNull(cmd) {
		t.Fatalf("DIGEST of a free key = %v, want null", cmd)
	}
	if cmd := c.Do(ctx, "SET", key, "a", "IFEQ", "a", "PX", 20000); !isNull(cmd) {
		t.Fatalf("SET IFEQ on a free key = %v, want null", cmd)
	}
	if cmd := c.Do(ctx, "SET", key, "a", "IFDEQ", xxh3Hex("a"), "PX", 20000); !isNull(cmd) {
		t.Fatalf("SET IFDEQ on a free key = %v, want null", cmd)
	}
	if cmd := c.Do(ctx, "SET", key, "a", "IFNE", "x", "PX", 20000, "GET"); !isNull(cmd) {
		t.Fatalf("SET IFNE … GET on a free key = %v, want null (and the key written)", cmd)
	}
	requireQuorum(ctx, t, bs, key, "a", "after SET IFNE on a free key")
	if got := text("DIGEST", key); got != xxh3Hex("a") {
		t.Fatalf("DIGEST = %q, want %q", got, xxh3Hex("a"))
	}

	// IFNE/IFDNE of the value held: nothing written.
	if cmd := c.Do(ctx, "SET", key, "b", "IFNE", "a"); !isNull(cmd) {
		t.Fatalf("SET b IFNE a on a = %v, want null", cmd)
	}
	if got := text("SET", key, "b", "IFDNE", xxh3Hex("a"), "GET"); got != "a" {
		t.Fatalf("SET b IFDNE digest(a) GET on a = %q, want a (not written)", got)
	}
	requireQuorum(ctx, t, bs, key, "a", "after unmet conditions")

	// IFDEQ of the value held, upper-case digest, KEEPTTL: written, ttl kept.
	if got := text("SET", key, "b", "IFDEQ", fmt.Sprintf("%016X", xxh3.HashString("a")), "KEEPTTL"); got != "OK" {
		t.Fatalf("SET b IFDEQ DIGEST(a) KEEPTTL = %q, want OK", got)
	}
	requireQuorum(ctx, t, bs, key, "b", "after SET IFDEQ")
	if n := countAbove(backendPTTLs(ctx, t, bs, key), 10*time.Second); n < interopQuorum {
		t.Fatalf("after SET IFDEQ KEEPTTL, %d backends keep a ttl above 10s, want %d", n, interopQuorum)
	}

	// DELEX: unmet conditions 0, a met one 1 and the key gone everywhere.
	for _, cond := range [][]any{{"IFEQ", "a"}, {"IFNE", "b"}, {"IFDEQ", xxh3Hex("a")}, {"IFDNE", xxh3Hex("b")}} {
		if n := integer(append([]any{"DELEX", key}, cond...)...); n != 0 {
			t.Fatalf("DELEX %v on b = %d, want 0", cond, n)
		}
	}
	requireQuorum(ctx, t, bs, key, "b", "after DELEX with unmet conditions")
	if n := integer("DELEX", key, "IFDEQ", xxh3Hex("b")); n != 1 {
		t.Fatalf("DELEX IFDEQ digest(b) on b = %d, want 1", n)
	}
	requireNowhere(ctx, t, bs, key, "b", "after DELEX IFDEQ")
	if n := integer("DELEX", key, "IFNE", "zzz"); n != 0 {
		t.Fatalf("DELEX IFNE of a free key = %d, want 0", n)
	}

	// Bad input and other types.
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"DELEX", key, "IFDEQ", "123"}, "ERR must be exactly 16 hexadecimal characters"},
		{[]any{"SET", key, "v", "IFDNE", "zz00000000000000"}, "ERR must be exactly 16 hexadecimal characters"},
		{[]any{"SET", key, "v", "IFEQ", "a", "NX"}, "ERR syntax error"},
		{[]any{"SET", key, "v", "IFEQ", "a", "IFNE", "b"}, "ERR syntax error"},
		{[]any{"DELEX", key, "IFEQ"}, "ERR syntax error"},
		{[]any{"DELEX", key, "IFEQ", "a", "b"}, "ERR syntax error"},
		{[]any{"DIGEST"}, "ERR wrong number of arguments for 'digest' command"},
	} {
		if err := c.Do(ctx, tc.args...).Err(); err == nil || err.Error() != tc.want {
			t.Errorf("%v = %v, want %q", tc.args, err, tc.want)
		}
	}
	if err := c.RPush(ctx, "cond:list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]any{{"SET", "cond:list", "v", "IFEQ", "x"}, {"DELEX", "cond:list", "IFEQ", "x"}, {"DELIFEQ", "cond:list", "x"}, {"DIGEST", "cond:list"}, {"DELEX", "cond:list", "IFNE", "x"}, {"SET", "cond:list", "v", "IFDNE", xxh3Hex("x")}} {
		if err := c.Do(ctx, args...).Err(); err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
			t.Errorf("%v on a list = %v, want WRONGTYPE", args, err)
		}
	}
}

// TestConditionalReleaseWakes: a DELEX whose condition the lock's token
// meets releases a LOCK like UNLOCK, and wakes the WAIT-er queued for it
// at once; a SET IFNE of the token takes nothing from it.
func TestConditionalReleaseWakes(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 60*time.Second)
	info := testkit.Dial(t, p.Addr())
	hello3(t, info)
	holder := p.Client(nil)
	waiter := p.Client(&redis.Options{ReadTimeout: 15 * time.Second})

	for _, release := range []func(token string) []any{
		func(token string) []any { return []any{"DELEX", "w", "IFEQ", token} },
		func(token string) []any { return []any{"DELEX", "w", "IFDEQ", xxh3Hex(token)} },
		func(token string) []any { return []any{"DELEX", "w", "IFNE", "not-the-token"} },
		func(token string) []any { return []any{"DELEX", "w", "IFDNE", xxh3Hex("not-the-token")} },
	} {
		h := mustLock(ctx, t, holder, "w", 10000)
		if got := holder.Do(ctx, "SET", "w", "thief", "IFNE", h.Token, "PX", 5000); !errors.Is(got.Err(), redis.Nil) {
			t.Fatalf("SET w thief IFNE token = %v, want null", got)
		}
		granted := make(chan time.Time, 1)
		go func() {
			defer close(granted)
			got, err := lock(ctx, t, waiter, "w", 10000, "WAIT", 8000)
			if err != nil {
				t.Errorf("waiter: %v", err)
				return
			}
			granted <- time.Now()
			_ = waiter.Do(ctx, "UNLOCK", "w", got.Token).Err()
		}()
		waitersQueued(t, info, "w", 1)
		args := release(h.Token)
		if n, err := holder.Do(ctx, args...).Int64(); err != nil || n != 1 {
			t.Fatalf("%v = %d, %v; want 1", args, n, err)
		}
		released := time.Now()
		at, ok := <-granted
		if !ok {
			t.FailNow()
		}
		if d := at.Sub(released); d > time.Second {
			t.Errorf("%v: the waiter got the lock %v after the release, want at once", args, d)
		}
		testkit.Eventually(t, 5*time.Second, "the waiter to unlock", func() bool { return info.Do("LOCKINFO", "w") == nil })
	}
}
