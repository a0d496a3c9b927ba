package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestDecideCopy: what a refill copies of one key, from the states of the
// other backends (N = 5, quorum 3): what a quorum holds alike, else a
// versioned string's newest version (a delete's tombstone included),
// never a lock's short-lived copy, and nothing the others disagree on.
func TestDecideCopy(t *testing.T) {
	r := &Redlock{quorum: 3}
	data := func(digest string, n int64) copyState {
		return copyState{ttl: -1, dump: "dump-" + digest, digest: digest, version: version{n: n, id: "w"}, clean: true}
	}
	gone := func(n int64) copyState { return copyState{ttl: -2, version: version{n: n, id: "w"}, clean: true} }
	changed := data("c", 6)
	changed.clean = false
	short := copyState{ttl: -3}
	for _, tc := range []struct {
		name   string
		states []copyState
		op     string
		dump   string
	}{
		{"a quorum alike", []copyState{data("a", 0), data("a", 0), data("a", 0), data("b", 0)}, "r", "dump-a"},
		{"gone on a quorum", []copyState{gone(0), gone(0), gone(0), data("a", 0)}, "d", ""},
		{"a lock's copies", []copyState{short, short, short, data("a", 0)}, "", ""},
		{"others disagree", []copyState{data("a", 0), data("a", 0), data("b", 0), data("b", 0)}, "?", ""},
		{"a versioned string's newest", []copyState{data("a", 4), data("a", 4), data("b", 5), data("b", 5)}, "r", "dump-b"},
		{"its newest is a delete", []copyState{data("a", 4), data("a", 4), gone(5), gone(5)}, "d", ""},
		{"absent everywhere", []copyState{gone(0), gone(0), short, short}, "", ""},
		{"its newest changed by a lock command since", []copyState{data("a", 4), data("a", 4), changed, data("b", 5)}, "?", ""},
	} {
		op, st := r.decideCopy(tc.states)
		if op != tc.op || op == "r" && st.dump != tc.dump {
			t.Errorf("%s: %q %q, want %q %q", tc.name, op, st.dump, tc.op, tc.dump)
		}
	}
}

// TestRefillWriteLeavesWhatChanged: a refill decision is written only
// where the key still holds what the page read (another proxy may already
// let the backend vote and write to it), and never over a lock's copy
// (a ttl within the quarantine). On a real redis-server (DUMP, RESTORE).
func TestRefillWriteLeavesWhatChanged(t *testing.T) {
	ctx := context.Background()
	n, err := DialNode(startRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
	defer cl.Close()
	for _, kv := range [][2]string{{"src", "copied"}, {"changed", "old"}, {"gone", "x"}, {"kept", "x"}} {
		if err := cl.Set(ctx, kv[0], kv[1], 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	dump := func(k string) string { d, _ := cl.Dump(ctx, k).Result(); return d }
	sum := func(d string) string { s := sha1.Sum([]byte(d)); return hex.EncodeToString(s[:]) }
	src, old, gone := dump("src"), dump("changed"), dump("gone")
	// Written since the page was read: a lock granted through a proxy
	// that lets this backend vote, and data written over "changed".
	if err := cl.Set(ctx, "lock", "token", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Set(ctx, "changed", "new", 0).Err(); err != nil {
		t.Fatal(err)
	}
	keys := []string{"lock", "changed", "gone", "absent"}
	args := []any{"2000",
		"d", 0, "", "-", // absent when read: the lock came since
		"r", 0, src, sum(old), // "old" when read
		"d", 0, "", sum(gone), // unchanged: deleted
		"r", 0, src, "-", // absent and still: copied
	}
	v, err := n.Eval(ctx, refillWriteScript, keys, args...)
	if got, _ := asInts(v, 2); err != nil || len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Fatalf("refill write = %v, %v; want 1 restored, 1 deleted", v, err)
	}
	if got, _ := cl.Get(ctx, "lock").Result(); got != "token" {
		t.Errorf("the lock written since the read holds %q", got)
	}
	if got, _ := cl.Get(ctx, "changed").Result(); got != "new" {
		t.Errorf("data written since the read holds %q", got)
	}
	if cl.Exists(ctx, "gone").Val() != 0 || cl.Get(ctx, "absent").Val() != "copied" {
		t.Error("the unchanged keys were not written")
	}
	// A lock's copy read as it is now is not touched either.
	v, err = n.Eval(ctx, refillWriteScript, []string{"lock"}, "2000", "d", 0, "", sum(dump("lock")))
	if got, _ := asInts(v, 2); err != nil || len(got) != 2 || got[0]+got[1] != 0 || cl.Exists(ctx, "lock").Val() != 1 {
		t.Fatalf("refill write over a lock's copy = %v, %v", v, err)
	}
}
