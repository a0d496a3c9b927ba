package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestHoldsRecord: a hold is written to a quorum under its owner; another
// proxy cannot overwrite it unless it passes the owner it saw (a claim);
// a hand-over marks the owner's holds and counts them; only the owner
// drops its hold. Bad holds are refused.
func TestHoldsRecord(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	key := HoldsKey(svc)
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

	a := Hold{Key: "lock", Owner: "proxyA", Digest: "d1"}
	if err := c.r.SetHold(ctx, svc, a, "proxyA"); err != nil {
		t.Fatal(err)
	}
	if err := c.r.SetHold(ctx, svc, Hold{Key: "other", Owner: "proxyA", Deadline: 42, Digest: "d2"}, "proxyA"); err != nil {
		t.Fatal(err)
	}
	if n := on("lock", "proxyA 0 d1"); n < 2 {
		t.Fatalf("the hold is on %d nodes", n)
	}
	// B may not take A's hold without naming A.
	b := Hold{Key: "lock", Owner: "proxyB", Digest: "d1"}
	if err := c.r.SetHold(ctx, svc, b, "proxyB"); !errors.Is(err, ErrHeld) {
		t.Fatalf("SetHold over another owner = %v, want ErrHeld", err)
	}
	if err := c.r.DropHold(ctx, svc, "lock", "proxyB"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("DropHold of another owner's hold = %v, want ErrNotHeld", err)
	}
	// A hands over: both its holds, counted.
	if n, err := c.r.HandOverHolds(ctx, svc, "proxyA"); err != nil || n != 2 {
		t.Fatalf("HandOverHolds = %d, %v; want 2", n, err)
	}
	if n := on("other", "-proxyA 42 d2"); n < 2 {
		t.Fatalf("handed over on %d nodes", n)
	}
	// B claims the handed-over hold.
	if err := c.r.SetHold(ctx, svc, b, HandedOver+"proxyA"); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if n, err := c.r.HandOverHolds(ctx, svc, "proxyA"); err != nil || n != 0 {
		t.Fatalf("HandOverHolds again = %d, %v; want 0", n, err)
	}
	if err := c.r.DropHold(ctx, svc, "lock", "proxyB"); err != nil {
		t.Fatal(err)
	}
	if n := on("lock", "proxyB 0 d1"); n > 1 {
		t.Fatalf("the dropped hold is still on %d nodes", n)
	}
	for _, bad := range []Hold{{Owner: "x", Digest: "d"}, {Key: "k", Digest: "d"}, {Key: "k", Owner: "a b", Digest: "d"}, {Key: "k", Owner: "x"}} {
		if err := c.r.SetHold(ctx, svc, bad, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("SetHold(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := c.r.HandOverHolds(ctx, svc, HandedOver); !errors.Is(err, ErrInvalid) {
		t.Fatalf("HandOverHolds(-) = %v, want ErrInvalid", err)
	}
	if h, err := parseHold("k", "proxyA 42 d"); err != nil || h != (Hold{Key: "k", Owner: "proxyA", Deadline: 42, Digest: "d"}) {
		t.Fatalf("parseHold = %+v, %v", h, err)
	}
	for _, bad := range []string{"", "a b", "a -1 d", "a x d", "a 1 d e"} {
		if _, err := parseHold("k", bad); err == nil {
			t.Fatalf("parseHold(%q) accepted", bad)
		}
	}
}

// TestRenewHold: the owner renews while the key holds its value, and
// writes the field back where a node lost it; once a peer owns the field,
// or the key holds another value, the renewal fails (ErrHeld, ErrNotHeld)
// and gives no lease.
func TestRenewHold(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	hk := HoldsKey(svc)
	sum := sha1.Sum([]byte("v"))
	h := Hold{Key: "lock", Owner: "proxyA", Digest: hex.EncodeToString(sum[:])}
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
	if err := c.r.SetHold(ctx, svc, h, h.Owner); err != nil {
		t.Fatal(err)
	}
	every("the hold on every node", h.field())
	// A node without the field (it missed the record, or a release
	// dropped it and the key was taken again) is not renewed: its copy
	// may be another client's.
	c.mrs[2].HDel(hk, "lock")
	if err := c.r.RenewHold(ctx, svc, h, 5*time.Second); err != nil {
		t.Fatalf("RenewHold = %v", err)
	}
	// The renewal answers at a quorum; the last node's call may land after.
	testkit.Eventually(t, 10*time.Second, "the lease renewed where the field is", func() bool {
		return c.mrs[0].TTL("lock") == 5*time.Second && c.mrs[1].TTL("lock") == 5*time.Second
	})
	if c.mrs[2].HGet(hk, "lock") != "" || c.mrs[2].TTL("lock") != time.Second {
		t.Fatalf("node without the field: field %q, ttl %v; want none and the old 1s", c.mrs[2].HGet(hk, "lock"), c.mrs[2].TTL("lock"))
	}
	c.mrs[2].HSet(hk, "lock", h.field())
	// A peer took the hold over: A's renewal stops.
	b := h
	b.Owner = "proxyB"
	if err := c.r.SetHold(ctx, svc, b, h.Owner); err != nil {
		t.Fatal(err)
	}
	every("the take-over on every node", b.field())
	if err := c.r.RenewHold(ctx, svc, h, 9*time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("RenewHold after a take-over = %v, want ErrHeld", err)
	}
	// The key was overwritten: B's renewal ends the hold.
	for _, mr := range c.mrs {
		if err := mr.Set("lock", "w"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.r.RenewHold(ctx, svc, b, 9*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("RenewHold of an overwritten key = %v, want ErrNotHeld", err)
	}
	every("the hold of an overwritten key dropped", "")
	for i, mr := range c.mrs {
		if mr.TTL("lock") == 9*time.Second {
			t.Fatalf("node %d renewed an overwritten key", i)
		}
	}
	if err := c.r.RenewHold(ctx, svc, Hold{Key: "k", Owner: HandedOver, Digest: "d"}, time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("RenewHold of a handed-over hold = %v, want ErrInvalid", err)
	}
}

// TestScanHolds: a scan returns the holds a quorum records for a key that
// holds their value, with the owner most nodes name and the lease a
// quorum of copies has; it deletes fields whose key was released or
// overwritten, and skips holds a quorum does not record. An any-value
// hold is renewed while its key exists, whatever its type.
func TestScanHolds(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	hk := HoldsKey(svc)
	sum := sha1.Sum([]byte("v"))
	digest := hex.EncodeToString(sum[:])
	for i, mr := range c.mrs {
		_ = mr.Set("a", "v")
		mr.SetTTL("a", time.Duration(i+1)*time.Second)
		_ = mr.Set("gone", "other")
		_, _ = mr.Push("list", "x")
		owner := "proxyA"
		if i == 2 {
			owner = HandedOver
		}
		mr.HSet(hk, "a", owner+" 0 "+digest)
		mr.HSet(hk, "gone", "proxyA 0 "+digest)
		mr.HSet(hk, "list", "proxyB 7 "+AnyDigest)
	}
	c.mrs[0].HSet(hk, "lonely", "proxyA 0 "+digest)
	_ = c.mrs[0].Set("lonely", "v")
	got, err := c.r.ScanHolds(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ScannedHold{
		"a":    {Hold: Hold{Key: "a", Owner: "proxyA", Digest: digest}, Lease: 2 * time.Second},
		"list": {Hold: Hold{Key: "list", Owner: "proxyB", Deadline: 7, Digest: AnyDigest}, Lease: -1},
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
	anyHold := Hold{Key: "list", Owner: "proxyB", Deadline: 7, Digest: AnyDigest}
	if err := c.r.RenewHold(ctx, svc, anyHold, 3*time.Second); err != nil {
		t.Fatalf("RenewHold of a list = %v", err)
	}
	for _, mr := range c.mrs {
		mr.Del("list")
	}
	if err := c.r.RenewHold(ctx, svc, anyHold, 3*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("RenewHold of a deleted list = %v, want ErrNotHeld", err)
	}
	// A claim needs the field it names: an absent one is not claimed.
	claim := Hold{Key: "nothing", Owner: "proxyC", Digest: digest}
	if err := c.r.SetHold(ctx, svc, claim, "proxyA"); !errors.Is(err, ErrHeld) {
		t.Fatalf("a claim of an absent field = %v, want ErrHeld", err)
	}
}

// TestRenewHoldLeavesAnotherOwnersField: a field of another owner and
// another value is not renewed over, even when the key holds this owner's
// value: the copy may be a later client's that holds the same value.
func TestRenewHoldLeavesAnotherOwnersField(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	hk := HoldsKey(svc)
	sum := sha1.Sum([]byte("won"))
	won := Hold{Key: "k", Owner: "proxyA", Digest: hex.EncodeToString(sum[:])}
	for _, mr := range c.mrs {
		_ = mr.Set("k", "won")
		mr.HSet(hk, "k", "proxyB 0 "+strings.Repeat("0", 40))
	}
	if err := c.r.RenewHold(ctx, svc, won, 3*time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("RenewHold over another owner's field = %v, want ErrHeld", err)
	}
	for i, mr := range c.mrs {
		if mr.TTL("k") != 0 || mr.HGet(hk, "k") == won.field() {
			t.Fatalf("node %d: renewed over another owner's field (ttl %v)", i, mr.TTL("k"))
		}
	}
}

// TestEndHold: a hold ended by another proxy stops its owner's renewal
// (ErrHeld) and is no longer claimable as handed over; an absent field is
// not an error. An end with the digest of a value the key no longer
// holds (a stale release) changes nothing.
func TestEndHold(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	sum := sha1.Sum([]byte("v"))
	h := Hold{Key: "k", Owner: "proxyA", Digest: hex.EncodeToString(sum[:])}
	for _, mr := range c.mrs {
		_ = mr.Set("k", "v")
	}
	if err := c.r.SetHold(ctx, svc, h, h.Owner); err != nil {
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
		mr.HSet(HoldsKey(svc), "garbage", "nonsense")
	}
	if err := c.r.EndHold(ctx, svc, "garbage", ""); err != nil {
		t.Fatalf("EndHold of a malformed field = %v", err)
	}
	if _, err := c.r.ScanHolds(ctx, svc); err != nil {
		t.Fatalf("ScanHolds over a malformed field = %v", err)
	}
	if err := c.r.RenewHold(ctx, svc, h, time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("RenewHold of an ended hold = %v, want ErrHeld", err)
	}
	claim := h
	claim.Owner = "proxyB"
	if err := c.r.SetHold(ctx, svc, claim, HandedOver); !errors.Is(err, ErrHeld) {
		t.Fatalf("a claim of an ended hold as handed over = %v, want ErrHeld", err)
	}
}

// TestSetHoldByMakerNeedsItsValue: a maker's record (owner "") is written
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
	win := Hold{Key: "k", Owner: "B", Digest: sum("winner")}
	if err := c.r.SetHold(ctx, svc, win, ""); err != nil {
		t.Fatalf("the winner's record = %v", err)
	}
	lose := Hold{Key: "k", Owner: "A", Digest: sum("loser")}
	if err := c.r.SetHold(ctx, svc, lose, ""); !errors.Is(err, ErrHeld) {
		t.Fatalf("the loser's record = %v, want ErrHeld", err)
	}
	testkit.Eventually(t, 10*time.Second, "the winner's field on every node", func() bool {
		for _, mr := range c.mrs {
			if mr.HGet(HoldsKey(svc), "k") != win.field() {
				return false
			}
		}
		return true
	})
	if err := c.r.SetHold(ctx, svc, Hold{Key: "absent", Owner: "A", Digest: AnyDigest}, ""); !errors.Is(err, ErrHeld) {
		t.Fatalf("a hold of any value of an absent key = %v, want ErrHeld", err)
	}
}

// TestHoldRecordReadInPages: a record of thousands of holds is scanned
// and handed over page by page, every hold once (miniredis answers HSCAN
// in one page: TestHoldRecordPagesOnRedis shows the pages on Redis).
func TestHoldRecordReadInPages(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc, holds = "mymaster", 2500
	hk := HoldsKey(svc)
	for _, mr := range c.mrs {
		for i := range holds {
			k := fmt.Sprintf("k%d", i)
			_ = mr.Set(k, "v")
			mr.HSet(hk, k, "proxyA 0 "+AnyDigest)
		}
	}
	got, err := c.r.ScanHolds(ctx, svc)
	if err != nil || len(got) != holds {
		t.Fatalf("ScanHolds = %d holds, %v; want %d", len(got), err, holds)
	}
	if n, err := c.r.HandOverHolds(ctx, svc, "proxyA"); err != nil || n != holds {
		t.Fatalf("HandOverHolds = %d, %v; want %d", n, err, holds)
	}
	fields, _ := c.mrs[1].HKeys(hk)
	for _, h := range fields {
		if f := c.mrs[1].HGet(hk, h); !strings.HasPrefix(f, HandedOver+"proxyA ") {
			t.Fatalf("field %s = %q after the hand-over", h, f)
		}
	}
}

// TestDecodeScanOnce: a field HSCAN returned twice (it may, across
// pages) is one hold, as last read.
func TestDecodeScanOnce(t *testing.T) {
	got, err := decodeScan([]any{"k", "a 0 *", int64(1000), "j", "a 0 *", int64(-1), "k", "b 0 *", int64(2000)})
	if err != nil || len(got) != 2 || got[0].Key != "k" || got[0].Owner != "b" || got[0].Lease != 2*time.Second || got[1].Key != "j" {
		t.Fatalf("decodeScan = %+v, %v", got, err)
	}
}

// TestRenewHoldsPage: one call per node renews a page of holds, each
// decided on its own: renewed; changed in place (APPEND through a proxy
// that did not know it held: the client's data now, given its expiry,
// none here, and no longer held); released (gone); another owner's.
func TestRenewHoldsPage(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	digest := func(v string) string { s := sha1.Sum([]byte(v)); return hex.EncodeToString(s[:]) }
	holds := []Hold{
		{Key: "renewed", Owner: "A", Digest: digest("v")},
		{Key: "changed", Owner: "A", Digest: digest("v")},
		{Key: "released", Owner: "A", Digest: digest("v")},
		{Key: "theirs", Owner: "B", Digest: digest("v")},
	}
	for _, h := range holds {
		for _, mr := range c.mrs {
			_ = mr.Set(h.Key, "v")
			mr.SetTTL(h.Key, time.Second)
		}
		if err := c.r.SetHold(ctx, svc, h, h.Owner); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "every field on every node", func() bool {
		for _, mr := range c.mrs {
			if fields, _ := mr.HKeys(HoldsKey(svc)); len(fields) != len(holds) {
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
	}
	mine := slices.Clone(holds)
	mine[3].Owner = "A"
	errs := c.r.RenewHolds(ctx, svc, mine, 5*time.Second)
	for i, want := range []error{nil, ErrNotHeld, ErrNotHeld, ErrHeld} {
		if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
			t.Errorf("%s: %v, want %v", holds[i].Key, errs[i], want)
		}
	}
	// (Every node, once the calls the quorum did not wait for are done.)
	testkit.Eventually(t, 10*time.Second, "every node renewed, changed and dropped", func() bool {
		for _, mr := range c.mrs {
			if v, _ := mr.Get("changed"); mr.TTL("renewed") != 5*time.Second || v != "vx" || mr.TTL("changed") != 0 ||
				mr.HGet(HoldsKey(svc), "changed") != "" || mr.HGet(HoldsKey(svc), "released") != "" {
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
	h := Hold{Key: "k", Owner: "proxyA", Digest: hex.EncodeToString(sum[:])}
	if _, err := c.r.AcquireHold(ctx, svc, h, "t1", time.Second); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the key and its field on every node", func() bool {
		for _, mr := range c.mrs {
			if v, _ := mr.Get("k"); v != "t1" || mr.HGet(HoldsKey(svc), "k") != h.field() {
				return false
			}
		}
		return true
	})
	other := h
	other.Owner, other.Digest = "proxyB", "other"
	if _, err := c.r.AcquireHold(ctx, svc, other, "t2", time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("a second AcquireHold = %v, want ErrHeld", err)
	}
	for i, mr := range c.mrs {
		if f := mr.HGet(HoldsKey(svc), "k"); f != h.field() {
			t.Fatalf("node %d: field %q after a refused acquisition, want %q", i, f, h.field())
		}
	}
}
