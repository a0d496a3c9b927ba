package proxy

import (
	"sync/atomic"
	"time"
)

// lazyDeadline keeps a connection deadline (idle read, reply write) at
// least span and at most span×3/2 ahead of every operation, and sets it on
// the socket only when less than span is left: on a busy connection once
// per span/2 instead of once per read or write (each set takes the
// socket's poll lock and moves a runtime timer). So an operation that
// starts at t fails with a timeout between t+span and t+span×3/2, never
// sooner than a deadline set per operation would have made it.
type lazyDeadline struct {
	span time.Duration
	now  func() time.Time // time.Now; tests drive it
	base time.Time        // the monotonic reference of at
	at   atomic.Int64     // the deadline set, as time since base; 0: none, or unknown
}

func newLazyDeadline(span time.Duration) *lazyDeadline {
	return &lazyDeadline{span: span, now: time.Now, base: time.Now()}
}

// next returns the deadline to set before an operation, or ok false when
// the one set still leaves at least span. The caller sets it, then calls
// set with it.
func (d *lazyDeadline) next() (deadline time.Time, ok bool) {
	now := d.now().Sub(d.base)
	if at := time.Duration(d.at.Load()); at != 0 && at-now >= d.span {
		return time.Time{}, false
	}
	return d.base.Add(now + d.span + d.span/2), true
}

// set records the deadline the caller set from next.
func (d *lazyDeadline) set(deadline time.Time) { d.at.Store(int64(deadline.Sub(d.base))) }

// forget records that the socket's deadline was changed by other code:
// the next operation sets it again.
func (d *lazyDeadline) forget() { d.at.Store(0) }
