package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// interleaveNode runs before ahead of each script it is sent: a change
// of the backend that lands between two rounds of one operation.
type interleaveNode struct {
	*faultyNode
	before func(s *script.Script)
}

func (n *interleaveNode) Send(c *backend.Command, deadline time.Time, to backend.Target, tag int, _ bool) {
	(&goSender{n}).Send(c, deadline, to, tag, false)
}

func (n *interleaveNode) Eval(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error) {
	n.before(s)
	return n.faultyNode.Eval(ctx, s, keys, args...)
}

// TestDeleteHeldFallbackBelowLaterWrites: DEL of a granted key that
// changed since falls back to a versioned delete one above the newest
// version its first round saw, with the lowest writer. A plain write
// that lands between the two rounds, having read the version the first
// round saw (so with the same counter, as a write after a read that
// answered the DEL's first effect would), outranks that delete and
// stays: the DEL took effect before it. (The register's own delete reads
// the versions again and would delete it.)
func TestDeleteHeldFallbackBelowLaterWrites(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{})
	if err := c.r.Write(ctx, "k", "x", 0); err != nil { // version 1 everywhere
		t.Fatal(err)
	}
	c.wait(t)
	for _, mr := range c.mrs {
		_ = mr.Set("k", "another holder") // changed by a lock command since
	}
	sum := sha1.Sum([]byte("w"))
	later := "2 b " + hex.EncodeToString(sum[:])
	var nodes []Node
	for i, fn := range c.nodes {
		var once sync.Once
		nodes = append(nodes, &interleaveNode{faultyNode: fn, before: func(s *script.Script) {
			if s != delHeldScript { // the fallback's first call
				once.Do(func() {
					_ = c.mrs[i].Set("k", "w")
					_ = c.mrs[i].Set(versionKey("k"), later)
				})
			}
		}})
	}
	r := New(nodes, Options{NodeTimeout: testTimeout, Logger: testLogger(t)})
	existed, released, err := r.DeleteHeld(ctx, "k", "granted here")
	if err != nil || released || !existed {
		t.Fatalf("DeleteHeld = existed %v, released %v, %v; want the fallback, existed", existed, released, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 4*testTimeout)
	defer cancel()
	if err := r.Close(cctx); err != nil {
		t.Fatal(err)
	}
	for i := range c.mrs {
		if v := c.value(i, "k"); v != "w" {
			t.Fatalf("node %d holds %q, want the later write's w", i, v)
		}
	}
	if v, err := c.r.Get(ctx, "k"); err != nil || v.Data != "w" {
		t.Fatalf("Get = %+v, %v; want w", v, err)
	}
}
