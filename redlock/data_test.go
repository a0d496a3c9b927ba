package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// put sets key on node i to values[i] ("" leaves it absent), with ttls[i]
// when given.
func (c *cluster) put(key string, values []string, ttls ...time.Duration) {
	for i, v := range values {
		if v == "" {
			c.mrs[i].Del(key)
			continue
		}
		c.mrs[i].Set(key, v)
		if i < len(ttls) && ttls[i] > 0 {
			c.mrs[i].SetTTL(key, ttls[i])
		}
	}
}

func TestRead(t *testing.T) {
	ctx := context.Background()
	s := time.Second
	for _, tc := range []struct {
		name   string
		values []string
		ttls   []time.Duration
		fail   int // mask
		want   Value
	}{
		{"all", []string{"v", "v", "v", "v", "v"}, []time.Duration{9 * s, 8 * s, 8 * s, 8 * s, 9 * s}, 0, Value{Exists: true, Data: "v", PTTL: 8 * s}}, // any quorum has an 8s
		{"quorum", []string{"v", "w", "v", "w", "v"}, []time.Duration{5 * s, s, 7 * s, s, 9 * s}, 0, Value{Exists: true, Data: "v", PTTL: 5 * s}},
		{"no expiry", []string{"v", "v", "v", "", ""}, []time.Duration{0, 3 * s, 0}, 0, Value{Exists: true, Data: "v", PTTL: 3 * s}},
		{"persistent", []string{"v", "v", "v", "", ""}, nil, 0, Value{Exists: true, Data: "v", PTTL: PTTLNoExpiry}},
		{"absent", []string{"v", "", "", "w", ""}, nil, 0, Value{Exists: false, Data: "", PTTL: PTTLAbsent}},
		{"split", []string{"v", "v", "w", "w", ""}, nil, 0, Value{}}, // no version: no newest

		{"two fail", []string{"v", "v", "v", "w", "w"}, nil, 0b11000, Value{Exists: true, Data: "v", PTTL: PTTLNoExpiry}},
		{"two fail split", []string{"v", "v", "w", "w", "w"}, nil, 0b11000, Value{}},
	} {
		c := newCluster(t, 5, Options{})
		c.put("k", tc.values, tc.ttls...)
		c.setMask(tc.fail, modeFail)
		v, err := c.r.Read(ctx, "k")
		if tc.want == (Value{}) {
			if !errors.Is(err, ErrNoQuorum) {
				t.Errorf("%s: %+v, %v; want ErrNoQuorum (the backends disagree)", tc.name, v, err)
			}
		} else if err != nil || v != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, v, err, tc.want)
		}
		c.setMask(0b10101, modeFail)
		_, err = c.r.Read(ctx, "k")
		mustKind(t, err, ErrNoQuorum)
	}
}

// Get decides at a quorum of one value while the others still hang.
func TestGetEarly(t *testing.T) {
	c := newCluster(t, 5, Options{})
	c.put("k", []string{"v", "v", "v", "w", "w"})
	gate := make(chan struct{})
	c.setMaskGated(0b11000, modeHang, gate)
	v, err := c.r.Get(context.Background(), "k")
	close(gate)
	if err != nil || v.Data != "v" {
		t.Fatalf("%+v, %v", v, err)
	}
}

// Read's remaining ttl reflects every write that reached a quorum: here
// an extend that one or two backends missed (their call failed, as a
// stalled backend's would) while the others applied it. Read waits for
// every backend, so the answer does not depend on which answer first.
func TestReadSeesQuorumExtend(t *testing.T) {
	ctx := context.Background()
	for missed := 1; missed <= 2; missed++ {
		c := newCluster(t, 5, Options{})
		if _, err := c.r.Acquire(ctx, "k", "tok", 100*time.Second); err != nil {
			t.Fatal(err)
		}
		// The acquire answered at the quorum: let the rest land before the
		// extend, which these test nodes (each call on a goroutine of its
		// own) could otherwise send to a backend ahead of its SET.
		c.wait(t)
		mask := 1<<missed - 1 // the first missed backends
		c.setMask(mask, modeFail)
		if _, err := c.r.Extend(ctx, "k", "tok", 200*time.Second); err != nil {
			t.Fatalf("%d missed: Extend: %v", missed, err)
		}
		c.wait(t) // the extend answered at the quorum; let the rest land
		c.setMask(0, modeOK)
		for i := range c.mrs {
			want := 200 * time.Second
			if mask&(1<<i) != 0 {
				want = 100 * time.Second
			}
			if got := c.mrs[i].TTL("k"); got != want {
				t.Fatalf("%d missed: backend %d has ttl %v, want %v", missed, i, got, want)
			}
		}
		for range 40 {
			v, err := c.r.Read(ctx, "k")
			if err != nil || v.PTTL != 200*time.Second {
				t.Fatalf("%d missed: Read = %+v, %v; want the extended ttl 200s", missed, v, err)
			}
		}
	}
}

func TestQuorumPTTL(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		ttls []time.Duration
		q    int
		want time.Duration
	}{
		{[]time.Duration{30 * s, 30 * s, 30 * s, 30 * s, 4 * s}, 3, 30 * s},
		{[]time.Duration{4 * s, 30 * s, 4 * s, 30 * s, 30 * s}, 3, 30 * s},
		{[]time.Duration{4 * s, 30 * s, 4 * s, 4 * s, 30 * s}, 3, 4 * s},
		{[]time.Duration{PTTLNoExpiry, 5 * s, PTTLNoExpiry}, 3, 5 * s},
		{[]time.Duration{PTTLNoExpiry, 5 * s, PTTLNoExpiry}, 2, PTTLNoExpiry},
		{[]time.Duration{9 * s, 8 * s, 7 * s}, 2, 8 * s},
	} {
		if got := quorumPTTL(tc.ttls, tc.q); got != tc.want {
			t.Errorf("quorumPTTL(%v, %d) = %v, want %v", tc.ttls, tc.q, got, tc.want)
		}
	}
}

func TestExistsDelete(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	c.put("a", []string{"x", "x", "x", "x", "x"})
	c.put("b", []string{"x", "y", "x", "", ""})
	c.put("c", []string{"", "", "", "x", "x"})
	keys := []string{"a", "b", "c", "d", "a"}
	if n, err := c.r.Exists(ctx, keys); n != 3 || err != nil {
		t.Fatalf("Exists = %d, %v; want 3 (a, b, a)", n, err)
	}
	c.setMask(0b00011, modeFail)
	// Nodes 2-4: a on 3, b on 1, c on 2.
	if n, err := c.r.Exists(ctx, keys); n != 2 || err != nil {
		t.Fatalf("Exists with two failing = %d, %v; want 2 (a, a)", n, err)
	}
	c.setMask(0b01011, modeFail)
	_, err := c.r.Exists(ctx, keys)
	mustKind(t, err, ErrNoQuorum)
	c.setMask(0, modeOK)
	if n, err := c.r.Delete(ctx, keys); n != 2 || err != nil {
		t.Fatalf("Delete = %d, %v; want 2 (a, b; a once)", n, err)
	}
	c.wait(t)
	for i, mr := range c.mrs {
		for _, k := range mr.Keys() {
			if !strings.HasPrefix(k, VersionPrefix) { // a delete leaves its version, a tombstone
				t.Fatalf("node %d keeps %v", i, mr.Keys())
			}
		}
	}
	c.setMask(0b01011, modeFail)
	_, err = c.r.Delete(ctx, keys)
	mustKind(t, err, ErrNoQuorum)
}

func TestWrite(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	c.put("k", []string{"old", "old", "old", "old", "old"}, ttl, ttl, ttl, ttl, ttl)
	if err := c.r.Write(ctx, "k", "new", 1500*time.Microsecond*1000); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	for i, mr := range c.mrs {
		if c.value(i, "k") != "new" || mr.TTL("k") != 1500*time.Millisecond {
			t.Fatalf("node %d: %q ttl %v", i, c.value(i, "k"), mr.TTL("k"))
		}
	}
	c.setMask(0b00011, modeFail)
	if err := c.r.Write(ctx, "k", "", 0); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	for i := 2; i < 5; i++ {
		if v, _ := c.mrs[i].Get("k"); v != "" || c.mrs[i].TTL("k") != 0 || !c.mrs[i].Exists("k") {
			t.Fatalf("node %d: %q ttl %v", i, v, c.mrs[i].TTL("k"))
		}
	}
	c.setMask(0b00111, modeFail)
	qe := mustKind(t, c.r.Write(ctx, "k", "v", 0), ErrNoQuorum)
	if qe.Granted > 2 || len(qe.Errs) != 3 {
		t.Fatalf("%+v", qe)
	}
}

func TestGetSet(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		values []string
		fail   int
		want   Value
	}{
		{"all", []string{"x", "x", "x", "x", "x"}, 0, Value{Exists: true, Data: "x", PTTL: PTTLNoExpiry}},
		{"quorum", []string{"x", "y", "x", "y", "x"}, 0, Value{Exists: true, Data: "x", PTTL: PTTLNoExpiry}},
		{"absent", []string{"", "", "", "x", "y"}, 0, Value{Exists: false, Data: "", PTTL: PTTLAbsent}},
		{"split", []string{"x", "x", "y", "y", ""}, 0, Value{Exists: true, Data: "new", PTTL: 10 * time.Second}},
		{"two fail", []string{"x", "x", "x", "y", "y"}, 0b11000, Value{Exists: true, Data: "x", PTTL: PTTLNoExpiry}},
		{"two fail split", []string{"x", "x", "y", "y", "y"}, 0b10000, Value{Exists: true, Data: "new", PTTL: 10 * time.Second}},
	} {
		c := newCluster(t, 5, Options{})
		c.put("k", tc.values)
		c.setMask(tc.fail, modeFail)
		old, err := c.r.GetSet(ctx, "k", "new", 10*time.Second)
		if err != nil || old != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, old, err, tc.want)
		}
		for i, mr := range c.mrs {
			if tc.fail&(1<<i) == 0 && (c.value(i, "k") != "new" || mr.TTL("k") != 10*time.Second) {
				t.Fatalf("%s: node %d: %q ttl %v", tc.name, i, c.value(i, "k"), mr.TTL("k"))
			}
		}
		c.setMask(0b11100, modeFail)
		_, err = c.r.GetSet(ctx, "k", "newer", 0)
		mustKind(t, err, ErrNoQuorum)
	}
	// Without a ttl the value is kept without expiry.
	c := newCluster(t, 3, Options{})
	c.put("k", []string{"x", "x", "x"}, ttl, ttl, ttl)
	old, err := c.r.GetSet(ctx, "k", "new", 0)
	if err != nil || old != (Value{Exists: true, Data: "x", PTTL: ttl}) {
		t.Fatalf("%+v, %v", old, err)
	}
	if c.mrs[0].TTL("k") != 0 {
		t.Fatalf("ttl %v, want none", c.mrs[0].TTL("k"))
	}
}

func TestExpire(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	c.put("k", []string{"x", "y", "", "", ""})
	if ok, err := c.r.Expire(ctx, "k", time.Minute); ok || err != nil {
		t.Fatalf("on 2 of 5: %v, %v; want false", ok, err)
	}
	c.put("k", []string{"x", "y", "x", "", "z"})
	if ok, err := c.r.Expire(ctx, "k", time.Minute); !ok || err != nil {
		t.Fatalf("on 4 of 5: %v, %v; want true", ok, err)
	}
	c.wait(t)
	for i, mr := range c.mrs {
		if i != 3 && mr.TTL("k") != time.Minute {
			t.Fatalf("node %d: ttl %v", i, mr.TTL("k"))
		}
	}
	c.setMask(0b10011, modeFail)
	_, err := c.r.Expire(ctx, "k", time.Minute)
	mustKind(t, err, ErrNoQuorum)
	if _, err := c.r.Expire(ctx, "k", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ttl 0: %v", err)
	}
}

func TestCompareAndSet(t *testing.T) {
	ctx := context.Background()
	for _, held := range []int{5, 3, 2} {
		c := newCluster(t, 5, Options{})
		values := []string{"y", "y", "y", "y", "y"}
		for i := range held {
			values[i] = "old"
		}
		c.put("k", values)
		lock, err := c.r.CompareAndSet(ctx, "k", "old", "new", ttl)
		if held >= 3 {
			if err != nil || lock.Token != "new" || lock.Key != "k" || lock.Granted < 3 || lock.Validity <= 0 {
				t.Fatalf("held on %d: %+v, %v", held, lock, err)
			}
		} else {
			mustKind(t, err, ErrNotHeld)
		}
		c.wait(t)
		if n := c.holders("k", "new"); n != held {
			t.Fatalf("held on %d: new on %d nodes", held, n)
		}
		if c.holders("k", "y") != 5-held {
			t.Fatal("another value was overwritten")
		}
	}
	clock := &stepClock{t: time.Unix(1000, 0), step: 10 * time.Millisecond}
	c := newCluster(t, 5, Options{Now: clock.Now})
	c.put("k", []string{"old", "old", "old", "old", "old"})
	lock, err := c.r.CompareAndSet(ctx, "k", "old", "new", ttl)
	if want := ttl - 10*time.Millisecond - 1002*time.Millisecond; err != nil || lock.Validity != want {
		t.Fatalf("%+v, %v; want validity %v", lock, err, want)
	}
	c.setMask(0b11100, modeFail)
	_, err = c.r.CompareAndSet(ctx, "k", "new", "newer", ttl)
	mustKind(t, err, ErrNoQuorum)
}

func TestFlushAll(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	c.put("k", []string{"x", "x", "x", "x", "x"})
	if err := c.r.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	for i, mr := range c.mrs {
		if mr.Exists("k") {
			t.Fatalf("node %d keeps k", i)
		}
	}
	c.setMask(0b01101, modeFail)
	mustKind(t, c.r.FlushAll(ctx), ErrNoQuorum)
}

func TestDataInvalid(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{})
	checks := map[string]error{}
	_, checks["Read"] = c.r.Read(ctx, "")
	_, checks["Exists"] = c.r.Exists(ctx, nil)
	_, checks["Delete"] = c.r.Delete(ctx, []string{"a", ""})
	checks["Write"] = c.r.Write(ctx, "", "v", 0)
	_, checks["GetSet"] = c.r.GetSet(ctx, "", "v", 0)
	_, checks["Expire"] = c.r.Expire(ctx, "", time.Second)
	_, checks["CompareAndSet"] = c.r.CompareAndSet(ctx, "k", "", "v", ttl)
	_, checks["AcquireKeys"] = c.r.AcquireKeys(ctx, nil, "t", ttl, IfAbsent)
	_, checks["AcquireKeys mode"] = c.r.AcquireKeys(ctx, []string{"k"}, "t", ttl, AcquireMode(7))
	_, checks["ExtendKeys"] = c.r.ExtendKeys(ctx, []string{"k", ""}, "t", ttl, Add)
	_, checks["ReleaseKeys"] = c.r.ReleaseKeys(ctx, []string{"k"}, "")
	for op, err := range checks {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", op, err)
		}
	}
}

func TestDataNoNodes(t *testing.T) {
	ctx := context.Background()
	r := New(nil, Options{Logger: testLogger(t)})
	errs := map[string]error{}
	_, errs["Read"] = r.Read(ctx, "k")
	_, errs["Exists"] = r.Exists(ctx, []string{"k"})
	_, errs["Delete"] = r.Delete(ctx, []string{"k"})
	errs["Write"] = r.Write(ctx, "k", "v", 0)
	_, errs["GetSet"] = r.GetSet(ctx, "k", "v", 0)
	_, errs["Expire"] = r.Expire(ctx, "k", time.Second)
	_, errs["CompareAndSet"] = r.CompareAndSet(ctx, "k", "o", "v", ttl)
	errs["FlushAll"] = r.FlushAll(ctx)
	_, errs["ReleaseKeys"] = r.ReleaseKeys(ctx, []string{"k"}, "t")
	_, errs["ExtendKeys"] = r.ExtendKeys(ctx, []string{"k", "l"}, "t", ttl, Add)
	for op, err := range errs {
		mustKind(t, err, ErrNoQuorum)
		_ = op
	}
}

func TestDataCancel(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := map[string]error{}
	_, errs["Read"] = c.r.Read(ctx, "k")
	_, errs["Exists"] = c.r.Exists(ctx, []string{"k"})
	_, errs["Delete"] = c.r.Delete(ctx, []string{"k"})
	errs["Write"] = c.r.Write(ctx, "k", "v", 0)
	_, errs["GetSet"] = c.r.GetSet(ctx, "k", "v", 0)
	_, errs["Expire"] = c.r.Expire(ctx, "k", time.Second)
	_, errs["CompareAndSet"] = c.r.CompareAndSet(ctx, "k", "o", "v", ttl)
	errs["FlushAll"] = c.r.FlushAll(ctx)
	_, errs["ReleaseKeys"] = c.r.ReleaseKeys(ctx, []string{"k"}, "t")
	for op, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", op, err)
		}
	}
}
