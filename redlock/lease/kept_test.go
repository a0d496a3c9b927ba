package lease

import "github.com/redlock-proxy/redlock-proxy/redlock"

// Kept reports whether key is renewed here while it holds value without
// expiry (a client reads PTTL -1): the tests' view of HeldTTL.
func (m *Manager) Kept(key, value string) bool {
	ttl, ok := m.HeldTTL(key, value)
	return ok && ttl == redlock.PTTLNoExpiry
}
