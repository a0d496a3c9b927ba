package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Probes: what a backend says about itself, how RedisNode reports it on
// every new connection, and the health loop that asks every interval.
//
// Two optional interfaces extend Node, so that other Node implementations
// (and test doubles wrapping a Node) keep working without them:
//
//   - prober: Probe(ctx) answers run_id, uptime, loading, TIME and the
//     settings CheckBackends looks at. A node without it is probed with
//     PING: it can still be marked down and up, but not quarantined.
//   - observable: SetObserver(func(Probe)) registers the callback a node
//     calls on each new backend connection, before that connection's first
//     command. New attaches itself to every node that has it. RedisNode
//     (built by DialNodeTLS) runs INFO on each new connection for this
//     (setupPipe), and replays the last report to a late observer, so
//     connections made before New are not missed.

// Probe is what a backend reports about itself. Fields it did not report
// are unknown and treated as fine: RunID "" (exempt from restart
// quarantine), Uptime < 0, Loading false, Time zero (no clock sample).
type Probe struct {
	RunID   string
	Uptime  time.Duration
	Loading bool
	// Time is the backend's TIME; zero when not sampled (connection
	// reports carry none).
	Time time.Time
	// MaxMemoryPolicy, Role and Replicas are for CheckBackends.
	MaxMemoryPolicy string
	Role            string
	Replicas        int

	// native is the compare-and-delete command the backend has, from
	// redis_version / valkey_version (RedisNode.CompareAndDelete).
	native nativeCAD
}

// nativeCAD names a backend's native compare-and-delete command.
type nativeCAD int32

const (
	nativeNone    nativeCAD = iota // none: EVALSHA of delScript
	nativeDelex                    // Redis ≥ 8.4: DELEX key IFEQ value (and SET … IFEQ)
	nativeDelIfEq                  // Valkey ≥ 9.0: DELIFEQ key value
)

// prober is a Node that can describe itself (RedisNode does).
type prober interface {
	Probe(ctx context.Context) (Probe, error)
}

// observable is a Node that reports each new backend connection
// (RedisNode from DialNodeTLS does).
type observable interface {
	SetObserver(func(Probe))
}

// SetObserver makes f receive the INFO of every new connection, before
// that connection runs its first command; only one observer is kept. If a
// connection was already made, f first receives the latest report.
func (n *RedisNode) SetObserver(f func(Probe)) {
	n.obsMu.Lock()
	n.observer = f
	last, ok := n.last, n.reported
	n.obsMu.Unlock()
	if ok && f != nil {
		f(last)
	}
}

// report records a new connection's INFO and hands it to the observer.
func (n *RedisNode) report(p Probe) {
	n.obsMu.Lock()
	n.last, n.reported = p, true
	f := n.observer
	n.obsMu.Unlock()
	if f != nil {
		f(p)
	}
}

// Probe sends TIME and INFO in one pipeline, on the node's side
// connection (see RedisNode). Plain INFO (default sections) is what both
// redis-server and miniredis accept; miniredis reports neither run_id nor
// uptime nor loading.
func (n *RedisNode) Probe(ctx context.Context) (Probe, error) {
	replies, err := n.side.DoAll(ctx, []any{"TIME"}, []any{"INFO"})
	if err != nil {
		return Probe{}, err
	}
	for _, v := range replies {
		if e, isErr := v.(RedisError); isErr {
			return Probe{}, e
		}
	}
	info, _ := replies[1].(string)
	p := parseInfo(info)
	if p.Time, err = parseTime(replies[0]); err != nil {
		return Probe{}, err
	}
	return p, nil
}

// parseTime reads a TIME reply: seconds and microseconds.
func parseTime(v any) (time.Time, error) {
	a, _ := v.([]any)
	if len(a) == 2 {
		s, _ := a[0].(string)
		us, _ := a[1].(string)
		sec, err1 := strconv.ParseInt(s, 10, 64)
		usec, err2 := strconv.ParseInt(us, 10, 64)
		if err1 == nil && err2 == nil {
			return time.Unix(sec, usec*1000), nil
		}
	}
	return time.Time{}, fmt.Errorf("TIME: unexpected reply %v", v)
}

// parseInfo reads the fields of an INFO reply this package uses.
func parseInfo(s string) Probe {
	p := Probe{Uptime: -1}
	var redisVersion, valkeyVersion string
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "run_id":
			p.RunID = v
		case "uptime_in_seconds":
			if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
				p.Uptime = time.Duration(sec) * time.Second
			}
		case "loading":
			p.Loading = v == "1"
		case "maxmemory_policy":
			p.MaxMemoryPolicy = v
		case "role":
			p.Role = v
		case "connected_slaves":
			p.Replicas, _ = strconv.Atoi(v)
		case "redis_version":
			redisVersion = v
		case "valkey_version":
			valkeyVersion = v
		}
	}
	// Valkey reports redis_version 7.2.4 for compatibility, and its own
	// version beside it: valkey_version decides when present.
	switch {
	case valkeyVersion != "":
		if versionAtLeast(valkeyVersion, 9, 0) {
			p.native = nativeDelIfEq
		}
	case versionAtLeast(redisVersion, 8, 4):
		p.native = nativeDelex
	}
	return p
}

// versionAtLeast reports whether v ("major.minor.patch…") is at least
// major.minor; an unreadable version is not.
func versionAtLeast(v string, major, minor int) bool {
	maj, rest, _ := strings.Cut(v, ".")
	mnr, _, _ := strings.Cut(rest, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(mnr)
	if err1 != nil || err2 != nil {
		return false
	}
	return a > major || a == major && b >= minor
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
			if err := k.applyScriptLimit(ctx); err != nil {
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
