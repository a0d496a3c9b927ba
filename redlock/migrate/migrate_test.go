package migrate

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// migrating is a Redlock over three backends with an old single instance
// (New, its Options.Mirror) behind a faultyNode.
type migrating struct {
	r     *redlock.Redlock
	mrs   []*miniredis.Miniredis
	old   *miniredis.Miniredis
	oldFN *faultyNode
}

func newMigrating(t *testing.T) *migrating {
	t.Helper()
	old := miniredis.RunT(t)
	rn, err := backend.DialNodeTLS(old.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rn.Close() })
	fn := &faultyNode{Node: rn}
	opts := redlock.Options{NodeTimeout: time.Second, Logger: redlocktest.Logger(t)}
	opts.Mirror = New(fn, opts)
	r, mrs := redlocktest.New(t, 3, opts)
	return &migrating{r: r, mrs: mrs, old: old, oldFN: fn}
}

type mode bool

const (
	modeOK   mode = false
	modeFail mode = true // every call fails at once, touching nothing
)

var errFault = errors.New("injected fault")

// faultyNode wraps the old instance's Node and fails it on demand.
type faultyNode struct {
	redlock.Node
	failing atomic.Bool
}

func (f *faultyNode) set(m mode) { f.failing.Store(bool(m)) }

func (f *faultyNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, string, error) {
	if f.failing.Load() {
		return false, "", errFault
	}
	return f.Node.SetNX(ctx, key, value, ttl)
}

func (f *faultyNode) CompareAndDelete(ctx context.Context, key, value string) (bool, error) {
	if f.failing.Load() {
		return false, errFault
	}
	return f.Node.CompareAndDelete(ctx, key, value)
}

func (f *faultyNode) CompareAndExpire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if f.failing.Load() {
		return false, errFault
	}
	return f.Node.CompareAndExpire(ctx, key, value, ttl)
}

func (f *faultyNode) Eval(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error) {
	if f.failing.Load() {
		return nil, errFault
	}
	return f.Node.Eval(ctx, s, keys, args...)
}

func (f *faultyNode) Do(ctx context.Context, args ...any) (any, error) {
	if f.failing.Load() {
		return nil, errFault
	}
	return f.Node.Do(ctx, args...)
}

// barrierScript is sent behind a backend's pending calls by wait.
var barrierScript = script.New("return 1")

// wait waits for the Redlock's background work, its Mirror's included,
// then for every call still on a backend's connection: a script sent
// behind them on the same connection answers after they ran.
func (m *migrating) wait(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, n := range m.r.Nodes() {
		_, _ = n.Eval(ctx, barrierScript, nil)
	}
}

// value returns key's value on backend i, "" when absent.
func (m *migrating) value(i int, key string) string {
	v, err := m.mrs[i].Get(key)
	if err != nil {
		return ""
	}
	return v
}

// holders counts the backends where key holds token.
func (m *migrating) holders(key, token string) int {
	n := 0
	for i := range m.mrs {
		if m.value(i, key) == token {
			n++
		}
	}
	return n
}

func (m *migrating) oldValue(key string) string {
	v, err := m.old.Get(key)
	if err != nil {
		return ""
	}
	return v
}

func mustKind(t *testing.T, err, kind error) {
	t.Helper()
	var qe *redlock.QuorumError
	if !errors.Is(err, kind) || !errors.As(err, &qe) {
		t.Fatalf("err = %T %v, want a *QuorumError of kind %v", err, err, kind)
	}
}

func mustMigrateKind(t *testing.T, err, kind error) {
	t.Helper()
	var me *Error
	if !errors.As(err, &me) || !errors.Is(err, kind) {
		t.Fatalf("err = %T %v, want an *Error of kind %v", err, err, kind)
	}
}

// A key a legacy client holds on the old instance is held: the backends'
// yes is undone, and the acquisition is counted.
func TestMigrateHeldOnOld(t *testing.T) {
	m := newMigrating(t)
	ctx := context.Background()
	if err := m.old.Set("k", "legacy"); err != nil {
		t.Fatal(err)
	}
	m.old.SetTTL("k", 10*time.Second)
	for _, acquire := range []func() error{
		func() error { _, err := m.r.Acquire(ctx, "k", "tok", 10*time.Second); return err },
		func() error { _, err := m.r.AcquireFenced(ctx, "k", "tok", 10*time.Second); return err },
		func() error {
			_, err := m.r.AcquireKeys(ctx, []string{"j", "k"}, "tok", 10*time.Second, redlock.IfAbsentOrMine)
			return err
		},
	} {
		mustMigrateKind(t, acquire(), redlock.ErrHeld)
		m.wait(t) // the rollback of one, before the next
	}
	m.wait(t)
	if n := m.holders("k", "tok") + m.holders("j", "tok"); n != 0 {
		t.Fatalf("%d backend copies left after the rollback", n)
	}
	if v := m.oldValue("k"); v != "legacy" {
		t.Fatalf("old instance holds %q, want the legacy value", v)
	}
	if v := m.oldValue("j"); v != "" {
		t.Fatalf("old instance kept j=%q of a failed acquisition", v)
	}
	if s := m.r.MigrateStats(); s.HeldAcquires != 3 || s.LegacyHolds != 3 || s.Addr != m.old.Addr() {
		t.Fatalf("stats = %+v, want 3 held acquires, 3 legacy holds", s)
	}

	// Reads count the legacy hold.
	v, err := m.r.Get(ctx, "k")
	if err != nil || !v.Exists || v.Data != "legacy" || v.PTTL <= 0 {
		t.Fatalf("Get = %+v, %v; want the old instance's value with its ttl", v, err)
	}
	if n, err := m.r.Exists(ctx, []string{"k", "j", "k"}); err != nil || n != 2 {
		t.Fatalf("Exists = %d, %v; want 2", n, err)
	}

	// Once the legacy client releases, the lock is granted on both sides
	// and its release reaches both.
	m.old.Del("k")
	l, err := m.r.Acquire(ctx, "k", "tok", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.oldValue("k") != "tok" {
		t.Fatal("granted without the key on the old instance")
	}
	if _, err := m.r.Extend(ctx, "k", "tok", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl := m.old.TTL("k"); ttl <= 10*time.Second {
		t.Fatalf("old instance ttl %v after the extend, want it extended", ttl)
	}
	if err := m.r.Release(ctx, l.Key, l.Token); err != nil {
		t.Fatal(err)
	}
	m.wait(t)
	if m.oldValue("k") != "" || m.holders("k", "tok") != 0 {
		t.Fatal("release left the key somewhere")
	}
}

// A lock the backends refuse leaves nothing on the old instance.
func TestMigrateRollbackOnOld(t *testing.T) {
	m := newMigrating(t)
	ctx := context.Background()
	for i := range 2 {
		m.mrs[i].Set("k", "other")
	}
	_, err := m.r.Acquire(ctx, "k", "tok", 10*time.Second)
	mustKind(t, err, redlock.ErrHeld)
	m.wait(t)
	if v := m.oldValue("k"); v != "" {
		t.Fatalf("old instance kept %q of a refused acquisition", v)
	}
}

// An old instance that does not answer fails acquisitions and extends
// (a legacy client may hold the key there) with an *Error of kind
// redlock.ErrNoQuorum, and leaves nothing on the backends; releases still
// proceed on the backends.
func TestMigrateOldDown(t *testing.T) {
	m := newMigrating(t)
	ctx := context.Background()
	l, err := m.r.Acquire(ctx, "held", "tok", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m.oldFN.set(modeFail)
	_, err = m.r.Acquire(ctx, "k", "tok", 10*time.Second)
	mustMigrateKind(t, err, redlock.ErrNoQuorum)
	if want := "migrate_from " + m.old.Addr() + " unreachable"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	_, err = m.r.Extend(ctx, "held", "tok", 10*time.Second)
	mustMigrateKind(t, err, redlock.ErrNoQuorum)
	if err := m.r.Release(ctx, l.Key, l.Token); err != nil {
		t.Fatalf("release with the old instance down: %v", err)
	}
	m.wait(t)
	if k, held := m.holders("k", "tok"), m.holders("held", "tok"); k+held != 0 {
		t.Fatalf("backend copies left: %d of k, %d of held", k, held)
	}
	// Reads go on without it.
	if v, err := m.r.Get(ctx, "k"); err != nil || v.Exists {
		t.Fatalf("Get = %+v, %v", v, err)
	}
}

// The plain writes reach the old instance too.
func TestMigrateWrites(t *testing.T) {
	m := newMigrating(t)
	ctx := context.Background()
	if err := m.r.Write(ctx, "k", "v1", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if m.oldValue("k") != "v1" {
		t.Fatal("SET not mirrored")
	}
	if _, err := m.r.CompareAndSet(ctx, "k", "v1", "v2", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if m.oldValue("k") != "v2" || m.old.TTL("k") <= 10*time.Second {
		t.Fatal("SET IFEQ not mirrored")
	}
	m.old.Set("k", "legacy")
	if _, err := m.r.CompareAndSet(ctx, "k", "v2", "v3", 20*time.Second); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("SET IFEQ with the old instance holding another value: %v", err)
	}
	if _, err := m.r.Delete(ctx, []string{"k"}); err != nil {
		t.Fatal(err)
	}
	if m.oldValue("k") != "" {
		t.Fatal("DEL not mirrored")
	}
}

// A script by vote that takes a lock the old instance holds is not
// answered as a success.
func TestMigrateVoteWrites(t *testing.T) {
	m := newMigrating(t)
	ctx := context.Background()
	take := script.New(`if redis.call("exists", KEYS[1]) == 0 then
	redis.call("set", KEYS[1], ARGV[1], "px", 10000)
	return 1
end
return 0`)
	if v, err := m.r.VoteWrites(ctx, take, []string{"free"}, []string{"tok"}); err != nil || v != int64(1) {
		t.Fatalf("VoteWrites on a free key = %v, %v; want 1", v, err)
	}
	if m.oldValue("free") != "tok" {
		t.Fatal("the script did not run on the old instance")
	}
	m.old.Set("k", "legacy")
	_, err := m.r.VoteWrites(ctx, take, []string{"k"}, []string{"tok"})
	mustMigrateKind(t, err, ErrDiffers)
	m.oldFN.set(modeFail)
	_, err = m.r.VoteWrites(ctx, take, []string{"j"}, []string{"tok"})
	mustMigrateKind(t, err, redlock.ErrNoQuorum)
}

// A hold's renewal keeps its copy on the old instance, and needs it: a
// copy gone there ends the hold (redlock.ErrNotHeld) though the backends renewed,
// an old instance that does not answer fails the renewal (redlock.ErrNoQuorum).
// The renewal never shortens the copy there, and a hold of any value is
// renewed while the key exists.
func TestMigrateRenewHold(t *testing.T) {
	m := newMigrating(t)
	ctx := context.Background()
	const svc = "svc"
	sum := sha1.Sum([]byte("v"))
	h := record.Field{Key: "held", Digest: hex.EncodeToString(sum[:])}
	anyHold := record.Field{Key: "hash", Digest: record.AnyDigest}
	if _, err := m.r.AcquireKeys(ctx, []string{"held"}, "v", time.Second, redlock.IfAbsent); err != nil {
		t.Fatal(err)
	}
	m.old.HSet("hash", "owner", "A")
	m.old.SetTTL("hash", time.Second)
	for _, mr := range m.mrs {
		mr.HSet("hash", "owner", "A")
		mr.SetTTL("hash", time.Second)
	}
	for _, x := range []record.Field{h, anyHold} {
		if err := m.r.SetHold(ctx, svc, x); err != nil {
			t.Fatal(err)
		}
		if err := m.r.RenewHold(ctx, svc, x, 5*time.Second); err != nil {
			t.Fatalf("RenewHold(%s) = %v", x.Key, err)
		}
		if ttl := m.old.TTL(x.Key); ttl != 5*time.Second {
			t.Fatalf("old instance's copy of %s has %v left after the renewal, want 5s", x.Key, ttl)
		}
	}
	// Never shorter: a copy with more left keeps it.
	m.old.SetTTL("held", time.Minute)
	if err := m.r.RenewHold(ctx, svc, h, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl := m.old.TTL("held"); ttl != time.Minute {
		t.Fatalf("the renewal cut the old instance's copy to %v, want a minute", ttl)
	}

	m.oldFN.set(modeFail)
	mustMigrateKind(t, m.r.RenewHold(ctx, svc, h, 5*time.Second), redlock.ErrNoQuorum)
	m.oldFN.set(modeOK)

	m.old.Del("held")
	err := m.r.RenewHold(ctx, svc, h, 5*time.Second)
	mustMigrateKind(t, err, redlock.ErrNotHeld)
	m.old.Del("hash")
	mustMigrateKind(t, m.r.RenewHold(ctx, svc, anyHold, 5*time.Second), redlock.ErrNotHeld)
}

// A counter answers the old instance's count, raised past the backends'
// where they counted further: never below a value handed out on either
// side, and the backends follow it. The old instance's error reply is
// the answer; an old instance that does not answer fails it.
func TestMigrateIncr(t *testing.T) {
	m := newMigrating(t)
	ctx := context.Background()
	if err := m.old.Set("fence", "100"); err != nil {
		t.Fatal(err)
	}
	if n, err := m.r.Incr(ctx, "fence", 1); err != nil || n != 101 {
		t.Fatalf("Incr = %d, %v; want 101, past the old instance's 100", n, err)
	}
	if v := m.oldValue("fence"); v != "101" {
		t.Fatalf("old instance holds %q, want 101", v)
	}
	m.wait(t)
	for i := range m.mrs {
		if v := m.value(i, "fence"); v != "101" {
			t.Fatalf("backend %d holds %q, want 101", i, v)
		}
	}
	// The backends ahead: the old instance is raised past them.
	for _, mr := range m.mrs {
		mr.Set("ahead", "500")
	}
	m.old.Set("ahead", "7")
	m.old.SetTTL("ahead", time.Minute)
	if n, err := m.r.Incr(ctx, "ahead", 2); err != nil || n != 502 {
		t.Fatalf("Incr by 2 = %d, %v; want 502, past the backends' 500", n, err)
	}
	if v, ttl := m.oldValue("ahead"), m.old.TTL("ahead"); v != "502" || ttl != time.Minute {
		t.Fatalf("old instance holds %q for %v, want 502 for its minute", v, ttl)
	}

	m.old.Set("word", "abc")
	var re redlock.RedisError
	if _, err := m.r.Incr(ctx, "word", 1); !errors.As(err, &re) || string(re) != "ERR value is not an integer or out of range" {
		t.Fatalf("Incr of a word on the old instance = %v, want Redis's error", err)
	}
	m.oldFN.set(modeFail)
	_, err := m.r.Incr(ctx, "fence", 1)
	mustMigrateKind(t, err, redlock.ErrNoQuorum)
}

// GETSET runs on the old instance too: the value replaced is answered
// where the two sides agree or one held nothing, and the value written
// where they replaced different values.
func TestMigrateGetSet(t *testing.T) {
	m := newMigrating(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, backends, old, want string // "": absent
	}{
		{"free", "", "", ""},
		{"agreed", "t0", "t0", "t0"},
		{"legacy", "", "t0", "t0"},
		{"moved", "t0", "", "t0"},
		{"raced", "t0", "t1", "mine"},
	} {
		for _, mr := range m.mrs {
			if c.backends != "" {
				mr.Set(c.name, c.backends)
			}
		}
		if c.old != "" {
			m.old.Set(c.name, c.old)
		}
		v, err := m.r.GetSet(ctx, c.name, "mine", 0)
		if err != nil || v.Exists != (c.want != "") || v.Data != c.want {
			t.Fatalf("%s: GetSet = %+v, %v; want %q", c.name, v, err, c.want)
		}
		if got := m.oldValue(c.name); got != "mine" {
			t.Fatalf("%s: old instance holds %q, want the value written", c.name, got)
		}
	}
	m.old.HSet("hash", "owner", "A")
	if v, err := m.r.GetSet(ctx, "hash", "mine", 0); err != nil || v.Type != "hash" {
		t.Fatalf("GetSet of a hash on the old instance = %+v, %v; want its type", v, err)
	}
	m.oldFN.set(modeFail)
	_, err := m.r.GetSet(ctx, "k", "mine", 0)
	mustMigrateKind(t, err, redlock.ErrNoQuorum)
}
