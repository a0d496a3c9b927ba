package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// killerNode is a fakeNode whose scripts run until stopped: Eval blocks
// until KillScript (or its context ends); KillScript answers kill, or
// stops the script and answers OK when kill is empty.
type killerNode struct {
	*fakeNode
	kill   string // the backend's error reply to SCRIPT KILL; "" for OK
	stop   chan struct{}
	killed atomic.Int32
}

func (k *killerNode) Eval(ctx context.Context, _ *script.Script, _ []string, _ ...any) (any, error) {
	select {
	case <-k.stop:
		return nil, RedisError("ERR Error running script: Script killed by user with SCRIPT KILL")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (k *killerNode) KillScript(context.Context) error {
	k.killed.Add(1)
	if k.kill != "" {
		return RedisError(k.kill)
	}
	return nil
}

func (k *killerNode) SetScriptLimit(time.Duration)           {}
func (k *killerNode) ApplyScriptLimit(context.Context) error { return nil }
func (k *killerNode) OpenAhead()                             {}

func newKillers(t *testing.T, kill string) ([]*killerNode, *Redlock) {
	return newKillersWithin(t, kill, 50*time.Millisecond)
}

// newKillersWithin is newKillers with the script timeout given.
func newKillersWithin(t *testing.T, kill string, scriptTimeout time.Duration) ([]*killerNode, *Redlock) {
	var ks []*killerNode
	var nodes []Node
	for i := range 3 {
		k := &killerNode{
			fakeNode: &fakeNode{addr: fmt.Sprintf("fake-%d", i), keys: map[string]string{}, probe: Probe{Uptime: -1}},
			kill:     kill, stop: make(chan struct{}),
		}
		ks = append(ks, k)
		nodes = append(nodes, k)
	}
	r := New(nodes, Options{NodeTimeout: 10 * time.Millisecond, ScriptTimeout: scriptTimeout, DownAfter: 1, Logger: testLogger(t)})
	r.loops.Add(1) // as if RunHealth ran: a node can be marked down
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Close(ctx)
	})
	return ks, r
}

// TestVoteRunawayKilled: a script still running on every backend at the
// script timeout is killed on each, the vote fails with a
// *ScriptTimeoutError, and the backends vote again at once although the
// timed-out calls marked them down (DownAfter 1).
func TestVoteRunawayKilled(t *testing.T) {
	ks, r := newKillers(t, "")
	_, err := r.Vote(context.Background(), script.New("return 1"), []string{"k"}, nil)
	var st *ScriptTimeoutError
	if !errors.As(err, &st) || !errors.Is(err, ErrScriptTimeout) || st.Running != 3 || st.Killed != 3 || st.Unkillable != 0 {
		t.Fatalf("Vote of a runaway = %v (%+v), want a ScriptTimeoutError, 3 running, 3 killed", err, st)
	}
	for i, k := range ks {
		if k.killed.Load() != 1 {
			t.Fatalf("node %d: %d SCRIPT KILLs, want 1", i, k.killed.Load())
		}
	}
	if v := r.Voting(); v != 3 {
		t.Fatalf("%d nodes voting after the kill, want 3: %+v", v, r.Status())
	}
}

// TestVoteRunawayUnkillable: a backend answering UNKILLABLE (the script
// wrote) is kept out of votes; the client's error says so.
func TestVoteRunawayUnkillable(t *testing.T) {
	_, r := newKillers(t, "UNKILLABLE Sorry the script already executed write commands against the dataset.")
	_, err := r.Vote(context.Background(), script.New("return 1"), []string{"k"}, nil)
	var st *ScriptTimeoutError
	if !errors.As(err, &st) || st.Unkillable != 3 || st.Killed != 0 {
		t.Fatalf("Vote of an unkillable runaway = %v (%+v), want 3 unkillable", err, st)
	}
	for i, s := range r.Status() {
		if s.State != StateDown {
			t.Fatalf("node %d after UNKILLABLE: %+v, want down", i, s)
		}
	}
}

// TestVoteNotBusyVotesAgain: NOTBUSY (the script ended just before the
// kill) counts as an answer.
func TestVoteNotBusyVotesAgain(t *testing.T) {
	_, r := newKillers(t, "NOTBUSY No scripts in execution right now.")
	_, err := r.Vote(context.Background(), script.New("return 1"), []string{"k"}, nil)
	var st *ScriptTimeoutError
	if !errors.As(err, &st) || st.Killed != 3 {
		t.Fatalf("Vote = %v (%+v), want 3 stopped", err, st)
	}
	if v := r.Voting(); v != 3 {
		t.Fatalf("%d nodes voting, want 3", v)
	}
}

// TestVoteSlowMinorityKilledInBackground: a quorum answered, so the vote
// answers without waiting for the kill of the one backend still running
// the script; the kill is still sent.
func TestVoteSlowMinorityKilledInBackground(t *testing.T) {
	// 1 s: the two nodes that answer at once must be counted within it, or
	// they too are taken for running and killed (a stall under -race).
	ks, r := newKillersWithin(t, "", time.Second)
	for _, k := range ks[1:] {
		close(k.stop) // these two answer at once (the script's error reply)
	}
	_, err := r.Vote(context.Background(), script.New("return 1"), []string{"k"}, nil)
	var st *ScriptTimeoutError
	if errors.As(err, &st) {
		t.Fatalf("Vote with a quorum answering = %v, want the quorum's reply", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ks[0].killed.Load() != 1 || ks[1].killed.Load() != 0 {
		t.Fatalf("SCRIPT KILLs %d, %d; want 1 to the slow node, none to the others", ks[0].killed.Load(), ks[1].killed.Load())
	}
}
