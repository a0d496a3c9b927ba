package redlock

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// Backend health (DESIGN §6). Each node has a nodeHealth that decides
// whether the node votes: it does not while it is down (DownAfter
// consecutive failures, until a probe answers), loading its dataset, or
// quarantined (restarted, fresh at start, or its clock jumped) until a
// time on the injected clock. The fan-out engine asks before each call
// (one atomic load on the common path) and again when the reply arrives,
// so a node that stopped voting while the call was in flight does not
// count either (see launch in fanout.go).

// ErrNotVoting is the node error, wrapped with the reason, of a node that
// was not called (or whose reply was discarded) because it does not vote:
// down, loading or quarantined.
var ErrNotVoting = errors.New("backend not voting")

// Node states, as in NodeStatus.State.
const (
	StateUp          = "up"
	StateDown        = "down"
	StateQuarantined = "quarantined"
	StateLoading     = "loading"
	// StateRefilling: back from empty, its quarantine over, its refill
	// (refill.go) not yet through one whole pass.
	StateRefilling = "refilling"
)

// Health defaults.
const (
	defaultDownAfter      = 3
	defaultHealthInterval = time.Second
	// clockSlack is the fixed part of the clock watch's tolerance.
	clockSlack = 100 * time.Millisecond
	// maxProbeTimeout caps a probe's deadline of 4×NodeTimeout.
	maxProbeTimeout = time.Second
	// uptimeSlack is how much a backend's reported uptime_in_seconds may
	// exceed its true uptime: it subtracts two whole-second clock readings.
	uptimeSlack = time.Second
)

// NodeStatus is a snapshot of one node's health.
type NodeStatus struct {
	Addr             string
	State            string        // StateUp, StateDown, StateQuarantined, StateLoading or StateRefilling
	QuarantinedUntil time.Time     // on the Redlock's clock; zero unless quarantined
	Reason           string        // why the node does not vote; "" when up
	RunID            string        // last run_id seen; "" if none reported
	Failures         int           // consecutive failed calls
	Latency          time.Duration // round trip of the last health probe; 0 before one
	ClockJumps       uint64        // clock jumps seen since start
	// Refilling: it came back empty and is being refilled (refill.go);
	// Refill is how far that has got.
	Refilling bool
	Refill    RefillProgress
}

// nodeHealth is one node's state. voting and epoch are read without the
// lock on every call; everything else is under mu. Every change that
// stops the node voting bumps epoch and clears voting under mu. voting
// may stay false after a quarantine ended, until the next check under mu
// (refresh) sees the time has passed.
type nodeHealth struct {
	addr   string
	voting atomic.Bool
	epoch  atomic.Uint64
	fails  atomic.Int32 // consecutive failures; written under mu

	mu      sync.Mutex
	seen    bool // a run_id was observed
	runID   string
	down    bool
	loading bool
	lastErr error
	until   time.Time // quarantined before this instant
	qreason string
	clock   clockSample   // previous TIME sample; zero local: none
	rtt     time.Duration // the last probe's round trip
	jumps   uint64        // clock jumps seen
	refill  *refill       // it came back empty: being refilled (refill.go)
}

// clockSample is one TIME reading: local when it was sent, remote the
// backend's answer, rtt the round trip.
type clockSample struct {
	local, remote time.Time
	rtt           time.Duration
}

func newNodeHealth(n Node) *nodeHealth {
	h := &nodeHealth{}
	if n != nil {
		h.addr = n.Addr()
	}
	h.voting.Store(true)
	return h
}

// stop records that the node stopped voting. mu is held.
func (h *nodeHealth) stop() {
	h.epoch.Add(1)
	h.voting.Store(false)
}

// refresh recomputes voting at now. mu is held.
func (h *nodeHealth) refresh(now time.Time) bool {
	v := !h.down && !h.loading && !now.Before(h.until) && (h.refill == nil || h.refill.done)
	h.voting.Store(v)
	return v
}

// state names the node's state at now, with the reason. mu is held.
func (h *nodeHealth) state(now time.Time) (string, string) {
	switch {
	case h.down:
		return StateDown, fmt.Sprintf("failing: %v", h.lastErr)
	case h.loading:
		return StateLoading, "loading"
	case now.Before(h.until):
		return StateQuarantined, h.qreason
	case h.refill != nil && !h.refill.done:
		return StateRefilling, "back from empty: copying data from the others"
	}
	return StateUp, ""
}

// vote reports whether node i votes now. If so it returns the epoch to
// check the reply against (stillVoting), else an ErrNotVoting error.
func (r *Redlock) vote(i int) (uint64, error) {
	h := r.health[i]
	e := h.epoch.Load()
	if h.voting.Load() {
		return e, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := r.now()
	if h.refresh(now) {
		return h.epoch.Load(), nil
	}
	_, reason := h.state(now)
	return 0, fmt.Errorf("%w: %s", ErrNotVoting, reason)
}

// settle feeds the outcome of a call to node i (started at epoch, with
// deadline d) into its health, and turns an answer from a node that
// stopped voting meanwhile into an ErrNotVoting error.
func (r *Redlock) settle(i int, epoch uint64, err error, d time.Duration) error {
	r.record(i, err, d, false)
	if err != nil {
		return err
	}
	h := r.health[i]
	if h.epoch.Load() == epoch && h.voting.Load() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, reason := h.state(r.now())
	if reason == "" {
		reason = "stopped voting during the call"
	}
	return fmt.Errorf("%w: %s", ErrNotVoting, reason)
}

// record counts a call's outcome: a success resets the failure count
// (though only a probe brings a down node back), and DownAfter failures in
// a row mark the node down while RunHealth runs. Failures of calls
// (probe false) mark at most N − quorum nodes down (setDown): a backend
// whose calls queue behind load is slow, not gone, and only its probes,
// on a connection of their own, may take the quorum away.
func (r *Redlock) record(i int, err error, d time.Duration, probe bool) {
	h := r.health[i]
	switch outcome(err, d, r.nodeTimeout) {
	case callOK:
		if h.fails.Load() == 0 {
			return
		}
		h.mu.Lock()
		if !h.down {
			h.fails.Store(0)
		}
		h.mu.Unlock()
	case callFailed:
		h.mu.Lock()
		defer h.mu.Unlock()
		n := h.fails.Add(1)
		h.lastErr = err
		// Only a probe brings a down node back, so without a health loop
		// running a node is never marked down.
		if int(n) >= r.downAfter && r.setDown(h, !probe) {
			r.log.Warn("backend down", "node", h.addr, "failures", n, "error", err)
			r.events.Add(EventBackendDown, h.addr, err.Error())
		}
	}
}

type callOutcome int

const (
	callOK      callOutcome = iota
	callFailed              // counts towards DownAfter
	callIgnored             // says nothing about the node
)

// outcome classifies a call's error. A Redis error reply (WRONGTYPE,
// NOSCRIPT…) comes from a live node, except those saying it cannot serve.
// A reply past the reader's bounds (resp.Skipped) is what the caller asked
// for, not the node's failure: only backends fail backends.
// A deadline below NodeTimeout (5% of a short ttl) running out is no
// evidence against the node, so it is ignored.
func outcome(err error, d, nodeTimeout time.Duration) callOutcome {
	if err == nil {
		return callOK
	}
	if errors.Is(err, ErrNotVoting) || resp.Skipped(err) {
		return callIgnored
	}
	if timedOut(err) && d < nodeTimeout {
		return callIgnored
	}
	var re RedisError
	if errors.As(err, &re) {
		// BUSY: a script runs, a client's script by vote (the proxy's own
		// run in milliseconds). Its SCRIPT KILL decides (scriptkill.go):
		// stopped, the node serves again; UNKILLABLE marks it down.
		if backend.HasErrorPrefix(err, "BUSY") {
			return callIgnored
		}
		for _, p := range []string{"LOADING", "MASTERDOWN", "READONLY"} {
			if backend.HasErrorPrefix(err, p) {
				return callFailed
			}
		}
		return callOK
	}
	return callFailed
}

// setDown marks node h down, while RunHealth runs (without it nothing
// would bring the node back), and reports whether it did. byCalls (the
// evidence is failed or slow calls, not probes): only while fewer than
// N − quorum nodes are down, so that load alone never takes the quorum
// away (Envoy's outlier detection caps ejection the same way). h.mu is
// held.
func (r *Redlock) setDown(h *nodeHealth, byCalls bool) bool {
	if h.down || r.loops.Load() == 0 {
		return false
	}
	for {
		n := r.downs.Load()
		if byCalls && int(n) >= len(r.health)-r.quorum {
			return false
		}
		if r.downs.CompareAndSwap(n, n+1) {
			break
		}
	}
	h.down = true
	h.stop()
	return true
}

// setUp brings a down node back at now (a probe or a SCRIPT KILL got an
// answer) and reports whether it was down. h.mu is held.
func (r *Redlock) setUp(h *nodeHealth, now time.Time) bool {
	if !h.down {
		return false
	}
	h.down = false
	h.lastErr = nil
	r.downs.Add(-1)
	h.refresh(now)
	return true
}

// quarantineLength is MaxTTL + MaxTTL×drift + 2ms, or zero when MaxTTL is
// zero (quarantine disabled).
func (r *Redlock) quarantineLength() time.Duration {
	if r.maxTTL <= 0 {
		return 0
	}
	return r.maxTTL + time.Duration(float64(r.maxTTL)*r.drift) + fixedDrift
}

// quarantine keeps node h from voting until until, if that is later than
// a quarantine already set. mu is held.
func (h *nodeHealth) quarantine(until time.Time, reason string) {
	if until.After(h.until) {
		h.until = until
		h.qreason = reason
	}
	h.stop()
}

// observe applies what a probe or a new connection reported about node i:
// run_id (restart quarantine), uptime (at the first observation) and
// loading. A Probe without a run_id is exempt from run_id quarantine.
func (r *Redlock) observe(i int, p Probe) {
	h := r.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	now := r.now()
	q := r.quarantineLength()
	switch {
	case p.RunID == "":
	case !h.seen:
		h.seen = true
		h.runID = p.RunID
		// Redis reports uptime as the difference of two whole-second
		// clocks: up to uptimeSlack more than the time that truly passed.
		// Counting the reported uptime in full would end the quarantine
		// that much early.
		least := max(0, p.Uptime-uptimeSlack)
		if q > 0 && !r.trustFresh && p.Uptime >= 0 && least < q {
			until := now.Add(q - least)
			reason := "fresh at start: uptime " + p.Uptime.String()
			h.quarantine(until, reason)
			r.startRefill(h)
			r.log.Warn("backend quarantined: a fresh deployment waits max_ttl before its first lock",
				"node", h.addr, "reason", reason, "for", q-least, "until", stamp(until))
			r.events.Add(EventQuarantined, h.addr, reason)
		}
	case p.RunID != h.runID:
		old := h.runID
		h.runID = p.RunID
		if q <= 0 {
			r.log.Warn("backend restarted; quarantine disabled (no max_ttl)", "node", h.addr,
				"old-run-id", old, "run-id", p.RunID)
			break
		}
		until := now.Add(q)
		h.quarantine(until, "restarted: run_id changed")
		r.startRefill(h)
		r.log.Warn("backend quarantined", "node", h.addr, "reason", "restarted: run_id changed",
			"old-run-id", old, "run-id", p.RunID, "for", q, "until", stamp(until))
		r.events.Add(EventQuarantined, h.addr, "restarted: run_id changed")
	}
	switch {
	case p.Loading && !h.loading:
		h.loading = true
		h.stop()
		r.log.Warn("backend loading its dataset: not voting", "node", h.addr)
	case !p.Loading && h.loading:
		h.loading = false
		h.refresh(now)
		r.log.Info("backend finished loading", "node", h.addr)
	}
}

// probed applies a health probe of node i sent at t1 and answered at t2:
// a failure counts like a failed call; an answer brings a down node back,
// then is observed, and its TIME (if any) goes to the clock watch.
func (r *Redlock) probed(i int, p Probe, err error, t1, t2 time.Time) {
	if err != nil {
		r.record(i, err, r.probeTimeout(), true)
		return
	}
	h := r.health[i]
	h.mu.Lock()
	h.fails.Store(0)
	if r.setUp(h, t2) {
		r.log.Info("backend up", "node", h.addr)
		r.events.Add(EventBackendUp, h.addr, "answered a probe")
	}
	h.rtt = t2.Sub(t1)
	h.mu.Unlock()
	r.observe(i, p)
	if !p.Time.IsZero() {
		r.watchClock(i, clockSample{local: t1, remote: p.Time, rtt: t2.Sub(t1)})
	}
}

// watchClock compares the backend clock's progress since the previous
// sample with the local clock's. A difference beyond 100ms + drift ×
// elapsed + both round trips quarantines the node; every sample becomes
// the next baseline.
func (r *Redlock) watchClock(i int, cur clockSample) {
	h := r.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	prev := h.clock
	h.clock = cur
	if prev.local.IsZero() {
		return
	}
	local := cur.local.Sub(prev.local)
	jump := cur.remote.Sub(prev.remote) - local
	tolerance := clockSlack + time.Duration(float64(local)*r.drift) + prev.rtt + cur.rtt
	if jump <= tolerance && -jump <= tolerance {
		return
	}
	reason := "clock jumped by " + jump.String()
	h.jumps++
	q := r.quarantineLength()
	if q <= 0 {
		r.log.Error("backend clock jumped; quarantine disabled (no max_ttl)", "node", h.addr,
			"jump", jump, "elapsed", local, "tolerance", tolerance)
		r.events.Add(EventClockJump, h.addr, reason)
		return
	}
	until := r.now().Add(q)
	h.quarantine(until, reason)
	r.log.Error("backend clock jumped: quarantined", "node", h.addr, "jump", jump,
		"elapsed", local, "tolerance", tolerance, "for", q, "until", stamp(until))
	r.events.Add(EventClockJump, h.addr, reason)
}

// Status returns every node's health, in node order.
func (r *Redlock) Status() []NodeStatus {
	now := r.now()
	out := make([]NodeStatus, len(r.health))
	for i, h := range r.health {
		h.mu.Lock()
		st, reason := h.state(now)
		s := NodeStatus{Addr: h.addr, State: st, Reason: reason, RunID: h.runID, Failures: int(h.fails.Load()), Latency: h.rtt, ClockJumps: h.jumps}
		if h.refill != nil {
			s.Refilling, s.Refill = true, h.refill.RefillProgress
		}
		if now.Before(h.until) {
			s.QuarantinedUntil = h.until
		}
		h.mu.Unlock()
		out[i] = s
	}
	return out
}

// Voting counts the nodes that vote now.
func (r *Redlock) Voting() int {
	now := r.now()
	n := 0
	for _, h := range r.health {
		h.mu.Lock()
		if h.refresh(now) {
			n++
		}
		h.mu.Unlock()
	}
	return n
}

// stamp renders a time for logs without its monotonic reading.
func stamp(t time.Time) string { return t.Round(0).Format(time.RFC3339Nano) }

// initHealth sets the health defaults and state, and attaches the Redlock
// to every node that reports its connections. Called by New.
func (r *Redlock) initHealth() {
	if r.downAfter <= 0 {
		r.downAfter = defaultDownAfter
	}
	if r.healthInterval <= 0 {
		r.healthInterval = defaultHealthInterval
	}
	r.health = make([]*nodeHealth, len(r.nodes))
	for i, n := range r.nodes {
		r.health[i] = newNodeHealth(n)
	}
	for i, n := range r.nodes {
		if o, ok := n.(observable); ok {
			o.SetObserver(func(p Probe) { r.observe(i, p) })
		}
	}
}
