package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// ttl is long enough that its 5% never caps testTimeout.
const ttl = 100 * time.Second

func TestAcquireFailingSubsets(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	for _, m := range []mode{modeFail, modeLostReply} {
		for mask := range 1 << 5 {
			key := fmt.Sprintf("k-%d-%d", m, mask)
			c.setMask(mask, m)
			lock, err := c.r.Acquire(ctx, key, "tok", ttl)
			c.wait(t)
			bad := bits.OnesCount(uint(mask))
			if bad <= 2 {
				if err != nil {
					t.Fatalf("mode %d mask %05b: %v", m, mask, err)
				}
				if lock.Granted < 3 || lock.Validity <= 0 || lock.Key != key || lock.Token != "tok" {
					t.Fatalf("mode %d mask %05b: lock %+v", m, mask, lock)
				}
				for i := range c.nodes {
					v := c.value(i, key)
					healthy := mask&(1<<i) == 0
					if healthy && v != "tok" {
						t.Fatalf("mode %d mask %05b: healthy node %d holds %q", m, mask, i, v)
					}
					if !healthy && m == modeFail && v != "" {
						t.Fatalf("mode %d mask %05b: failed node %d holds %q", m, mask, i, v)
					}
				}
				continue
			}
			qe := mustKind(t, err, ErrNoQuorum)
			if len(qe.Errs) < 3 || qe.Nodes != 5 || qe.Quorum != 3 {
				t.Fatalf("mode %d mask %05b: %+v", m, mask, qe)
			}
			if n := c.holders(key, "tok"); n != 0 {
				t.Fatalf("mode %d mask %05b: %d nodes hold the key after rollback", m, mask, n)
			}
		}
	}
}

// Hanging nodes block until the test opens their gate, so a success that
// returns while they are still blocked proves the early decision.
func TestAcquireHangingSubsets(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	for mask := range 1 << 5 {
		key := fmt.Sprintf("k-%d", mask)
		gate := make(chan struct{})
		c.setMaskGated(mask, modeHang, gate)
		ok := bits.OnesCount(uint(mask)) <= 2
		if !ok {
			// A quorum is impossible until the hanging nodes fail.
			time.AfterFunc(10*time.Millisecond, func() { close(gate) })
		}
		start := time.Now()
		_, err := c.r.Acquire(ctx, key, "tok", ttl)
		took := time.Since(start)
		if ok {
			if err != nil {
				t.Fatalf("mask %05b: %v", mask, err)
			}
			if took >= testTimeout {
				t.Errorf("mask %05b: success took %v, want an early decision", mask, took)
			}
			close(gate)
		} else {
			mustKind(t, err, ErrNoQuorum)
		}
		c.wait(t)
		if !ok {
			if n := c.holders(key, "tok"); n != 0 {
				t.Fatalf("mask %05b: %d nodes hold the key after rollback", mask, n)
			}
		}
	}
}

// TestNodeDeadline checks that node calls end at their own deadline.
func TestNodeDeadline(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		timeout, ttl, want time.Duration
	}{
		{30 * time.Millisecond, ttl, 30 * time.Millisecond},
		{testTimeout, 200 * time.Millisecond, 10 * time.Millisecond}, // 5% of the ttl
	} {
		c := newCluster(t, 3, Options{NodeTimeout: tc.timeout, RollbackTimeout: 10 * time.Millisecond})
		c.setMask(0b111, modeHang)
		start := time.Now()
		_, err := c.r.Acquire(ctx, "k", "tok", tc.ttl)
		took := time.Since(start)
		qe := mustKind(t, err, ErrNoQuorum)
		if took < tc.want || took > testTimeout/2 {
			t.Errorf("timeout %v ttl %v: took %v, want about %v", tc.timeout, tc.ttl, took, tc.want)
		}
		for _, e := range qe.Errs {
			if !errors.Is(e, context.DeadlineExceeded) {
				t.Errorf("node error %v, want deadline exceeded", e)
			}
		}
	}
}

func TestCallTimeout(t *testing.T) {
	r := New(nil, Options{NodeTimeout: 50 * time.Millisecond})
	for _, tc := range []struct{ ttl, want time.Duration }{
		{10 * time.Second, 50 * time.Millisecond},
		{time.Second, 50 * time.Millisecond},
		{500 * time.Millisecond, 25 * time.Millisecond},
		{10 * time.Millisecond, time.Millisecond}, // floor
	} {
		if got := r.callTimeout(tc.ttl); got != tc.want {
			t.Errorf("callTimeout(%v) = %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

func TestAcquireHeld(t *testing.T) {
	ctx := context.Background()
	t.Run("majority", func(t *testing.T) {
		c := newCluster(t, 5, Options{})
		for i := range 3 {
			c.mrs[i].Set("k", "other")
		}
		_, err := c.r.Acquire(ctx, "k", "tok", ttl)
		qe := mustKind(t, err, ErrHeld)
		if qe.Granted > 2 || len(qe.Errs) != 0 {
			t.Fatalf("%+v", qe)
		}
		c.wait(t)
		for i := range 5 {
			want := ""
			if i < 3 {
				want = "other"
			}
			if v := c.value(i, "k"); v != want {
				t.Fatalf("node %d holds %q, want %q", i, v, want)
			}
		}
	})
	t.Run("minority", func(t *testing.T) {
		c := newCluster(t, 5, Options{})
		for i := range 2 {
			c.mrs[i].Set("k", "other")
		}
		lock, err := c.r.Acquire(ctx, "k", "tok", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if lock.Granted != 3 {
			t.Fatalf("Granted = %d, want 3", lock.Granted)
		}
		c.wait(t)
		for i := range 5 {
			want := "tok"
			if i < 2 {
				want = "other"
			}
			if v := c.value(i, "k"); v != want {
				t.Fatalf("node %d holds %q, want %q", i, v, want)
			}
		}
	})
	t.Run("early", func(t *testing.T) {
		// Three "exists" decide while the two other nodes still hang.
		c := newCluster(t, 5, Options{})
		gate := make(chan struct{})
		c.setMaskGated(0b11000, modeHang, gate)
		for i := range 3 {
			c.nodes[i].set(modeExists)
		}
		_, err := c.r.Acquire(ctx, "k", "tok", ttl)
		close(gate)
		mustKind(t, err, ErrHeld)
	})
}

// A failure is certain early, but its kind depends on the late replies.
func TestClassification(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		late mode
		want error
	}{{modeHang, ErrNoQuorum}, {modeGated, ErrHeld}} {
		c := newCluster(t, 5, Options{})
		c.nodes[0].set(modeExists)
		c.nodes[1].set(modeFail)
		c.nodes[2].set(modeFail)
		gate := make(chan struct{})
		c.nodes[3].setGated(tc.late, gate)
		c.nodes[4].setGated(tc.late, gate)
		time.AfterFunc(20*time.Millisecond, func() { close(gate) })
		_, err := c.r.Acquire(ctx, "k", "tok", ttl)
		qe := mustKind(t, err, tc.want)
		if tc.want == ErrHeld && qe.Answered != 3 {
			t.Errorf("late %d: %+v", tc.late, qe)
		}
		c.wait(t)
		if n := c.holders("k", "tok"); n != 0 {
			t.Fatalf("late %d: %d nodes hold the key after rollback", tc.late, n)
		}
	}
}

func TestValidity(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		step  time.Duration
		drift float64
		want  time.Duration
	}{
		// ttl 100s: drift 1% = 1s, 5% = 5s, plus 2ms.
		{100 * time.Millisecond, 0, ttl - 100*time.Millisecond - 1002*time.Millisecond},
		{time.Millisecond, 0.05, ttl - time.Millisecond - 5002*time.Millisecond},
		{0, 0, ttl - 1002*time.Millisecond},
	}
	for _, tc := range cases {
		clock := &stepClock{t: time.Unix(1000, 0), step: tc.step}
		c := newCluster(t, 3, Options{Now: clock.Now, DriftFactor: tc.drift})
		lock, err := c.r.Acquire(ctx, "k", "tok", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if lock.Validity != tc.want {
			t.Errorf("step %v drift %v: validity %v, want %v", tc.step, tc.drift, lock.Validity, tc.want)
		}
		v, err := c.r.Extend(ctx, "k", "tok", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if v != tc.want {
			t.Errorf("step %v drift %v: extend validity %v, want %v", tc.step, tc.drift, v, tc.want)
		}
	}
}

func TestValidityUsedUp(t *testing.T) {
	ctx := context.Background()
	// 99s elapsed + 1.002s drift > 100s.
	clock := &stepClock{t: time.Unix(1000, 0), step: 99 * time.Second}
	c := newCluster(t, 3, Options{Now: clock.Now})
	_, err := c.r.Acquire(ctx, "k", "tok", ttl)
	qe := mustKind(t, err, ErrNoQuorum)
	if qe.Granted < 2 || !strings.Contains(qe.Error(), "validity used up") {
		t.Fatalf("%+v: %v", qe, qe)
	}
	c.wait(t)
	if n := c.holders("k", "tok"); n != 0 {
		t.Fatalf("%d nodes hold the key after rollback", n)
	}

	// Extend: a quorum confirms, but the validity is gone.
	clock.mu.Lock()
	clock.step = 0
	clock.mu.Unlock()
	if _, err := c.r.Acquire(ctx, "k", "tok", ttl); err != nil {
		t.Fatal(err)
	}
	clock.mu.Lock()
	clock.step = ttl
	clock.mu.Unlock()
	_, err = c.r.Extend(ctx, "k", "tok", ttl)
	qe = mustKind(t, err, ErrNotHeld)
	if !strings.Contains(qe.Error(), "validity used up") {
		t.Fatalf("Error() = %q", qe.Error())
	}
}

func TestRelease(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	if _, err := c.r.Acquire(ctx, "k", "tok", ttl); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	mustKind(t, c.r.Release(ctx, "k", "other"), ErrNotHeld)
	c.wait(t)
	if n := c.holders("k", "tok"); n != 5 {
		t.Fatalf("wrong-token release left %d holders, want 5", n)
	}
	if err := c.r.Release(ctx, "k", "tok"); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	for i := range c.mrs {
		if c.mrs[i].Exists("k") {
			t.Fatalf("node %d still has the key", i)
		}
	}
	mustKind(t, c.r.Release(ctx, "k", "tok"), ErrNotHeld)
	c.wait(t) // its late deletes would remove the next lock (same token)

	// A failing majority.
	if _, err := c.r.Acquire(ctx, "k", "tok", ttl); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	c.setMask(0b10101, modeFail)
	qe := mustKind(t, c.r.Release(ctx, "k", "tok"), ErrNoQuorum)
	if qe.Answered > 2 || qe.Granted != qe.Answered || len(qe.Errs) != 3 {
		t.Fatalf("%+v", qe)
	}

	// Released on two, gone on one, no answer from two: it may have been
	// held on a quorum, so it is no "not held" (UNLOCK 0 told a holder
	// under load that it had lost its lock).
	c.setMask(0, modeFail)
	c.wait(t)
	if _, err := c.r.Acquire(ctx, "k2", "tok", ttl); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	c.mrs[0].Del("k2")
	c.setMask(0b11000, modeFail)
	mustKind(t, c.r.Release(ctx, "k2", "tok"), ErrNoQuorum)
}

// TestReleaseAfterLateAcquireCall: an acquisition answers at the quorum
// while one node's call is still on its way (here it waits for a gate; in
// production a call that waits for its node's connection to be dialed
// runs in a goroutine the same way). A release of the key that follows
// must not reach that node first: the late SET NX would then land after
// the delete and leave a copy of the released lock there until its ttl.
// The acquisition keeps the key's gate until its calls run by goroutines
// are done, so the release waits for it. Before, it failed every time.
func TestReleaseAfterLateAcquireCall(t *testing.T) {
	for _, multi := range []bool{false, true} {
		t.Run(fmt.Sprintf("multi=%v", multi), func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t, 3, Options{})
			// The pipelined connections are up: the release's delete on
			// node 2 is pipelined, and the barrier below answers behind it.
			for _, n := range c.nodes {
				if err := n.Node.(*backend.RedisNode).Connect(ctx); err != nil {
					t.Fatal(err)
				}
			}
			gate := make(chan struct{})
			c.setMaskGated(0b100, modeGated, gate)
			keys := []string{"k"}
			if multi {
				keys = []string{"k", "j"}
			}
			if _, err := c.r.AcquireKeys(ctx, keys, "tok", ttl, IfAbsent); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 10*time.Second, "node 2's SET NX waiting at the gate", func() bool {
				return c.nodes[2].parked.Load() > 0
			})
			c.setMask(0, modeOK) // the release's calls go straight to every node
			released := make(chan error, 1)
			go func() {
				if multi {
					_, err := c.r.ReleaseKeys(ctx, keys, "tok")
					released <- err
					return
				}
				released <- c.r.Release(ctx, "k", "tok")
			}()
			select {
			case err := <-released:
				// It did not wait for the acquisition's last call: its
				// delete on node 2 is done (the barrier answers behind it)
				// before that call runs.
				released <- err
				if _, err := c.nodes[2].Node.(*backend.RedisNode).Eval(ctx, barrierScript, nil); err != nil {
					t.Fatal(err)
				}
			case <-time.After(200 * time.Millisecond):
			}
			close(gate)
			if err := <-released; err != nil {
				t.Fatal(err)
			}
			c.wait(t)
			for _, k := range keys {
				if n := c.holders(k, "tok"); n != 0 {
					t.Fatalf("%d copies of %s left after the release", n, k)
				}
			}
		})
	}
}

func TestExtend(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	if _, err := c.r.Acquire(ctx, "k", "tok", ttl/2); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	v, err := c.r.Extend(ctx, "k", "tok", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if v <= ttl/2 || v > ttl {
		t.Fatalf("validity %v", v)
	}
	c.wait(t)
	for i, mr := range c.mrs {
		if got := mr.TTL("k"); got != ttl {
			t.Fatalf("node %d: ttl %v, want %v", i, got, ttl)
		}
	}
	_, err = c.r.Extend(ctx, "k", "other", ttl)
	mustKind(t, err, ErrNotHeld)

	c.setMask(0b01110, modeFail)
	_, err = c.r.Extend(ctx, "k", "tok", ttl)
	mustKind(t, err, ErrNoQuorum)

	c.setMask(0, modeOK)
	if err := c.r.Release(ctx, "k", "tok"); err != nil {
		t.Fatal(err)
	}
	_, err = c.r.Extend(ctx, "k", "tok", ttl)
	mustKind(t, err, ErrNotHeld)
}

func TestCancel(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		c := newCluster(t, 3, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.r.Acquire(ctx, "k", "tok", ttl); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire: %v", err)
		}
		if _, err := c.r.Extend(ctx, "k", "tok", ttl); !errors.Is(err, context.Canceled) {
			t.Fatalf("Extend: %v", err)
		}
		if err := c.r.Release(ctx, "k", "tok"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Release: %v", err)
		}
	})
	t.Run("during", func(t *testing.T) {
		// Three slow nodes write after the caller gave up; the rollback
		// must run after those writes and remove them.
		c := newCluster(t, 5, Options{})
		gate := make(chan struct{})
		c.setMaskGated(0b10101, modeGated, gate)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Millisecond, cancel)
		_, err := c.r.Acquire(ctx, "k", "tok", ttl)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		close(gate) // the slow SETs land now, after the caller gave up
		c.wait(t)
		if n := c.holders("k", "tok"); n != 0 {
			t.Fatalf("%d nodes hold the key after rollback", n)
		}
		for i, n := range c.nodes {
			if d := n.dels.Load(); d != 1 {
				t.Fatalf("node %d: %d rollbacks, want 1", i, d)
			}
		}
	})
}

func TestNodeErrors(t *testing.T) {
	c := newCluster(t, 5, Options{})
	c.setMask(0b11100, modeFail)
	_, err := c.r.Acquire(context.Background(), "k", "tok", ttl)
	qe := mustKind(t, err, ErrNoQuorum)
	if len(qe.NodeErrors()) != 3 {
		t.Fatalf("%d node errors, want 3", len(qe.Errs))
	}
	// Three errors decide at once, whether or not the healthy nodes answered yet.
	want := fmt.Sprintf("too few backends answered: only %d of 5 backends answered, need 3", qe.Answered)
	if qe.Error() != want {
		t.Errorf("Error() = %q, want %q", qe.Error(), want)
	}
	for _, e := range qe.Errs {
		var ne *NodeError
		if !errors.As(e, &ne) || !errors.Is(e, errFault) {
			t.Fatalf("%T %v is not a *NodeError wrapping the fault", e, e)
		}
		if !strings.Contains(ne.Error(), ne.Addr) {
			t.Errorf("NodeError %q lacks its address", ne.Error())
		}
	}
	for _, n := range c.nodes {
		if strings.Contains(qe.Error(), n.Addr()) || strings.Contains(qe.Error(), errFault.Error()) {
			t.Fatalf("Error() leaks node details: %q", qe.Error())
		}
	}
}

func TestNoNodes(t *testing.T) {
	ctx := context.Background()
	r := New(nil, Options{Logger: testLogger(t)})
	if r.Quorum() != 1 || len(r.Nodes()) != 0 {
		t.Fatalf("quorum %d, nodes %d", r.Quorum(), len(r.Nodes()))
	}
	_, err := r.Acquire(ctx, "k", "tok", ttl)
	mustKind(t, err, ErrNoQuorum)
	mustKind(t, r.Release(ctx, "k", "tok"), ErrNoQuorum)
	_, err = r.Extend(ctx, "k", "tok", ttl)
	mustKind(t, err, ErrNoQuorum)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.CloseNodes(); err != nil {
		t.Fatal(err)
	}
}

func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		if got := New(make([]Node, n), Options{}).Quorum(); got != want {
			t.Errorf("N=%d: quorum %d, want %d", n, got, want)
		}
	}
}

func TestInvalid(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{})
	for _, tc := range []struct {
		key, token string
		ttl        time.Duration
	}{{"", "t", ttl}, {"k", "", ttl}, {"k", "t", 0}, {"k", "t", -time.Second}, {"k", "t", time.Microsecond}} {
		if _, err := c.r.Acquire(ctx, tc.key, tc.token, tc.ttl); !errors.Is(err, ErrInvalid) {
			t.Errorf("Acquire(%q, %q, %v) = %v", tc.key, tc.token, tc.ttl, err)
		}
		if _, err := c.r.Extend(ctx, tc.key, tc.token, tc.ttl); !errors.Is(err, ErrInvalid) {
			t.Errorf("Extend(%q, %q, %v) = %v", tc.key, tc.token, tc.ttl, err)
		}
	}
	if err := c.r.Release(ctx, "", "t"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Release: %v", err)
	}
}

func TestCloseDeadline(t *testing.T) {
	c := newCluster(t, 3, Options{})
	bg := context.Background()
	if _, err := c.r.Acquire(bg, "k", "tok", ttl); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	// The release decides on two nodes; the third hangs in the background.
	gate := make(chan struct{})
	c.nodes[2].setGated(modeHang, gate)
	if err := c.r.Release(bg, "k", "tok"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := c.r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want deadline exceeded", err)
	}
	close(gate)
	c.wait(t) // idempotent: a second Close waits until done
}
