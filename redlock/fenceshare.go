package redlock

import "strings"

// ReservedPrefix starts every key the proxy keeps on the backends for
// itself: the fence counter (FenceKey) and the membership of the proxy
// tier (package tier). Clients may not name such keys: a client that
// could write them could lower a fence counter or forge a proxy.
const ReservedPrefix = "redlock-proxy:"

// Reserved reports whether key belongs to the proxy (see ReservedPrefix).
func Reserved(key string) bool { return strings.HasPrefix(key, ReservedPrefix) }

// Sharing the fence high-water mark between proxies. Each process keeps
// the highest fence it issued; package tier's heartbeat raises every
// backend's counter to it and raises it to the largest counter it reads,
// so that the marks of the live proxies and the counters of every backend
// converge on the highest fence any of them issued. A proxy that restarts
// reads that before it serves (tier.Join), and a majority of backends
// restarting empty gets its counters back from the proxies' marks within
// one heartbeat. docs/safety.md has the argument.

// FenceHighWater is the highest fence this process issued or learned
// through RaiseFenceHighWater: every later fence is larger.
func (r *Redlock) FenceHighWater() int64 { return r.fenceHWM.Load() }

// RaiseFenceHighWater raises the high-water mark to at least v, so that
// every fence this process issues from now on is above v. It reports
// whether the mark moved.
func (r *Redlock) RaiseFenceHighWater(v int64) bool {
	for {
		hwm := r.fenceHWM.Load()
		if v <= hwm {
			return false
		}
		if r.fenceHWM.CompareAndSwap(hwm, v) {
			return true
		}
	}
}
