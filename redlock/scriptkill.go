package redlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
)

// Runaway scripts. A client's script by vote (Vote) may loop for as long
// as it likes on a backend, and a backend running a script serves nobody
// else: every lock quorum through every proxy would fail until it ends.
// So a vote waits for each backend at most ScriptTimeout; a backend whose
// call is still open then is sent SCRIPT KILL on a connection of its own,
// the kill line (the pipelined one is stuck behind the script), dialled
// ahead when the Redlock starts with a script timeout (package backend,
// kill.go, says why and how). A backend reads no other connection while a
// script runs until it has run for its busy-reply-threshold, so the proxy
// sets that to ScriptTimeout on every backend (CheckBackends at start, and
// each new pipelined connection after a restart); it is a server-wide
// setting.
//
// The kill's answer decides what happens to the node:
//
//   - OK (killed) or NOTBUSY (the script ended meanwhile): the node
//     answered, so it votes again at once, even if the timed-out calls
//     marked it down.
//   - UNKILLABLE (the script already wrote, and Redis will not stop a
//     script halfway through its writes): the node is marked down, logged
//     at error level, and stays out of votes until a health probe gets an
//     answer, that is until the script ends by itself or an operator runs
//     SHUTDOWN NOSAVE on it. Such a script is bounded only by the loop
//     bounds the proxy's script analysis enforces.
//   - no answer within the kill's own bound: nothing more is done; the
//     timed-out calls count towards DownAfter like any other.

// DefaultScriptTimeout is Options.ScriptTimeout's default.
const DefaultScriptTimeout = 500 * time.Millisecond

// ErrScriptTimeout: a script by vote did not answer on enough backends
// within ScriptTimeout and was stopped. Vote returns it in a
// *ScriptTimeoutError.
var ErrScriptTimeout = errors.New("script ran past script_timeout")

// ScriptTimeoutError reports a vote that failed because its script ran
// too long: how long it was given, and on how many backends it was still
// running. Its text is safe to show to clients.
type ScriptTimeoutError struct {
	Limit      time.Duration
	Running    int // backends whose call was still open at the limit
	Killed     int // … where SCRIPT KILL stopped it (or it had ended)
	Unkillable int // … where it had written and could not be stopped
}

func (e *ScriptTimeoutError) Error() string {
	s := fmt.Sprintf("script timed out: it ran for more than script_timeout (%v) on %d backends; stopped on %d",
		e.Limit, e.Running, e.Killed)
	if e.Unkillable > 0 {
		s += fmt.Sprintf(", %d could not be stopped because it had written (they do not vote until it ends)", e.Unkillable)
	}
	return s
}

func (e *ScriptTimeoutError) Unwrap() error { return ErrScriptTimeout }

// scriptKiller is a Node that can stop the script its backend runs and
// set how soon the backend listens to that (backend.RedisNode says how).
type scriptKiller interface {
	KillScript(ctx context.Context) error // nil for OK, else the error reply
	SetScriptLimit(d time.Duration)
	ApplyScriptLimit(ctx context.Context) error
	OpenAhead()
}

// bounded runs a vote's fan-out with its per-node deadline: the larger of
// NodeTimeout and ScriptTimeout. The fan-out runs to its end even when ctx
// ends (its calls would run on until the deadline anyway, and only their
// end says which backends still run the script); then the script is
// stopped wherever a call ran into the deadline. c is the fan-out's
// counts: when too few nodes answered for a quorum because of that, the
// vote fails with a *ScriptTimeoutError.
func (r *Redlock) bounded(ctx context.Context, run func(context.Context, time.Duration) error, c *counts) error {
	err := run(context.WithoutCancel(ctx), max(r.nodeTimeout, r.scriptTimeout))
	if r.borrowed {
		return err // not ours to stop: the vote fails with the nodes' errors
	}
	// A quorum that answered decides the reply: the kills then run in
	// the background (a stopped backend must not cost every vote twice).
	running, killed, unkillable := r.stopScripts(c.errs, c.answered < c.q)
	if err != nil {
		return err
	}
	if running > 0 && c.answered < c.q {
		return &ScriptTimeoutError{Limit: r.scriptTimeout, Running: running, Killed: killed, Unkillable: unkillable}
	}
	return nil
}

// timedOut reports a call that ran into its deadline.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// stopScripts sends SCRIPT KILL to every node whose call of a vote ran
// into the deadline (errs are the vote's node errors) and, with wait,
// waits for the answers at most ScriptTimeout; answers that come later
// are still applied. It returns how many nodes were running the script,
// how many stopped, and how many could not be stopped (by then).
func (r *Redlock) stopScripts(errs []error, wait bool) (running, killed, unkillable int) {
	var idx []int
	for _, err := range errs {
		var ne *NodeError
		if !errors.As(err, &ne) || !timedOut(ne.Err) {
			continue
		}
		for i, n := range r.nodes {
			if n.Addr() == ne.Addr {
				if _, ok := n.(scriptKiller); ok {
					idx = append(idx, i)
				}
				break
			}
		}
	}
	if len(idx) == 0 {
		return 0, 0, 0
	}
	type result struct{ killed, unkillable bool }
	out := make(chan result, len(idx)) // buffered: a late kill never blocks
	for _, i := range idx {
		r.bg.Go(func() {
			k, u := r.killScript(i)
			out <- result{k, u}
		})
	}
	if !wait {
		return len(idx), 0, 0
	}
	timer := time.NewTimer(r.scriptTimeout)
	defer timer.Stop()
	for range idx {
		select {
		case res := <-out:
			if res.killed {
				killed++
			}
			if res.unkillable {
				unkillable++
			}
		case <-timer.C:
			return len(idx), killed, unkillable
		}
	}
	return len(idx), killed, unkillable
}

// killTimeout bounds one SCRIPT KILL: dial, and the backend's answer,
// which comes once the script has run for the backend's busy threshold.
func (r *Redlock) killTimeout() time.Duration { return r.scriptTimeout + backend.DialTimeout }

// killScript stops the script node i is running and applies the answer to
// its health (see above).
func (r *Redlock) killScript(i int) (killed, unkillable bool) {
	ctx, cancel := context.WithTimeout(context.Background(), r.killTimeout())
	defer cancel()
	addr := r.nodes[i].Addr()
	err := r.nodes[i].(scriptKiller).KillScript(ctx)
	var re RedisError
	switch {
	case err == nil:
		r.log.Warn("script by vote stopped: it ran past script_timeout", "node", addr, "script-timeout", r.scriptTimeout)
		r.events.Add(EventScriptKilled, addr, "ran past script_timeout "+r.scriptTimeout.String())
		r.answered(i)
		return true, false
	case errors.As(err, &re) && strings.HasPrefix(string(re), "NOTBUSY"):
		r.answered(i)
		return true, false
	case errors.As(err, &re) && strings.HasPrefix(string(re), "UNKILLABLE"):
		r.log.Error("script by vote ran past script_timeout after writing and cannot be stopped: backend out of votes until it ends",
			"node", addr, "script-timeout", r.scriptTimeout, "error", err)
		r.markDown(i, err)
		return false, true
	}
	r.log.Warn("script kill failed", "node", addr, "error", err)
	return false, false
}

// answered records that node i answered outside a probe (a SCRIPT KILL):
// its failures are forgotten and, if it was down, it votes again.
func (r *Redlock) answered(i int) {
	h := r.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fails.Store(0)
	if r.setUp(h, r.now()) {
		r.log.Info("backend up", "node", h.addr)
		r.events.Add(EventBackendUp, h.addr, "answered SCRIPT KILL")
	}
}

// markDown takes node i out of votes until a probe gets an answer: the
// backend itself said, on a connection of its own as a probe's, that it
// cannot serve until the script ends (UNKILLABLE), so the cap on what
// failed calls may mark down (setDown) does not apply.
func (r *Redlock) markDown(i int, err error) {
	h := r.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = err
	if r.setDown(h, false) {
		r.events.Add(EventBackendDown, h.addr, err.Error())
	}
}
