package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
)

// beforeSetNX runs before ahead of its SetNX: a change of the backend
// that lands while an acquire's calls are on their way.
type beforeSetNX struct {
	*faultyNode
	before func()
	after  func()
}

func (n *beforeSetNX) Send(c *backend.Command, deadline time.Time, to backend.Target, tag int, _ bool) {
	(&goSender{n}).Send(c, deadline, to, tag, false)
}

func (n *beforeSetNX) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, string, error) {
	if n.before != nil {
		n.before()
	}
	ok, ver, err := n.faultyNode.SetNX(ctx, key, value, ttl)
	if n.after != nil {
		n.after()
	}
	return ok, ver, err
}

// TestGrantsAcrossADeleteAreNoQuorum: an acquire whose calls land on
// either side of an unconditional, versioned DEL of the key counts only
// the grants made on one version. Y holds k on nodes 1 and 2; X's call
// is granted on node 0; a DEL then reaches nodes 0 and 1 (deleting X's
// copy there and Y's); X's call is granted on node 1 and refused on node
// 2 (the DEL has not reached it yet). Counting both grants, X held k
// with a quorum of 2 while its copy on node 0 was gone, and the next
// acquire, granted on nodes 0 and 2 once the DEL lands there, held it
// with X (docs/safety.md, "Grants on one version"). The grants are on
// versions 0 and 1: the acquire asks every node whether k still holds X,
// only node 1 does, and X is refused.
func TestGrantsAcrossADeleteAreNoQuorum(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{})
	for _, i := range []int{1, 2} {
		_ = c.mrs[i].Set("k", "Y")
	}
	first := make(chan struct{})
	del := func(i int) {
		c.mrs[i].Del("k")
		_ = c.mrs[i].Set(versionKey("k"), "1 w -")
	}
	nodes := []Node{
		&beforeSetNX{faultyNode: c.nodes[0], after: func() { close(first) }},
		&beforeSetNX{faultyNode: c.nodes[1], before: func() {
			select {
			case <-first:
			case <-time.After(5 * time.Second):
				t.Error("node 0's call never returned")
			}
			del(0)
			del(1)
		}},
		c.nodes[2],
	}
	r := New(nodes, Options{NodeTimeout: 10 * time.Second, Logger: testLogger(t)})
	_, err := r.Acquire(ctx, "k", "X", 10*time.Second)
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire over a DEL = %v, want refused (held): its grants are on two versions", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.Close(cctx); err != nil {
		t.Fatal(err)
	}
	del(2)
	if _, err := c.r.Acquire(ctx, "k", "W", 10*time.Second); err != nil {
		t.Fatalf("the next acquire after the DEL landed everywhere: %v", err)
	}
	c.wait(t) // W's acquire answered at a quorum; its last call may be on its way
	for i := range c.mrs {
		if v := c.value(i, "k"); v != "W" {
			t.Fatalf("node %d holds %q after the refused acquire was rolled back, want W's", i, v)
		}
	}
}

// TestGrantsOnDivergedVersionsHold: backends whose versions of a free key
// diverged before the acquire (deletes that reached some and not others,
// a backend restarted empty) grant on different versions with no delete
// between the grants: the acquire asks again, every copy is still there,
// and it holds. Refused and rolled back, a read between the grants and
// the rollback would have seen a lock that then vanished (TestLinearizable
// failed that way).
func TestGrantsOnDivergedVersionsHold(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{})
	_ = c.mrs[0].Set(versionKey("k"), "1 a -")
	_ = c.mrs[1].Set(versionKey("k"), "2 b -")
	if _, err := c.r.Acquire(ctx, "k", "X", 10*time.Second); err != nil {
		t.Fatalf("Acquire on diverged versions = %v, want granted", err)
	}
	c.wait(t)
	for i := range c.mrs {
		if v := c.value(i, "k"); v != "X" {
			t.Fatalf("node %d holds %q, want X", i, v)
		}
	}
}

// TestGrantTallyByVersion: a quorum of grants is split when no one
// version has a quorum of them, however many other versions the
// refusing nodes had.
func TestGrantTallyByVersion(t *testing.T) {
	for _, tc := range []struct {
		name       string
		grants     []grant
		won, split bool
	}{
		{"no companions", []grant{{ok: true}, {ok: true}, {}}, true, false},
		{"one version", []grant{{ok: true, ver: "1 a"}, {}, {ok: true, ver: "1 a"}}, true, false},
		{"two versions", []grant{{ok: true}, {ok: true, ver: "1 a"}, {}}, true, true},
		{"two of three on one", []grant{{ok: true}, {ok: true, ver: "1 a"}, {ok: true, ver: "1 a"}}, true, false},
		{"too few", []grant{{ok: true}, {}, {}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &grantTally{tally: tally{counts: counts{n: 3, q: 2}}}
			for _, x := range tc.grants {
				g.add(x)
			}
			if g.won() != tc.won || g.split() != tc.split {
				t.Fatalf("won = %v, split = %v; want %v, %v", g.won(), g.split(), tc.won, tc.split)
			}
		})
	}
}
