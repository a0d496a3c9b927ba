package redlock

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// The scripts must run the same on miniredis and on a real Redis 7.
func TestScripts(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		checkScripts(t, miniredis.RunT(t).Addr())
	})
	t.Run("redis-server", func(t *testing.T) {
		checkScripts(t, startRedis(t))
	})
}

// startRedis runs a throwaway redis-server (probe_test.go's redisOnPort)
// and returns its address; it skips under -short or without one.
func startRedis(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs redis-server: skipped under -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server in PATH")
	}
	port := freePort(t)
	redisOnPort(t, port)
	return "127.0.0.1:" + port
}

// oneNodeRedlock is a Redlock over the one backend at addr, and a plain
// client of that backend, both closed when the test ends.
func oneNodeRedlock(t *testing.T, addr string) (*Redlock, *redis.Client) {
	t.Helper()
	n, err := DialNode(addr)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]Node{n}, Options{NodeTimeout: testTimeout, Logger: testLogger(t)})
	cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
	t.Cleanup(func() {
		cl.Close()
		r.Close(context.Background())
		n.Close()
	})
	return r, cl
}

func checkScripts(t *testing.T, addr string) {
	ctx := context.Background()
	r, cl := oneNodeRedlock(t, addr)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pttl := func(key string) time.Duration {
		t.Helper()
		d, err := cl.PTTL(ctx, key).Result()
		must(err)
		return d
	}
	must(cl.ScriptFlush(ctx).Err()) // the first runs go through EVAL

	_, err := r.AcquireKeys(ctx, []string{"a", "b"}, "tok", 10*time.Second, IfAbsent)
	must(err)
	_, err = r.AcquireKeys(ctx, []string{"a", "b", "c"}, "tok", 20*time.Second, IfAbsentOrMine)
	must(err)
	if d := pttl("a"); d <= 10*time.Second {
		t.Fatalf("re-acquire left pttl %v", d)
	}
	_, err = r.AcquireKeys(ctx, []string{"a", "d"}, "other", ttl, IfAbsentOrMine)
	mustKind(t, err, ErrHeld)
	v, err := r.ExtendKeys(ctx, []string{"a", "b"}, "tok", 10*time.Second, Add)
	must(err)
	if v <= 25*time.Second || pttl("b") <= 25*time.Second {
		t.Fatalf("add: validity %v, pttl %v", v, pttl("b"))
	}
	_, err = r.ExtendKeys(ctx, []string{"a", "b"}, "tok", 5*time.Second, Replace)
	must(err)
	if d := pttl("a"); d > 5*time.Second {
		t.Fatalf("replace: pttl %v", d)
	}

	got, err := r.Read(ctx, "a")
	if err != nil || !got.Exists || got.Data != "tok" || got.PTTL <= 0 || got.PTTL > 5*time.Second {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	got, err = r.Read(ctx, "nope")
	if err != nil || got != (Value{PTTL: PTTLAbsent}) {
		t.Fatalf("Read absent = %+v, %v", got, err)
	}
	must(r.Write(ctx, "x", "v", 0))
	got, err = r.Read(ctx, "x")
	if err != nil || got != (Value{Exists: true, Data: "v", PTTL: PTTLNoExpiry}) {
		t.Fatalf("Read persistent = %+v, %v", got, err)
	}
	got, err = r.GetSet(ctx, "x", "w", 5*time.Second)
	if err != nil || got != (Value{Exists: true, Data: "v", PTTL: PTTLNoExpiry}) {
		t.Fatalf("GetSet = %+v, %v", got, err)
	}
	got, err = r.GetSet(ctx, "y", "w", 0)
	if err != nil || got != (Value{PTTL: PTTLAbsent}) {
		t.Fatalf("GetSet absent = %+v, %v", got, err)
	}
	_, err = r.CompareAndSet(ctx, "x", "w", "z", ttl)
	must(err)
	_, err = r.CompareAndSet(ctx, "x", "w", "z", ttl)
	mustKind(t, err, ErrNotHeld)
	if n, err := r.Exists(ctx, []string{"a", "b", "x", "nope", "a"}); n != 4 || err != nil {
		t.Fatalf("Exists = %d, %v", n, err)
	}
	states, err := r.ReleaseKeys(ctx, []string{"a", "b", "c", "nope", "x"}, "tok")
	if err != nil || !slices.Equal(states, []KeyState{Released, Released, Released, Absent, Other}) {
		t.Fatalf("ReleaseKeys = %v, %v", states, err)
	}
	if ok, err := r.Expire(ctx, "x", time.Minute); !ok || err != nil {
		t.Fatalf("Expire = %v, %v", ok, err)
	}
	if ok, err := r.Expire(ctx, "nope", time.Minute); ok || err != nil {
		t.Fatalf("Expire absent = %v, %v", ok, err)
	}
	if n, err := r.Delete(ctx, []string{"x", "x", "y"}); n != 2 || err != nil {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	must(r.Write(ctx, "x", "v", time.Minute))
	must(r.FlushAll(ctx))
	if n, err := cl.DBSize(ctx).Result(); n != 0 || err != nil {
		t.Fatalf("DBSIZE after flush = %d, %v", n, err)
	}
	// A key of another type reads as that type, with its ttl.
	must(cl.LPush(ctx, "list", "x").Err())
	must(cl.PExpire(ctx, "list", time.Minute).Err())
	lv, err := r.Read(ctx, "list")
	if err != nil || !lv.Exists || lv.Type != "list" || lv.Data != "" || lv.PTTL <= 0 || lv.PTTL > time.Minute {
		t.Fatalf("Read of a list = %+v, %v; want a list with a ttl", lv, err)
	}
	// GetSet leaves a key of another type as it is and returns its type
	// (GETSET's WRONGTYPE).
	gv, err := r.GetSet(ctx, "list", "v", 0)
	if err != nil || !gv.Exists || gv.Type != "list" {
		t.Fatalf("GetSet of a list = %+v, %v; want the list's type", gv, err)
	}
	if kind, err := cl.Type(ctx, "list").Result(); kind != "list" || err != nil {
		t.Fatalf("TYPE after GetSet of a list = %q, %v", kind, err)
	}
}
