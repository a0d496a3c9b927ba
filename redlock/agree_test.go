package redlock

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// TestCombineWhole: a vote answers one reply that a quorum of backends
// gave in full, never one put together column by column.
func TestCombineWhole(t *testing.T) {
	a := func(vs ...any) []any { return vs }
	set := script.Shape{Order: script.AnyOrder}
	pairs := script.Shape{Order: script.PairsAnyOrder}
	for _, tc := range []struct {
		name    string
		replies []any
		sh      script.Shape
		want    any
		agreed  int
	}{
		// The owner and pttl of a hash lock: A holds a quorum for 300 ms,
		// not 9000 (column by column answered [A, 9000]).
		{"owner and pttl", a(a("A", int64(9000)), a("A", int64(9000)), a("A", int64(300)), a("B", int64(9000)), a("B", int64(9000))), script.Shape{}, a("A", int64(300)), 3},
		// No backend and no quorum said [A, y]: column by column did.
		{"columns of different backends", a(a("A", "x"), a("A", "x"), a("A", "y"), a("B", "y"), a("B", "y")), script.Shape{}, nil, 2},
		{"ttls a few ms apart", a(a("A", int64(8999)), a("A", int64(9000)), a("A", int64(8998)), a("A", int64(8997)), nil), script.Shape{}, a("A", int64(8998)), 4},
		{"lengths differ", a(a("A"), a("A"), a("A", "B"), a("A", "B"), a("A", "B", "C")), script.Shape{}, nil, 2},
		{"nested", a(a(a("A", int64(5)), "x"), a(a("A", int64(7)), "x"), a(a("A", int64(9)), "x"), a(a("B", int64(9)), "x"), nil), script.Shape{}, a(a("A", int64(5)), "x"), 3},
		{"nested differs inside", a(a(a("A", int64(5)), "x"), a(a("A", int64(7)), "y"), a(a("A", int64(9)), "x"), a(a("B", int64(9)), "x"), nil), script.Shape{}, nil, 2},
		// Several positive integers: a reply one backend gave, that q
		// backends meet or exceed in every number; never numbers of
		// different backends put together (column by column answered
		// [80, 1], which no backend gave).
		{"two ttls, none met by a quorum", a(a(int64(100), int64(1)), a(int64(90), int64(50)), a(int64(80), int64(60)), a(int64(10), int64(70)), a(int64(5), int64(80))), script.Shape{}, nil, 2},
		{"two ttls, one met by a quorum", a(a(int64(9), int64(9)), a(int64(8), int64(8)), a(int64(7), int64(7)), a(int64(1), int64(100)), a(int64(1), int64(1))), script.Shape{}, a(int64(7), int64(7)), 5},
		{"no reply of them", a(a(int64(5), int64(1)), a(int64(3), int64(9)), a(int64(4), int64(8)), nil, nil), script.Shape{}, nil, 2},
		{"sign differs", a(a("A", int64(9000)), a("A", int64(9000)), a("A", int64(-1)), a("A", int64(0)), a("A", int64(-2))), script.Shape{}, nil, 2},
		{"set in any order", a(a("a", "b", "c"), a("c", "a", "b"), a("b", "c", "a"), a("a", "b"), nil), set, a("a", "b", "c"), 3},
		{"set in order", a(a("a", "b", "c"), a("c", "a", "b"), a("b", "c", "a"), a("a", "b"), nil), script.Shape{}, nil, 1},
		{"multiset", a(a("1", "1", "2"), a("1", "2", "1"), a("2", "2", "1"), a("2", "1", "2"), a("1", "2", "2")), set, a("2", "2", "1"), 3},
		{"pairs in any order", a(a("f", "1", "g", "2"), a("g", "2", "f", "1"), a("f", "2", "g", "1"), a("g", "1", "f", "2"), a("f", "1", "g", "2")), pairs, a("f", "1", "g", "2"), 3},
		{"a set inside a table", a(a("x", a("a", "b")), a("x", a("b", "a")), a("x", a("a", "b")), nil, nil), script.Shape{Elems: []script.Shape{{}, set}}, a("x", a("a", "b")), 3},
		{"integers in a set are exact", a(a(int64(1), int64(2)), a(int64(2), int64(1)), a(int64(3), int64(1)), nil, nil), set, nil, 2},
		// Scalars keep their rules.
		{"positive", a(int64(5), int64(9), int64(7), int64(8), int64(-2)), script.Shape{}, int64(7), 4},
		{"codes", a(int64(-1), int64(-2), int64(-2), int64(-2), int64(5)), script.Shape{}, int64(-2), 3},
		{"codes split", a(int64(-1), int64(-1), int64(-2), int64(-2), int64(0)), script.Shape{}, nil, 2},
		{"status", a(Status("OK"), Status("OK"), Status("OK"), nil, RedisError("ERR x")), script.Shape{}, Status("OK"), 3},
		{"bulk is not status", a(Status("OK"), Status("OK"), "OK", "OK", nil), script.Shape{}, nil, 2},
		{"errors", a(RedisError("ERR x"), RedisError("ERR x"), RedisError("ERR x"), nil, nil), script.Shape{}, RedisError("ERR x"), 3},
		{"nil", a(nil, nil, nil, int64(1), int64(1)), script.Shape{}, nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, agreed := Combine(tc.replies, 3, tc.sh)
			if agreed != tc.agreed || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("combine = %#v (%d agree), want %#v (%d agree)", got, agreed, tc.want, tc.agreed)
			}
		})
	}
}

// TestCombineLeavesRepliesAlone: the answer's lower bounds are a copy.
func TestCombineLeavesRepliesAlone(t *testing.T) {
	r0 := []any{"A", int64(9)}
	replies := []any{r0, []any{"A", int64(3)}, []any{"A", int64(5)}}
	got, _ := Combine(replies, 2, script.Shape{})
	if !reflect.DeepEqual(got, []any{"A", int64(5)}) || r0[1] != int64(9) {
		t.Fatalf("combine = %v, reply 0 now %v", got, r0)
	}
}

// TestVoteDisagree: the hash lock read by a script, on five
// backends holding A/9000, A/9000, A/300, B/9000, B/9000.
func TestVoteDisagree(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	for i, owner := range []string{"A", "A", "A", "B", "B"} {
		c.mrs[i].HSet("h", "owner", owner)
		ttl := 9 * time.Second
		if i == 2 {
			ttl = 300 * time.Millisecond
		}
		c.mrs[i].SetTTL("h", ttl)
		c.mrs[i].Set("s", []string{"x", "x", "y", "y", "z"}[i])
	}
	read := script.New("return {redis.call('HGET', KEYS[1], 'owner'), redis.call('PTTL', KEYS[1])}")
	v, err := c.r.Vote(ctx, read, []string{"h"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, []any{"A", int64(300)}) {
		t.Fatalf("vote = %v, want [A 300]", v)
	}
	pair := script.New("return {redis.call('HGET', KEYS[1], 'owner'), redis.call('GET', KEYS[2])}")
	_, err = c.r.Vote(ctx, pair, []string{"h", "s"}, nil)
	qe := mustKind(t, err, ErrDisagree)
	if !errors.Is(err, ErrNoQuorum) || qe.Granted != 2 || err.Error() != "backends disagree: 2 of 5 agree, need 3" {
		t.Fatalf("err = %v (granted %d)", err, qe.Granted)
	}
	// Too few answering is not a disagreement.
	c.setMask(0b00111, modeFail)
	_, err = c.r.Vote(ctx, read, []string{"h"}, nil)
	if qe := mustKind(t, err, ErrNoQuorum); errors.Is(err, ErrDisagree) || qe.Answered != 2 {
		t.Fatalf("err = %v", err)
	}
}
