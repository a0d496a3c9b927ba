package commands

import (
	"net"
	"sync"
	"time"
)

// Failed AUTH is rate-limited per source network (docs/configuration.md,
// auth_fail_limit). Refused attempts do not count, so a client that keeps
// trying gets limit guesses per window; refusing never sleeps.
//
// The table is bounded: entries whose last failure is older than window
// are swept at most once per window, and when maxEntries networks are
// tracked anyway, further networks share one overflow entry (many sources
// failing at once are then limited together).

const (
	defaultAuthFailLimit  = 10 // go-redis spends two per connection (HELLO AUTH, then AUTH)
	defaultAuthFailWindow = 10 * time.Second
	authLimiterMaxEntries = 16384
	authOverflowKey       = "overflow"
)

type authLimiter struct {
	limit      int // 0: no limit
	window     time.Duration
	maxEntries int

	mu    sync.Mutex
	fails map[string][]time.Time // network → its last failures, oldest first, at most limit
	swept time.Time
}

func newAuthLimiter(limit int, window time.Duration) *authLimiter {
	if limit == 0 {
		limit = defaultAuthFailLimit
	}
	if window <= 0 {
		window = defaultAuthFailWindow
	}
	return &authLimiter{limit: max(limit, 0), window: window, maxEntries: authLimiterMaxEntries,
		fails: map[string][]time.Time{}}
}

// blocked reports whether AUTH from addr is refused at now.
func (l *authLimiter) blocked(addr string, now time.Time) bool {
	if l.limit == 0 {
		return false
	}
	key := authSource(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.fails[key]
	if !ok && len(l.fails) >= l.maxEntries {
		f = l.fails[authOverflowKey]
	}
	return len(f) >= l.limit && now.Sub(f[0]) < l.window
}

// fail records a failed AUTH from addr at now; true when this failure
// starts a block (log it once, not every refused attempt).
func (l *authLimiter) fail(addr string, now time.Time) bool {
	if l.limit == 0 {
		return false
	}
	key := authSource(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) >= l.window {
		l.sweep(now)
	}
	if _, ok := l.fails[key]; !ok && len(l.fails) >= l.maxEntries {
		key = authOverflowKey
	}
	f := l.fails[key]
	if len(f) >= l.limit {
		f = append(f[:0], f[1:]...)
	}
	f = append(f, now)
	l.fails[key] = f
	return len(f) >= l.limit && now.Sub(f[0]) < l.window
}

// sweep forgets the networks whose last failure is window old.
func (l *authLimiter) sweep(now time.Time) {
	for k, f := range l.fails {
		if now.Sub(f[len(f)-1]) >= l.window {
			delete(l.fails, k)
		}
	}
	l.swept = now
}

// authSource is the network a client address is limited by: the IPv4
// address, the IPv6 /64, or the address as given when it is not an IP.
func authSource(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
