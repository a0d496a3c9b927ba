package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestLocksKeptDataNot: locks and data, one rule each. A lock without
// expiry (SETNX: Acquire with Keep; a compare-and-set without expiry) is
// kept, its copies carrying the lease; a data write (Write, GetSet, Set,
// Persist and ExpireIf of a data key) takes the key as asked, with no
// lease and no keep, whatever it was before; a delete and a flush end a
// keep.
func TestLocksKeptDataNot(t *testing.T) {
	m, mrs := newManager(t, Options{KeepTTL: keepTTL})
	ctx := context.Background()
	setnx := func(v string) func() error {
		return func() error {
			err := m.SetIfAbsent(ctx, "k", v, 0)
			return err
		}
	}
	const none, lease, asked = -1, 1, 2 // the copies' ttl: none, the lease, what the client gave
	steps := []struct {
		name string
		op   func() error
		kept bool // "k" kept holding val
		val  string
		ttl  int
	}{
		{"SETNX", setnx("a"), true, "a", lease},
		{"Write without expiry over the lock", func() error { return m.Write(ctx, "k", "b", 0) }, false, "b", none},
		{"Write with expiry", func() error { return m.Write(ctx, "k", "c", ttl) }, false, "c", asked},
		{"Persist of data", func() error { return want(m.Persist(ctx, "k"))(true) }, false, "c", none},
		{"CompareAndSet without expiry: a lock", func() error { return m.CompareAndSet(ctx, "k", "c", "d", 0) }, true, "d", lease},
		{"GetSet without expiry", func() error { _, err := m.GetSet(ctx, "k", "e", 0); return err }, false, "e", none},
		{"ExpireIf LT of data", func() error { return want(m.ExpireIf(ctx, "k", ttl, ExpireLT))(true) }, false, "e", asked},
		{"Delete", func() error { _, err := m.Delete(ctx, []string{"k"}); return err }, false, "e", 0},
		{"SETNX again", setnx("f"), true, "f", lease},
		{"Set KEEPTTL of a held key: data without expiry", func() error {
			_, _, err := m.Set(ctx, "k", "g", 0, SetOptions{KeepTTL: true})
			return err
		}, false, "g", none},
		{"Set XX without expiry", func() error { return want3(m.Set(ctx, "k", "h", 0, SetOptions{XX: true}))(true) }, false, "h", none},
		{"Set XX of an absent key", func() error { return want3(m.Set(ctx, "absent", "x", 0, SetOptions{XX: true}))(false) }, false, "h", none},
		{"SETNX of data is refused", func() error {
			if err := setnx("i")(); !errors.Is(err, redlock.ErrHeld) {
				return fmt.Errorf("SETNX over data: %v, want held", err)
			}
			return nil
		}, false, "h", none},
		{"FlushAll", func() error { return m.FlushAll(ctx) }, false, "h", 0},
	}
	for _, s := range steps {
		if err := s.op(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := m.Kept("k", s.val); got != s.kept {
			t.Fatalf("after %s: kept %v, want %v", s.name, got, s.kept)
		}
		// (Every backend, once the write the quorum answered reached it.)
		var bad string
		testkit.Eventually(t, 10*time.Second, "after "+s.name+": every copy's ttl", func() bool {
			bad = ""
			for i, mr := range mrs {
				got := mr.TTL("k")
				switch {
				case s.ttl == 0 && mr.Exists("k"):
					bad = fmt.Sprintf("node %d still has the key", i)
				case s.ttl == none && (got != 0 || !mr.Exists("k")):
					bad = fmt.Sprintf("node %d's copy has ttl %v, want none", i, got)
				case s.ttl == lease && (got <= 0 || got > keepTTL):
					bad = fmt.Sprintf("node %d's copy has ttl %v, want the lease", i, got)
				case s.ttl == asked && got != ttl:
					bad = fmt.Sprintf("node %d's copy has ttl %v, want %v", i, got, ttl)
				}
			}
			return bad == ""
		})
	}
	v, err := m.Read(ctx, "k")
	if err != nil || v.Exists {
		t.Fatalf("after FlushAll: %+v, %v", v, err)
	}
}

// want checks a (done, error) result against done.
func want(done bool, err error) func(bool) error {
	return func(w bool) error {
		if err == nil && done != w {
			err = fmt.Errorf("done %v, want %v", done, w)
		}
		return err
	}
}

func want3(_ redlock.Value, done bool, err error) func(bool) error { return want(done, err) }

// TestPopPushesBack: a pop answers the element most backends popped and
// pushes every other element back where it was.
func TestPopPushesBack(t *testing.T) {
	m, mrs := newManager(t, Options{})
	ctx := context.Background()
	for i, v := range []string{"x", "x", "y"} {
		if _, err := mrs[i].Push("l", v, "rest"); err != nil {
			t.Fatal(err)
		}
	}
	v, ok, err := m.Pop(ctx, "l", false)
	if err != nil || !ok || v != "x" {
		t.Fatalf("Pop = %q, %v, %v; want x", v, ok, err)
	}
	if got, _ := mrs[2].List("l"); len(got) != 2 || got[0] != "y" {
		t.Fatalf("the outvoted backend holds %q, want y pushed back", got)
	}
	if n, err := m.Len(ctx, "l"); err != nil || n != 1 {
		t.Fatalf("Len = %d, %v; want 1", n, err)
	}
	for _, mr := range mrs {
		mr.Close()
	}
	if _, _, err := m.Pop(ctx, "l", false); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("Pop with no backend: %v, want ErrNoBackend", err)
	}
}

// TestPopCountAgrees: a pop with a count answers, place by place, the
// element most of the backends that agree so far popped, and pushes back
// what each backend popped past its agreement, in its order; count 0
// pops nothing and tells a held key from a missing one.
func TestPopCountAgrees(t *testing.T) {
	m, mrs := newManager(t, Options{})
	ctx := context.Background()
	lists := [][]string{
		{"x", "y", "z", "rest"},
		{"x", "w", "z", "rest"}, // outvoted at the second place
		{"x", "y", "v", "rest"}, // a tie with the first backend at the third
	}
	for i, l := range lists {
		if _, err := mrs[i].Push("l", l...); err != nil {
			t.Fatal(err)
		}
	}
	got, exists, err := m.PopCount(ctx, "l", false, 3)
	if err != nil || !exists || !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("PopCount = %q, %v, %v; want [x y z]", got, exists, err)
	}
	for i, want := range [][]string{{"rest"}, {"w", "z", "rest"}, {"v", "rest"}} {
		if l, _ := mrs[i].List("l"); !slices.Equal(l, want) {
			t.Errorf("backend %d holds %q, want %q", i, l, want)
		}
	}

	// From the tail, pushed back at the tail in the order it was.
	for i, l := range [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"d", "e", "f"}} {
		mrs[i].Del("r")
		if _, err := mrs[i].Push("r", l...); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, err := m.PopCount(ctx, "r", true, 2); err != nil || !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("PopCount from the tail = %q, %v; want [c b]", got, err)
	}
	if l, _ := mrs[2].List("r"); !slices.Equal(l, []string{"d", "e", "f"}) {
		t.Errorf("the outvoted backend holds %q, want [d e f] back", l)
	}

	// Count 1 is Pop's element; one backend's element is still answered.
	if _, err := mrs[1].Push("one", "s"); err != nil {
		t.Fatal(err)
	}
	if got, exists, err := m.PopCount(ctx, "one", false, 1); err != nil || !exists || !slices.Equal(got, []string{"s"}) {
		t.Fatalf("PopCount of one backend's element = %q, %v, %v; want [s]", got, exists, err)
	}
	if got, exists, err := m.PopCount(ctx, "one", false, 2); err != nil || exists || len(got) != 0 {
		t.Fatalf("PopCount of a missing key = %q, %v, %v; want none, not existing", got, exists, err)
	}
	if got, exists, err := m.PopCount(ctx, "r", false, 0); err != nil || !exists || len(got) != 0 {
		t.Fatalf("PopCount 0 of a held key = %q, %v, %v; want none, existing", got, exists, err)
	}
	for _, mr := range mrs {
		mr.Close()
	}
	if _, _, err := m.PopCount(ctx, "l", false, 2); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("PopCount with no backend: %v, want ErrNoBackend", err)
	}
}

// TestStaleKeepEnds: a key kept after a lock without expiry stops being
// kept when a script by vote writes it, or when a lock with an expiry is
// granted on it (the kept value was gone, or the client asked an expiry):
// renewing it then would make a lock with a ttl endless.
func TestStaleKeepEnds(t *testing.T) {
	c := &clock{t: time.Now()}
	m, mrs := newManager(t, Options{KeepTTL: keepTTL, Now: c.now})
	ctx := context.Background()
	if err := m.SetIfAbsent(ctx, "k", "1", 0); err != nil || !m.Kept("k", "1") {
		t.Fatalf("SETNX: kept %v, %v", m.Kept("k", "1"), err)
	}
	del := script.New("return redis.call('del', KEYS[1])")
	if _, err := m.Vote(ctx, del, []string{"k"}, nil, true); err != nil {
		t.Fatal(err)
	}
	if m.Kept("k", "1") {
		t.Fatal("still kept after a script by vote deleted it")
	}
	if err := m.SetIfAbsent(ctx, "k2", "1", 0); err != nil || !m.Kept("k2", "1") {
		t.Fatalf("SETNX: kept %v, %v", m.Kept("k2", "1"), err)
	}
	// Deleted behind this proxy's back (through another proxy), before
	// its renewal noticed; then taken with an expiry by the same value.
	for _, mr := range mrs {
		mr.Del("k2")
	}
	c.add(heldRecheck) // the note of the kept grant answers "held" until then
	if err := m.SetIfAbsent(ctx, "k2", "1", ttl); err != nil {
		t.Fatal(err)
	}
	if m.Kept("k2", "1") {
		t.Fatal("still kept after a grant with an expiry: its renewal would make the lock endless")
	}
}

// stallPush is a node whose list pushes never answer: a backend that
// stalled right after answering a pop.
type stallPush struct{ redlock.Node }

func (n stallPush) Do(ctx context.Context, args ...any) (any, error) {
	if cmd, _ := args[0].(string); cmd == "LPUSH" || cmd == "RPUSH" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return n.Node.Do(ctx, args...)
}

// TestPopPushBackBounded: pushing an outvoted element back is a node call
// like any other, bounded by the node timeout: a backend that stalls
// after its pop does not hold the client's pop.
func TestPopPushBackBounded(t *testing.T) {
	nodes := make([]redlock.Node, 3)
	mrs := make([]*miniredis.Miniredis, 3)
	for i := range nodes {
		mrs[i] = miniredis.RunT(t)
		n, err := backend.DialNodeTLS(mrs[i].Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes[i] = n
	}
	nodes[2] = stallPush{nodes[2]}
	rl := redlock.New(nodes, redlock.Options{NodeTimeout: 200 * time.Millisecond, Logger: redlocktest.Logger(t)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rl.Close(ctx)
	})
	m := New(Options{Locker: rl, Logger: redlocktest.Logger(t)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	for i, v := range []string{"x", "x", "y"} {
		if _, err := mrs[i].Push("l", v, "rest"); err != nil {
			t.Fatal(err)
		}
	}
	type popped struct {
		v   string
		ok  bool
		err error
	}
	done := make(chan popped, 1)
	go func() { // owned: the test waits for it below or fails
		v, ok, err := m.Pop(context.Background(), "l", false)
		done <- popped{v, ok, err}
	}()
	select {
	case p := <-done:
		if p.err != nil || !p.ok || p.v != "x" {
			t.Fatalf("Pop = %q, %v, %v; want x", p.v, p.ok, p.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Pop still waiting 30s for a push-back to a stalled backend")
	}
}

// TestGetSetOfAHeldHashKeepsItsHold: GETSET of a key of another type (a
// hash lock held while it exists) writes nothing and is refused with a
// *TypeError; the hold stays, or the hash lock would expire at its lease.
func TestGetSetOfAHeldHashKeepsItsHold(t *testing.T) {
	m, mrs := newManager(t, Options{KeepTTL: keepTTL})
	ctx := context.Background()
	for _, mr := range mrs {
		mr.HSet("h", "owner", "1")
		mr.SetTTL("h", keepTTL)
	}
	m.HoldKey("h", Hold{AnyValue: true})
	var te *TypeError
	if _, err := m.GetSet(ctx, "h", "v", 0); !errors.As(err, &te) {
		t.Fatalf("GETSET of a hash = %v, want a TypeError", err)
	}
	if !m.Kept("h", "") {
		t.Fatal("the hash lock's hold ended with a GETSET that wrote nothing")
	}
}

// TestLockBeyondMaxTTLWithoutLease: with no KeepTTL to hold it by, a lock
// is never given an expiry beyond MaxTTL or none: PERSIST of a lock and a
// compare-and-set beyond MaxTTL (SET … IFEQ … KEEPTTL of a long key) are
// refused with ErrLockTTL; PERSIST of data is as asked.
func TestLockBeyondMaxTTLWithoutLease(t *testing.T) {
	m, mrs := newManager(t, Options{MaxTTL: 10 * time.Second})
	ctx := context.Background()
	if err := m.SetIfAbsent(ctx, "l", "t", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Persist(ctx, "l"); !errors.Is(err, ErrLockTTL) {
		t.Errorf("PERSIST of a lock = %v, want ErrLockTTL", err)
	}
	if err := m.CompareAndSet(ctx, "l", "t", "t", 20*time.Second); !errors.Is(err, ErrLockTTL) {
		t.Errorf("a compare-and-set beyond max_ttl = %v, want ErrLockTTL", err)
	}
	copies := 0
	for i, mr := range mrs {
		if !mr.Exists("l") {
			continue // the grant returns at a quorum: a last copy may still be on its way
		}
		copies++
		if ttl := mr.TTL("l"); ttl <= 0 || ttl > 10*time.Second {
			t.Errorf("node %d: the lock's copy has ttl %v, want within max_ttl", i, ttl)
		}
	}
	if copies < len(mrs)/2+1 {
		t.Errorf("%d copies of the lock, want a quorum", copies)
	}
	if err := m.Write(ctx, "d", "v", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Persist(ctx, "d"); err != nil || !ok {
		t.Errorf("PERSIST of data = %v, %v; want done", ok, err)
	}
}
