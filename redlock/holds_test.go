package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/record"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// digestOf is the record's digest of v.
func digestOf(v string) string { s := sha1.Sum([]byte(v)); return hex.EncodeToString(s[:]) }

// TestHoldsRecord: a hold is written to a quorum where its key holds its
// value, naming no owner; an end with another value's digest leaves it,
// one with its own deletes it. Bad holds are refused.
func TestHoldsRecord(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	key := record.Key(svc)
	// on counts the nodes whose field of k is f: a quorum write leaves
	// the last node's call in flight.
	on := func(k, f string) int {
		n := 0
		for _, mr := range c.mrs {
			if mr.Exists(key) && mr.HGet(key, k) == f {
				n++
			}
		}
		return n
	}
	for _, mr := range c.mrs {
		_ = mr.Set("lock", "v")
	}
	a := record.Field{Key: "lock", Digest: digestOf("v")}
	if err := c.r.SetHold(ctx, svc, a); err != nil {
		t.Fatal(err)
	}
	if n := on("lock", "0 "+a.Digest); n < 2 {
		t.Fatalf("the hold is on %d nodes", n)
	}
	if err := c.r.EndHold(ctx, svc, "lock", digestOf("w")); err != nil {
		t.Fatal(err)
	}
	if n := on("lock", "0 "+a.Digest); n < 2 {
		t.Fatalf("an end of another value took the hold off: on %d nodes", n)
	}
	if err := c.r.EndHold(ctx, svc, "lock", a.Digest); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the ended hold off every node", func() bool { return on("lock", "0 "+a.Digest) == 0 })
	for _, bad := range []record.Field{{Digest: "d"}, {Key: "k"}, {Key: "k", Digest: "a b"}} {
		if err := c.r.SetHold(ctx, svc, bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("SetHold(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

// TestRenewHold: any proxy renews a hold while its key holds its value;
// a node whose field is gone is not renewed (its copy may be another
// client's); once the key holds another value the renewal fails
// (ErrNotHeld), drops the field and gives no lease.
func TestRenewHold(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	hk := record.Key(svc)
	h := record.Field{Key: "lock", Digest: digestOf("v")}
	// every waits until every node's field of lock is f (a quorum
	// operation leaves the last node's call in flight).
	every := func(what, f string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, what, func() bool {
			for _, mr := range c.mrs {
				if mr.HGet(hk, "lock") != f {
					return false
				}
			}
			return true
		})
	}
	for _, mr := range c.mrs {
		if err := mr.Set("lock", "v"); err != nil {
			t.Fatal(err)
		}
		mr.SetTTL("lock", time.Second)
	}
	if err := c.r.SetHold(ctx, svc, h); err != nil {
		t.Fatal(err)
	}
	every("the hold on every node", h.Encode())
	c.mrs[2].HDel(hk, "lock")
	if err := c.r.RenewHold(ctx, svc, h, 5*time.Second); err != nil {
		t.Fatalf("RenewHold = %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the lease renewed where the field is", func() bool {
		return c.mrs[0].TTL("lock") == 5*time.Second && c.mrs[1].TTL("lock") == 5*time.Second
	})
	if c.mrs[2].HGet(hk, "lock") != "" || c.mrs[2].TTL("lock") != time.Second {
		t.Fatalf("node without the field: field %q, ttl %v; want none and the old 1s", c.mrs[2].HGet(hk, "lock"), c.mrs[2].TTL("lock"))
	}
	c.mrs[2].HSet(hk, "lock", h.Encode())
	// A hold whose field has a deadline (written through any proxy) is
	// renewed to it at most, whatever deadline the renewer knew.
	d := h
	d.Deadline = time.Now().Add(3 * time.Second).UnixMilli()
	if err := c.r.SetHold(ctx, svc, d); err != nil {
		t.Fatal(err)
	}
	every("the field with its deadline", d.Encode())
	if err := c.r.RenewHold(ctx, svc, h, 9*time.Second); err != nil {
		t.Fatalf("RenewHold to a deadline = %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "every copy renewed to the deadline", func() bool {
		for _, mr := range c.mrs {
			if ttl := mr.TTL("lock"); ttl > 3*time.Second || ttl < 2*time.Second {
				return false
			}
		}
		return true
	})
	for _, mr := range c.mrs {
		if err := mr.Set("lock", "w"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.r.RenewHold(ctx, svc, d, 9*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("RenewHold of an overwritten key = %v, want ErrNotHeld", err)
	}
	every("the hold of an overwritten key dropped", "")
	for i, mr := range c.mrs {
		if mr.TTL("lock") == 9*time.Second {
			t.Fatalf("node %d renewed an overwritten key", i)
		}
	}
	if err := c.r.RenewHold(ctx, svc, record.Field{Key: "k"}, time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("RenewHold without a digest = %v, want ErrInvalid", err)
	}
	past := record.Field{Key: "lock", Digest: digestOf("w"), Deadline: time.Now().Add(-time.Second).UnixMilli()}
	for _, mr := range c.mrs {
		mr.HSet(hk, "lock", past.Encode())
		mr.SetTTL("lock", time.Second)
	}
	if err := c.r.RenewHold(ctx, svc, past, 9*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("RenewHold past its deadline = %v, want ErrNotHeld", err)
	}
	for i, mr := range c.mrs {
		if mr.TTL("lock") != time.Second {
			t.Fatalf("node %d renewed a hold past its deadline: ttl %v", i, mr.TTL("lock"))
		}
	}
}

// TestScanHolds: a scan returns the holds a quorum records for a key that
// holds their value (fields an older proxy wrote with an owner too),
// with the lease a quorum of copies has; it deletes fields whose key was released or
// overwritten, and skips holds a quorum does not record. An any-value
// hold is renewed while its key exists, whatever its type.
func TestScanHolds(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	hk := record.Key(svc)
	sum := sha1.Sum([]byte("v"))
	digest := hex.EncodeToString(sum[:])
	for i, mr := range c.mrs {
		_ = mr.Set("a", "v")
		mr.SetTTL("a", time.Duration(i+1)*time.Second)
		_ = mr.Set("gone", "other")
		_, _ = mr.Push("list", "x")
		a := "0 " + digest
		if i == 2 {
			a = "proxyA " + a
		}
		mr.HSet(hk, "a", a)
		mr.HSet(hk, "gone", "0 "+digest)
		mr.HSet(hk, "list", "7 "+record.AnyDigest)
	}
	c.mrs[0].HSet(hk, "lonely", "0 "+digest)
	_ = c.mrs[0].Set("lonely", "v")
	got, err := c.r.ScanHolds(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]record.Scanned{
		"a":    {Field: record.Field{Key: "a", Digest: digest}, Lease: 2 * time.Second},
		"list": {Field: record.Field{Key: "list", Deadline: 7, Digest: record.AnyDigest}, Lease: -1},
	}
	if len(got) != len(want) {
		t.Fatalf("ScanHolds = %+v, want %+v", got, want)
	}
	for _, h := range got {
		if w := want[h.Key]; h != w {
			t.Fatalf("ScanHolds: %+v, want %+v", h, w)
		}
	}
	for i, mr := range c.mrs {
		if mr.HGet(hk, "gone") != "" {
			t.Fatalf("node %d keeps the field of an overwritten key", i)
		}
	}
	// The any-value hold is renewed while the list exists.
	anyHold := record.Field{Key: "list", Digest: record.AnyDigest}
	for _, mr := range c.mrs {
		mr.HSet(hk, "list", anyHold.Encode())
	}
	if err := c.r.RenewHold(ctx, svc, anyHold, 3*time.Second); err != nil {
		t.Fatalf("RenewHold of a list = %v", err)
	}
	for _, mr := range c.mrs {
		mr.Del("list")
	}
	if err := c.r.RenewHold(ctx, svc, anyHold, 3*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("RenewHold of a deleted list = %v, want ErrNotHeld", err)
	}
}

// TestRenewHoldLeavesAnotherValuesField: a field of another value is not
// renewed over, even when the key holds the renewal's value: the copy
// may be a later client's.
func TestRenewHoldLeavesAnotherValuesField(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	hk := record.Key(svc)
	won := record.Field{Key: "k", Digest: digestOf("won")}
	for _, mr := range c.mrs {
		_ = mr.Set("k", "won")
		mr.HSet(hk, "k", "0 "+strings.Repeat("0", 40))
	}
	if err := c.r.RenewHold(ctx, svc, won, 3*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("RenewHold over another value's field = %v, want ErrNotHeld", err)
	}
	for i, mr := range c.mrs {
		if mr.TTL("k") != 0 || mr.HGet(hk, "k") == won.Encode() {
			t.Fatalf("node %d: renewed over another value's field (ttl %v)", i, mr.TTL("k"))
		}
	}
}

// TestEndHold: a hold ended through any proxy is renewed by none after
// (ErrNotHeld); an absent field is not an error. An end with the digest of a value the key no longer
// holds (a stale release) changes nothing.
func TestEndHold(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	sum := sha1.Sum([]byte("v"))
	h := record.Field{Key: "k", Digest: hex.EncodeToString(sum[:])}
	for _, mr := range c.mrs {
		_ = mr.Set("k", "v")
	}
	if err := c.r.SetHold(ctx, svc, h); err != nil {
		t.Fatal(err)
	}
	old := sha1.Sum([]byte("an old token"))
	if err := c.r.EndHold(ctx, svc, "k", hex.EncodeToString(old[:])); err != nil {
		t.Fatal(err)
	}
	if err := c.r.RenewHold(ctx, svc, h, time.Second); err != nil {
		t.Fatalf("RenewHold after the end of another value = %v, want it still held", err)
	}
	if err := c.r.EndHold(ctx, svc, "k", h.Digest); err != nil {
		t.Fatal(err)
	}
	if err := c.r.EndHold(ctx, svc, "absent", ""); err != nil {
		t.Fatalf("EndHold of an absent field = %v", err)
	}
	for _, mr := range c.mrs {
		mr.HSet(record.Key(svc), "garbage", "nonsense")
	}
	if err := c.r.EndHold(ctx, svc, "garbage", ""); err != nil {
		t.Fatalf("EndHold of a malformed field = %v", err)
	}
	if _, err := c.r.ScanHolds(ctx, svc); err != nil {
		t.Fatalf("ScanHolds over a malformed field = %v", err)
	}
	if err := c.r.RenewHold(ctx, svc, h, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("RenewHold of an ended hold = %v, want ErrNotHeld", err)
	}
}

// TestSetHoldByMakerNeedsItsValue: a maker's record is written
// only where the key holds the value of its digest, so the loser of two
// overlapping writes does not replace the winner's field; a hold of any
// value needs the key to exist.
func TestSetHoldByMakerNeedsItsValue(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	sum := func(v string) string { s := sha1.Sum([]byte(v)); return hex.EncodeToString(s[:]) }
	for _, mr := range c.mrs {
		if err := mr.Set("k", "winner"); err != nil {
			t.Fatal(err)
		}
	}
	win := record.Field{Key: "k", Digest: sum("winner")}
	if err := c.r.SetHold(ctx, svc, win); err != nil {
		t.Fatalf("the winner's record = %v", err)
	}
	lose := record.Field{Key: "k", Digest: sum("loser")}
	if err := c.r.SetHold(ctx, svc, lose); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("the loser's record = %v, want ErrNotHeld", err)
	}
	testkit.Eventually(t, 10*time.Second, "the winner's field on every node", func() bool {
		for _, mr := range c.mrs {
			if mr.HGet(record.Key(svc), "k") != win.Encode() {
				return false
			}
		}
		return true
	})
	if err := c.r.SetHold(ctx, svc, record.Field{Key: "absent", Digest: record.AnyDigest}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("a hold of any value of an absent key = %v, want ErrNotHeld", err)
	}
}

// TestHoldRecordReadInPages: a record of thousands of holds is scanned
// page by page, every hold once (miniredis answers HSCAN
// in one page: TestHoldRecordPagesOnRedis shows the pages on Redis).
func TestHoldRecordReadInPages(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc, holds = "mymaster", 2500
	hk := record.Key(svc)
	for _, mr := range c.mrs {
		for i := range holds {
			k := fmt.Sprintf("k%d", i)
			_ = mr.Set(k, "v")
			mr.HSet(hk, k, "0 "+record.AnyDigest)
		}
	}
	got, err := c.r.ScanHolds(ctx, svc)
	if err != nil || len(got) != holds {
		t.Fatalf("ScanHolds = %d holds, %v; want %d", len(got), err, holds)
	}
}

// TestRenewHoldsPage: one call per node renews a page of holds, each
// decided on its own: renewed; changed in place (APPEND through a proxy
// that did not know it held: the client's data now, given its expiry,
// none here, and no longer held); released (gone); taken again with
// another value (its field another's: left alone).
func TestRenewHoldsPage(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	digest := func(v string) string { s := sha1.Sum([]byte(v)); return hex.EncodeToString(s[:]) }
	holds := []record.Field{
		{Key: "renewed", Digest: digest("v")},
		{Key: "changed", Digest: digest("v")},
		{Key: "released", Digest: digest("v")},
		{Key: "theirs", Digest: digest("v")},
	}
	for _, h := range holds {
		for _, mr := range c.mrs {
			_ = mr.Set(h.Key, "v")
			mr.SetTTL(h.Key, time.Second)
		}
		if err := c.r.SetHold(ctx, svc, h); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "every field on every node", func() bool {
		for _, mr := range c.mrs {
			if fields, _ := mr.HKeys(record.Key(svc)); len(fields) != len(holds) {
				return false
			}
		}
		return true
	})
	for i, n := range c.r.nodes {
		if _, err := n.Do(ctx, "APPEND", "changed", "x"); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		c.mrs[i].Del("released")
		_ = c.mrs[i].Set("theirs", "w")
		c.mrs[i].HSet(record.Key(svc), "theirs", "0 "+digest("w"))
	}
	errs := c.r.RenewHolds(ctx, svc, holds, 5*time.Second)
	for i, want := range []error{nil, ErrNotHeld, ErrNotHeld, ErrNotHeld} {
		if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
			t.Errorf("%s: %v, want %v", holds[i].Key, errs[i], want)
		}
	}
	// (Every node, once the calls the quorum did not wait for are done.)
	testkit.Eventually(t, 10*time.Second, "every node renewed, changed and dropped", func() bool {
		for _, mr := range c.mrs {
			if v, _ := mr.Get("changed"); mr.TTL("renewed") != 5*time.Second || v != "vx" || mr.TTL("changed") != 0 ||
				mr.HGet(record.Key(svc), "changed") != "" || mr.HGet(record.Key(svc), "released") != "" ||
				mr.HGet(record.Key(svc), "theirs") != "0 "+digest("w") {
				return false
			}
		}
		return true
	})
}

// TestAcquireHold: a hold's acquisition writes its field with the key, in
// one call per node; a second acquisition of the held key is refused and
// leaves the field as it was.
func TestAcquireHold(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	sum := sha1.Sum([]byte("t1"))
	h := record.Field{Key: "k", Digest: hex.EncodeToString(sum[:])}
	if _, err := c.r.AcquireHold(ctx, svc, h, "t1", time.Second); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the key and its field on every node", func() bool {
		for _, mr := range c.mrs {
			if v, _ := mr.Get("k"); v != "t1" || mr.HGet(record.Key(svc), "k") != h.Encode() {
				return false
			}
		}
		return true
	})
	other := h
	other.Digest = "other"
	if _, err := c.r.AcquireHold(ctx, svc, other, "t2", time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("a second AcquireHold = %v, want ErrHeld", err)
	}
	for i, mr := range c.mrs {
		if f := mr.HGet(record.Key(svc), "k"); f != h.Encode() {
			t.Fatalf("node %d: field %q after a refused acquisition, want %q", i, f, h.Encode())
		}
	}
}

// TestRecordPrefix: package record repeats ReservedPrefix, which it
// cannot import (this package imports it).
func TestRecordPrefix(t *testing.T) {
	if got := record.Keys("s"); got[0] != ReservedPrefix+"holds:s" || got[1] != ReservedPrefix+"holds-at:s" {
		t.Errorf("record.Keys = %q, want both under %q", got, ReservedPrefix)
	}
}
