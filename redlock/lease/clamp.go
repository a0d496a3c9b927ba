package lease

import (
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// The clamp of scripts by vote that write (docs/compatibility.md,
// "Expiries of scripts by vote"): the script runs wrapped
// (script.Script.Clamped) so that, on each backend and in the same call,
// every declared key left without expiry or with one beyond MaxTTL gets
// the lease, min(KeepTTL, MaxTTL). What a quorum reported the script
// wanted becomes a hold of any value (HoldKey), until the ttl it set
// (none: until the key is gone); a key a quorum reported bounded or
// deleted is no longer held; a key whose expiry the script left as it
// was keeps whatever hold it had.

// Writes and expiries with a ttl beyond MaxTTL (SET … PX, PEXPIRE, SET NX
// PX: Write, CompareAndSet, GetSet, Set, ExpireIf, SetIfAbsent,
// AcquireScript of one key) are made with the lease and held, to the
// deadline the client asked for: while the key holds the value written
// (an expiry: any value). Native locks are refused above MaxTTL before
// they reach here.

// HoldsLong reports whether ttls beyond MaxTTL are held (the copies
// carrying the lease) rather than refused: with a MaxTTL and a KeepTTL.
func (m *Manager) HoldsLong() bool { return m.clamping() }

// splitTTL splits a ttl beyond MaxTTL into the lease the copies carry
// and the deadline the key is held to (zero: ttl as it is, no hold).
func (m *Manager) splitTTL(ttl time.Duration) (time.Duration, time.Time) {
	if !m.clamping() || ttl <= m.maxTTL {
		return ttl, time.Time{}
	}
	return min(m.keepTTL, m.maxTTL), m.now().Add(ttl)
}

// holdUntil holds key while it holds value until until, after a write
// (err nil) of a ttl beyond MaxTTL (until not zero).
func (m *Manager) holdUntil(err error, key, value string, until time.Time) {
	if err == nil && !until.IsZero() {
		m.HoldKey(key, Hold{Value: value, Deadline: until})
	}
}

// clamping reports whether scripts by vote run clamped: with a MaxTTL,
// and a KeepTTL to renew what they hold.
func (m *Manager) clamping() bool { return m.maxTTL > 0 && m.keepTTL > 0 }

// beyond reports whether an expiry of ttl (0: none) is one a lock's
// copies may not carry: past MaxTTL, where a lock and data part ways.
func (m *Manager) beyond(ttl time.Duration) bool {
	return m.maxTTL > 0 && (ttl <= 0 || ttl > m.maxTTL)
}

// clamped is script as Vote sends it.
func (m *Manager) clamped(script *script.Script) *script.Script {
	if !m.clamping() {
		return script
	}
	return script.Clamped(m.maxTTL, min(m.keepTTL, m.maxTTL))
}

// holdWanted holds or ends the holds of the keys a clamped vote begun at
// start reported (w: nil for a script not clamped): its declared keys,
// and the keys it built and left unbounded.
func (m *Manager) holdWanted(start time.Time, w []script.Wanted) {
	for _, x := range w {
		switch {
		case x.Hold && x.TTL == redlock.PTTLNoExpiry:
			m.HoldKey(x.Key, Hold{AnyValue: true})
		case x.Hold:
			m.HoldKey(x.Key, Hold{AnyValue: true, Deadline: start.Add(x.TTL)})
		case x.Bounded:
			m.unkeep(x.Key)
		}
	}
}

// holdAnyValue turns the keep of a value into a hold of any value, to
// the same deadline, for each declared key a clamped vote left as it was
// (its ttl untouched): the script may have changed the value in place
// (APPEND, INCR, SETRANGE), and a keep of the old value would let the
// changed key expire at the next renewal.
func (m *Manager) holdAnyValue(w []script.Wanted) {
	for _, x := range w {
		if !x.Hold && !x.Bounded {
			m.holdAnyValueOf(x.Key)
		}
	}
}

// holdAnyValueOf turns the keep of a value of key into a hold of any value.
func (m *Manager) holdAnyValueOf(key string) {
	if e := m.reg.get(key).kept; e != nil && !e.AnyValue {
		m.HoldKey(key, Hold{AnyValue: true, Deadline: e.Deadline})
	}
}
