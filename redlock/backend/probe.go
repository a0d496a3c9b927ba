package backend

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

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
		if e, isErr := v.(resp.Error); isErr {
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
