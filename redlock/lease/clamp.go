package lease

import (
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// The clamp of scripts by vote that write (docs/compatibility.md,
// "Expiries of scripts by vote"): the script runs wrapped
// (redlock.Script.Clamped) so that, on each backend and in the same call,
// every declared key left without expiry or with one beyond MaxTTL gets
// the lease, min(KeepTTL, MaxTTL). What a quorum reported the script
// wanted becomes a hold of any value (HoldKey), until the ttl it set
// (none: until the key is gone); a key a quorum reported bounded or
// deleted is no longer held; a key whose expiry the script left as it
// was keeps whatever hold it had.

// clamping reports whether scripts by vote run clamped: with a MaxTTL,
// and a KeepTTL to renew what they hold.
func (m *Manager) clamping() bool { return m.maxTTL > 0 && m.keepTTL > 0 }

// clamped is script as Vote sends it.
func (m *Manager) clamped(script *redlock.Script) *redlock.Script {
	if !m.clamping() {
		return script
	}
	return script.Clamped(m.maxTTL, min(m.keepTTL, m.maxTTL))
}

// holdWanted holds or ends the holds of keys as a clamped vote begun at
// start reported (w: nil for a script not clamped).
func (m *Manager) holdWanted(start time.Time, keys []string, w []redlock.Wanted) {
	for i, k := range keys {
		if i >= len(w) {
			return
		}
		switch {
		case w[i].Hold && w[i].TTL == redlock.PTTLNoExpiry:
			m.HoldKey(k, Hold{AnyValue: true})
		case w[i].Hold:
			m.HoldKey(k, Hold{AnyValue: true, Deadline: start.Add(w[i].TTL)})
		case w[i].Bounded:
			m.unkeep(k)
		}
	}
}
