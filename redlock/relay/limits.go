package relay

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Bounds on what one client may hold on the relay's shared backend
// connections. Each costs the backends work for every client of the
// proxy (and each subscription is sent again to a backend that
// reconnects): Redis checks every new BCAST prefix against all the prefixes of
// that connection, so a long prefix list makes each CLIENT TRACKING call
// slower, and the backend serves nobody else meanwhile. Past a bound the
// call that would cross it is refused with a *LimitError and counted
// (Refusals).
const (
	// MaxWatcherPrefixes is how many BCAST prefixes one watcher may hold.
	MaxWatcherPrefixes = 32
	// MaxPrefixes is how many prefixes the broadcast connection of each
	// backend may hold for all watchers together (after dropping those
	// another covers).
	MaxPrefixes = 256
	// MaxSubscriberTopics is how many channels, patterns and shard
	// channels one subscriber may hold.
	MaxSubscriberTopics = 1024
	// MaxTopics is how many distinct ones the subscriber connection of
	// each backend may hold for all subscribers together.
	MaxTopics = 65536
	// MaxWatcherKeys is how many keys one watcher (default tracking) may
	// have tracked; a read past it first drops them all, with an
	// invalidation of everything, as a flush would (absorbed, not
	// refused: a read must not fail because the client caches).
	MaxWatcherKeys = 65536
	// MaxPops is how many blocking pops may wait at once through this
	// proxy. Each holds one connection to every backend while it waits
	// (and until its cancellation is through), so this bounds the pop
	// connections per backend; a client connection runs one command at a
	// time, so it holds at most one.
	MaxPops = 256
	// UserShare is the share of each tier-wide bound (MaxPrefixes,
	// MaxTopics) that the clients of one named user may hold together:
	// one user cannot take the whole of a cap every client needs. Clients
	// of no user (the default user, or no users configured) share the
	// whole.
	UserShare = 2 // one half
)

// Limit names, as in LimitError.Limit and Refusals.
const (
	LimitWatcherPrefixes  = "tracking_prefixes_per_client"
	LimitPrefixes         = "tracking_prefixes_total"
	LimitSubscriberTopics = "subscriptions_per_client"
	LimitTopics           = "subscriptions_total"
	LimitWatcherKeys      = "tracked_keys_per_client"
	LimitPops             = "blocked_pops_total"
	LimitUserPrefixes     = "tracking_prefixes_per_user"
	LimitUserTopics       = "subscriptions_per_user"
)

// ErrLimit is what a *LimitError unwraps to.
var ErrLimit = errors.New("relay limit reached")

// LimitError is a call refused because it would cross a bound.
type LimitError struct {
	Limit string // LimitWatcherPrefixes, …
	Max   int
	Want  int // what the call would have made it
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %d would exceed the limit of %d", e.Limit, e.Want, e.Max)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// limitNames is every limit, in the order refusals counts them.
var limitNames = [...]string{
	LimitWatcherPrefixes, LimitPrefixes, LimitSubscriberTopics, LimitTopics,
	LimitWatcherKeys, LimitPops, LimitUserPrefixes, LimitUserTopics,
}

// refusals counts LimitErrors by limit (limitNames).
type refusals [len(limitNames)]atomic.Uint64

func (r *refusals) count(limit string) {
	for i, name := range limitNames {
		if name == limit {
			r[i].Add(1)
		}
	}
}

// Refusals returns how many calls each limit refused (or, for
// LimitWatcherKeys, absorbed with a flush) since New, by limit name; every
// limit is present.
func (r *Relay) Refusals() map[string]uint64 {
	m := make(map[string]uint64, len(limitNames))
	for i, name := range limitNames {
		m[name] = r.refused[i].Load()
	}
	return m
}

// Prefixes is how many prefixes the broadcast connections register now
// (the reduced union of every BCAST watcher's).
func (r *Relay) Prefixes() int {
	t := &r.track
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.bc.cover)
}
