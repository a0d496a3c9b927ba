package redlock

import "testing"

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
