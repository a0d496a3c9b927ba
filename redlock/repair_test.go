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

// TestRepair: a held key is written back to quarantined nodes that lack
// it, with its field in the record, copied from a voting node holding the
// same value under the owner's field, with the lease asked; a quarantined
// node that holds another value is left alone; with no quarantined node
// nothing is written; a value no voting node holds, or holds under
// another owner's field, is not repaired.
func TestRepair(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	sum := sha1.Sum([]byte("tok"))
	digest := hex.EncodeToString(sum[:])
	const svc = "mymaster"
	h := record.Field{Key: "k", Digest: digest}
	for i := range 2 {
		if err := c.mrs[i].Set("k", "tok"); err != nil {
			t.Fatal(err)
		}
		c.mrs[i].HSet(record.Key(svc), "k", h.Encode())
	}
	if n, err := c.r.Repair(ctx, svc, h, 2*time.Second); n != 0 || err != nil {
		t.Fatalf("Repair with no node quarantined = %d, %v; want 0, nil", n, err)
	}
	if err := c.mrs[4].Set("k", "other"); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 5; i++ { // restarted empty
		c.r.health[i].mu.Lock()
		c.r.health[i].quarantine(time.Now().Add(time.Minute), "restarted: run_id changed")
		c.r.health[i].mu.Unlock()
	}
	n, err := c.r.Repair(ctx, svc, h, 2*time.Second)
	if n != 2 || err != nil {
		t.Fatalf("Repair = %d, %v; want 2 nodes written", n, err)
	}
	for i := 2; i < 4; i++ {
		if got := c.value(i, "k"); got != "tok" {
			t.Errorf("node %d holds %q after the repair, want tok", i, got)
		}
		if ttl := c.mrs[i].TTL("k"); ttl <= 0 || ttl > 2*time.Second {
			t.Errorf("node %d: ttl %v after the repair, want the lease of 2s", i, ttl)
		}
		if f := c.mrs[i].HGet(record.Key(svc), "k"); f != h.Encode() {
			t.Errorf("node %d: field %q after the repair, want %q", i, f, h.Encode())
		}
	}
	for i := range 2 {
		if ttl := c.mrs[i].TTL("k"); ttl <= 0 || ttl > 2*time.Second {
			t.Errorf("voting node %d: ttl %v after the repair, want the lease of 2s", i, ttl)
		}
	}
	if got := c.value(4, "k"); got != "other" {
		t.Errorf("node 4 held another value and now holds %q", got)
	}
	if _, err := c.r.Repair(ctx, svc, record.Field{Key: "k", Digest: "0000"}, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Repair of a value no voting node holds = %v, want ErrNotHeld", err)
	}
	if _, err := c.r.Repair(ctx, svc, h, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Repair with no lease = %v, want ErrInvalid", err)
	}
}
