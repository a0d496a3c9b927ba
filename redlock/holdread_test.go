package redlock

import (
	"context"
	"testing"
)

// TestReadHold: the field a quorum holds alike is read (its deadline and
// digest; fields an older proxy wrote with an owner read alike); one
// node's field, a hold an older proxy ended or no field at all reads as
// none.
func TestReadHold(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	key := HoldsKey(svc)
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
