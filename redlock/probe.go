package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
)

// Probes: the health loop that asks every backend what it says about
// itself (backend.Probe) every interval, and what a probe shows about a
// backend's settings at start. Two optional interfaces extend Node
// (backend.RedisNode has both); other Nodes and test doubles work without.

// Probe is what a backend reports about itself (package backend).
type Probe = backend.Probe

// prober is a Node that can describe itself: run_id, uptime, loading,
// TIME and the settings CheckBackends looks at. A node without it is
// probed with PING: it can still be marked down and up, but not
// quarantined.
type prober interface {
	Probe(ctx context.Context) (Probe, error)
}

// observable is a Node that reports each new backend connection before
// its first command; New attaches itself to every node that has it.
type observable interface {
	SetObserver(func(Probe))
}

// probeNode probes n: with Probe when it has one, else with PING.
func probeNode(ctx context.Context, n Node) (Probe, error) {
	if p, ok := n.(prober); ok {
		return p.Probe(ctx)
	}
	_, err := n.Do(ctx, "PING")
	return Probe{Uptime: -1}, err
}

// probeTimeout is a probe's deadline: 4×NodeTimeout, at most 1s.
func (r *Redlock) probeTimeout() time.Duration {
	return min(4*r.nodeTimeout, maxProbeTimeout)
}

// RunHealth runs the health loop until ctx is done: every HealthInterval
// (and once at once) it probes every node in parallel, each probe with
// its own deadline, and waits for them all. A probe brings a down node
// back, detects restarts (run_id), loading, and clock jumps (TIME against
// the Redlock's clock). Run it in one goroutine that its owner waits for;
// it leaves nothing running when it returns. Fast failure (DownAfter) is
// on only while it runs; when it returns, down nodes vote again. Beside
// the probes it refills the backends that came back empty (refill.go).
func (r *Redlock) RunHealth(ctx context.Context) {
	r.loops.Add(1)
	defer r.endHealth()
	refills := make(chan struct{})
	go func() {
		defer close(refills)
		r.runRefills(ctx) // backends that came back empty (refill.go)
	}()
	defer func() { <-refills }()
	t := time.NewTicker(r.healthInterval)
	defer t.Stop()
	for {
		r.probeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// endHealth ends a RunHealth; after the last one no node stays down,
// since nothing would bring it back.
func (r *Redlock) endHealth() {
	if r.loops.Add(-1) > 0 {
		return
	}
	now := r.now()
	for _, h := range r.health {
		h.mu.Lock()
		h.fails.Store(0)
		h.refill = nil // nothing would finish it
		r.setUp(h, now)
		h.refresh(now)
		h.mu.Unlock()
	}
}

// probeAll probes every node once and applies the results.
func (r *Redlock) probeAll(ctx context.Context) {
	r.probeEach(ctx, func(int, Probe, error) {})
}

// probeEach probes every node in parallel, applies each result and hands
// it to f; it returns when all are done. A probe cut short by ctx counts
// for nothing.
func (r *Redlock) probeEach(ctx context.Context, f func(int, Probe, error)) {
	var wg sync.WaitGroup
	for i, n := range r.nodes {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
			defer cancel()
			t1 := r.now()
			p, err := probeNode(pctx, n)
			t2 := r.now()
			if ctx.Err() != nil {
				return
			}
			r.probed(i, p, err, t1, t2)
			f(i, p, err)
		})
	}
	wg.Wait()
}

// CheckBackends probes every node once (as the health loop does) and
// returns the problems it sees in their settings, one sentence each: a
// maxmemory-policy other than noeviction (may evict locks), a node that is
// a replica, a node with replicas (a failover may promote a replica that
// missed recent locks), a node that refuses to set its busy-script
// threshold to the script timeout (scriptkill.go; set here, since the
// first connections may predate New), a node whose ACL refuses the release notices
// (which are then turned off: notice.go). An unreachable node is logged as a warning, not
// returned: it may come back. Settings a backend does not report (miniredis)
// are not checked. main logs the problems, or refuses to start on them.
func (r *Redlock) CheckBackends(ctx context.Context) []string {
	problems := make([][]string, len(r.nodes))
	r.probeEach(ctx, func(i int, p Probe, err error) {
		addr := r.health[i].addr
		if err != nil {
			r.log.Warn("backend unreachable at start", "node", addr, "error", err)
			return
		}
		var ps []string
		if p.MaxMemoryPolicy != "" && p.MaxMemoryPolicy != "noeviction" {
			ps = append(ps, fmt.Sprintf("backend %s: maxmemory-policy %s may evict locks; set noeviction",
				addr, p.MaxMemoryPolicy))
		}
		if p.Role != "" && p.Role != "master" {
			ps = append(ps, fmt.Sprintf("backend %s: role %s; every backend must be an independent master",
				addr, p.Role))
		}
		if p.Replicas > 0 {
			ps = append(ps, fmt.Sprintf("backend %s: has %d replicas; a failover may promote one that missed recent locks",
				addr, p.Replicas))
		}
		if k, ok := r.nodes[i].(scriptKiller); ok {
			if err := k.ApplyScriptLimit(ctx); err != nil {
				ps = append(ps, fmt.Sprintf("backend %s: cannot set lua-time-limit (%v): a runaway script by vote holds it until its busy-reply-threshold, not script_timeout",
					addr, err))
			}
		}
		problems[i] = ps // each probe writes its own slot
	})
	var out []string
	for _, ps := range problems {
		out = append(out, ps...)
	}
	if p := r.checkNotices(ctx); p != "" {
		out = append(out, p)
	}
	return out
}
