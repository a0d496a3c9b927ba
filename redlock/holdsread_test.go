package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/record"
)

// TestHoldFollowsItsCopy: a hold renews the copy of its key that it
// wrote, stamped by its expiry; a copy written since by someone else
// (deleted and taken again with the same value, given an expiry) is not
// renewed, claimed or scanned, whatever value it holds, and its field is
// dropped.
func TestHoldFollowsItsCopy(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	sum := sha1.Sum([]byte("1"))
	h := record.Field{Key: "k", Digest: hex.EncodeToString(sum[:])}
	for _, mr := range c.mrs {
		_ = mr.Set("k", "1")
		mr.SetTTL("k", 2*time.Second)
	}
	if err := c.r.SetHold(ctx, svc, h); err != nil {
		t.Fatal(err)
	}
	if err := c.r.RenewHold(ctx, svc, h, 2*time.Second); err != nil {
		t.Fatalf("RenewHold of its own copy = %v", err)
	}
	c.wait(t)
	// Another client deletes the key and takes it with the same value.
	for _, mr := range c.mrs {
		mr.Del("k")
		_ = mr.Set("k", "1")
		mr.SetTTL("k", time.Second)
	}
	if got, err := c.r.ScanHolds(ctx, svc); err != nil || len(got) != 0 {
		t.Fatalf("ScanHolds over another client's copy = %+v, %v; want none", got, err)
	}
	if err := c.r.RenewHold(ctx, svc, h, 2*time.Second); !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrHeld) {
		t.Fatalf("RenewHold of another client's copy = %v, want not held", err)
	}
	c.wait(t)
	for i, mr := range c.mrs {
		if ttl := mr.TTL("k"); ttl != time.Second {
			t.Errorf("node %d: the other client's 1 s copy has ttl %v", i, ttl)
		}
	}
	// A hold of any value, whose key is given an expiry by someone else.
	for _, mr := range c.mrs {
		_, _ = mr.Push("list", "x")
		mr.SetTTL("list", 2*time.Second)
	}
	anyHold := record.Field{Key: "list", Digest: record.AnyDigest}
	if err := c.r.SetHold(ctx, svc, anyHold); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	for _, mr := range c.mrs {
		mr.SetTTL("list", time.Second)
	}
	if err := c.r.RenewHold(ctx, svc, anyHold, 2*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("RenewHold of a list given an expiry since = %v, want ErrNotHeld", err)
	}
}

// TestRecordThroughQuarantine: while two of three nodes are quarantined
// (restarted empty) the record is read through the node that has it;
// with every node voting, one node's field is not a quorum's.
func TestRecordThroughQuarantine(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	sum := sha1.Sum([]byte("v"))
	h := record.Field{Key: "k", Digest: hex.EncodeToString(sum[:])}
	_ = c.mrs[0].Set("k", "v")
	c.mrs[0].SetTTL("k", 2*time.Second)
	c.mrs[0].HSet(record.Key(svc), "k", h.Encode())
	if got, err := c.r.ScanHolds(ctx, svc); err != nil || len(got) != 0 {
		t.Fatalf("ScanHolds of one voting node's field = %+v, %v; want none", got, err)
	}
	for i := 1; i < 3; i++ {
		c.r.health[i].mu.Lock()
		c.r.health[i].quarantine(time.Now().Add(time.Minute), "restarted: run_id changed")
		c.r.health[i].mu.Unlock()
	}
	got, err := c.r.ScanHolds(ctx, svc)
	if err != nil || len(got) != 1 || got[0].Field != h || got[0].Lease != 2*time.Second {
		t.Fatalf("ScanHolds during the quarantine = %+v, %v; want %+v", got, err, h)
	}
}

// TestReadHold: the field a quorum holds alike is read (its deadline and
// digest; fields an older proxy wrote with an owner read alike); one
// node's field, a hold an older proxy ended or no field at all reads as
// none.
func TestReadHold(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	key := record.Key(svc)
	set := func(k string, fields ...string) {
		for i, f := range fields {
			if f != "" {
				c.mrs[i].HSet(key, k, f)
			}
		}
	}
	set("held", "A 0 d1", "0 d1", "B 0 d1")
	set("one", "A 5 d1", "", "")
	set("split", "A 5 d1", "A 6 d1", "A 7 d1")
	set("ended", "~ 0 d1", "~ 0 d1", "0 d1")
	set("bad", "A x d1", "junk", "A x d1")
	h, ok, err := c.r.ReadHold(ctx, svc, "held")
	if err != nil || !ok || h.Deadline != 0 || h.Digest != "d1" || h.Key != "held" {
		t.Fatalf("ReadHold(held) = %+v, %v, %v", h, ok, err)
	}
	for _, k := range []string{"one", "split", "ended", "bad", "absent"} {
		if h, ok, err := c.r.ReadHold(ctx, svc, k); err != nil || ok {
			t.Fatalf("ReadHold(%s) = %+v, %v, %v; want none", k, h, ok, err)
		}
	}
	for _, mr := range c.mrs[:2] {
		mr.Close()
	}
	if _, _, err := c.r.ReadHold(ctx, svc, "held"); err == nil {
		t.Fatal("ReadHold with one node answering: want an error")
	}
}
