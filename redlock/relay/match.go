package relay

import "time"

// The exactly-once rule. A message published through a proxy reaches the
// subscriber connection of every backend it was published on, so N copies
// arrive, one per backend, in any interleaving; a script that publishes
// on every backend, or a client publishing on each backend directly, gives
// the same N copies. Two identical messages published one after the other
// are two messages: 2N copies, of which two must be delivered.
//
// So the matcher counts, for each message identity (kind, pattern,
// channel and payload), how many copies each backend delivered (c[b]) and
// how many were delivered to local subscribers (d). A copy from backend b
// is delivered when c[b] exceeds d, else suppressed: each backend's
// connection carries its copies in publication order, so the k-th copy a
// backend delivers is the k-th message with that identity, and the first
// backend to deliver it decides. An entry is forgotten as soon as every
// connected backend has caught up (c[b] ≥ d for each), and at the latest
// when no copy of it arrived for the window (default 5 s), so a backend
// that is down or lagging cannot pin memory; past maxEntries the entry
// idle longest is forgotten first.
//
// What that gives clients, a down or lagging backend included, is
// docs/compatibility.md's ("Pub/sub"): every message that reaches one
// backend's subscriber connection is delivered once per publication; a
// duplicate takes a backend whose copy lags the first by more than the
// window while its connection still answers.

// defaultWindow is Options.Window when unset.
const defaultWindow = 5 * time.Second

// maxEntries bounds the matcher's memory.
const maxEntries = 1 << 16

// matcher decides which copies to deliver. Not safe for concurrent use:
// its owner (the hub) locks.
type matcher struct {
	n         int
	window    time.Duration
	max       int
	up        []bool // backends whose connection is up
	entries   map[string]*entry
	head      *entry // idle longest
	tail      *entry // touched last
	evictions int64  // entries forgotten because of max
}

// entry is one message identity's counts.
type entry struct {
	key        string
	delivered  int
	copies     []int // per backend
	last       time.Time
	prev, next *entry
}

func newMatcher(n int, window time.Duration, max int) *matcher {
	if window <= 0 {
		window = defaultWindow
	}
	if max <= 0 {
		max = maxEntries
	}
	return &matcher{n: n, window: window, max: max, up: make([]bool, n), entries: make(map[string]*entry)}
}

// offer counts a copy of key from backend b at now and reports whether to
// deliver it.
func (m *matcher) offer(b int, key string, now time.Time) bool {
	m.expire(now)
	e := m.entries[key]
	if e == nil {
		if len(m.entries) >= m.max {
			m.evictions++
			m.remove(m.head)
		}
		e = &entry{key: key, copies: make([]int, m.n)}
		m.entries[key] = e
	} else {
		m.unlink(e)
	}
	e.last = now
	m.append(e)
	e.copies[b]++
	deliver := e.copies[b] > e.delivered
	if deliver {
		e.delivered++
	}
	if m.caughtUp(e) {
		m.remove(e)
	}
	return deliver
}

// setUp records that backend b's connection came up or went down. Down,
// it is no longer waited for: entries the others caught up on go.
func (m *matcher) setUp(b int, up bool) {
	m.up[b] = up
	if up {
		return
	}
	for e := m.head; e != nil; {
		next := e.next
		if m.caughtUp(e) {
			m.remove(e)
		}
		e = next
	}
}

// caughtUp: every backend whose connection is up delivered as many copies
// as were delivered, so no copy of this identity is still on its way.
func (m *matcher) caughtUp(e *entry) bool {
	for b, c := range e.copies {
		if m.up[b] && c < e.delivered {
			return false
		}
	}
	return true
}

// expire forgets the entries idle for the window.
func (m *matcher) expire(now time.Time) {
	for m.head != nil && now.Sub(m.head.last) >= m.window {
		m.remove(m.head)
	}
}

func (m *matcher) remove(e *entry) {
	m.unlink(e)
	delete(m.entries, e.key)
}

func (m *matcher) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else if m.head == e {
		m.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else if m.tail == e {
		m.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (m *matcher) append(e *entry) {
	e.prev = m.tail
	if m.tail != nil {
		m.tail.next = e
	} else {
		m.head = e
	}
	m.tail = e
}
