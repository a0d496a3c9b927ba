package lease

import (
	"cmp"
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
)

// The registry is this proxy's memory of keys, one keyState each: the
// locks it granted with a LockRequest (the native LOCK and MLOCK), the
// callers waiting for them, the notes of its grants, and the holds it
// keeps or saw in the record. The backends stay the authority: it decides
// how long a waiter sleeps, what Info and Snapshot show, and which locks a
// SESSION renews and releases. A lock released through another proxy is
// dropped when its release notice arrives (releasedElsewhere); one
// stolen or deleted behind every proxy's back (a write made directly on
// the backends) stays in the registry until its ttl ends.

// heldLock is one lock granted through this proxy.
type heldLock struct {
	keys    []string
	token   string
	fence   int64
	fenced  bool
	ttl     time.Duration
	granted time.Time // when the grant was answered
	owner   *Owner    // the connection it was granted to
	session bool      // LOCK … SESSION: renewed while client lives

	// guarded by registry.mu
	deadline time.Time   // end of the validity last reported
	expires  time.Time   // when the backends drop it: last acquire/extend start + ttl
	timer    *time.Timer // fires at expires
	gone     bool        // released, lost or expired

	stop     context.CancelFunc // ends the session renewal (session only)
	released atomic.Bool        // the session release ran (session only)
}

// waiter is one LOCK … WAIT in a key's queue. wake is signalled when the
// waiter becomes the head of the queue, and when the key is released or
// expires while it is the head.
type waiter struct {
	wake chan struct{}
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// keyState is all this proxy remembers of one key, under registry.mu. A
// key is in the registry only while some field is set: every change goes
// through put, which drops a key with nothing left, so that no path can
// leave a key behind or forget one of its parts.
type keyState struct {
	held  *heldLock   // the live grant remembered here (an MLOCK under each key)
	queue []*waiter   // LOCK … WAIT callers, first come first
	watch *watchEntry // the watch of its release notices (wait.go)
	grant *knownGrant // the note of its last grant here, for contention (see known below)
	kept  *kept       // a hold renewed here from memory (keep.go)
	// recorded is its hold in the holds record as the last renewal round
	// saw it (holds.go), made here or through a peer
	recorded *record.Field
}

func (s keyState) idle() bool {
	return s.held == nil && len(s.queue) == 0 && s.watch == nil && s.grant == nil &&
		s.kept == nil && s.recorded == nil
}

// registry is the keys' states and the keep loop's state (keep.go), all
// under one mutex, never held over a backend call nor with another lock.
type registry struct {
	mu   sync.Mutex
	keys map[string]keyState
	// gen grows with each forget, and forgot[slot(key)] is the gen of
	// the last forget of a key in that slot: a grant whose acquisition
	// began before a change to one of its keys through this proxy is not
	// noted (keys that share a slot only cost a note, never give a false
	// one; a forget of every key stamps every slot)
	gen    uint64
	forgot [forgetSlots]uint64
	// nKept and nRecorded count the keys with kept and recorded set (put).
	nKept, nRecorded int
	// made counts the holds made here since the last renewal round that it
	// did not show (TierHoldCount): a release does not take one off, so
	// the count errs high by at most one round's releases.
	made    int
	running bool             // the keep loop runs
	scan    []record.Scanned // the last round's, which recorded points into
}

// forgetSlots is how many forget stamps the registry keeps (32 KiB).
const forgetSlots = 4096

var slotSeed = maphash.MakeSeed()

func slot(key string) int { return int(maphash.String(slotSeed, key) % forgetSlots) }

// put stores s as key's state, or removes key when nothing is left of
// it: the one place a key leaves the registry. r.mu is held.
func (r *registry) put(key string, s keyState) {
	old := r.keys[key]
	r.nKept += count(s.kept != nil) - count(old.kept != nil)
	r.nRecorded += count(s.recorded != nil) - count(old.recorded != nil)
	switch {
	case s.idle():
		delete(r.keys, key)
	case r.keys == nil:
		r.keys = map[string]keyState{key: s}
	default:
		r.keys[key] = s
	}
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

// setKept makes e the keep of key (nil: none). r.mu is held.
func (r *registry) setKept(key string, e *kept) {
	s := r.keys[key]
	s.kept = e
	r.put(key, s)
}

// setRecorded replaces the recorded holds with what a renewal round read
// (r.mu not held; rounds run one at a time). A round may read tens of
// thousands of holds: the lock is taken a page of keys at a time, so that
// no acquisition waits for a whole round. Each key goes from the last
// round's field to this one's at once, then the keys this round did not
// show are cleared: meanwhile the counts err high, as between rounds.
func (r *registry) setRecorded(scanned []record.Scanned) {
	r.mu.Lock()
	last := r.scan
	r.scan = scanned
	r.mu.Unlock()
	inPages(&r.mu, len(scanned), func(i int) {
		s := r.keys[scanned[i].Key]
		s.recorded = &scanned[i].Field
		r.put(scanned[i].Key, s)
	})
	r.mu.Lock()
	r.made = 0
	r.mu.Unlock()
	inPages(&r.mu, len(last), func(i int) {
		if s := r.keys[last[i].Key]; s.recorded == &last[i].Field {
			s.recorded = nil
			r.put(last[i].Key, s)
		}
	})
}

// inPages calls f(0) … f(n-1) with mu held, a page at a time.
func inPages(mu *sync.Mutex, n int, f func(i int)) {
	const page = 256
	for lo := 0; lo < n; lo += page {
		mu.Lock()
		for i := lo; i < min(lo+page, n); i++ {
			f(i)
		}
		mu.Unlock()
	}
}

// add records a grant and arms its expiry. A stale record of the same key
// (released elsewhere, expired unseen) is replaced.
func (r *registry) add(l *heldLock, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range l.keys {
		if old := r.keys[k].held; old != nil && old != l {
			r.dropLocked(old, false)
		}
		s := r.keys[k]
		s.held = l
		r.put(k, s)
	}
	l.timer = time.AfterFunc(l.expires.Sub(now), func() { r.expire(l) })
}

// get is key's state, read under the lock. What it points to may be read
// without the lock but for the fields said to be guarded by it.
func (r *registry) get(key string) keyState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[key]
}

// lookup returns the live record of key, or nil.
func (r *registry) lookup(key string) *heldLock { return r.get(key).held }

// byToken returns the live record of key when it holds token.
func (r *registry) byToken(key, token string) *heldLock {
	if l := r.get(key).held; l != nil && l.token == token {
		return l
	}
	return nil
}

// extended moves the validity deadline and the expiry of key's record when
// it holds token: start is when the extend was sent.
func (r *registry) extended(key, token string, start, now time.Time, validity time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.keys[key].held
	if l == nil || l.token != token {
		return
	}
	l.deadline = now.Add(validity)
	l.expires = start.Add(l.ttl)
	l.timer.Reset(l.expires.Sub(now))
}

// remove forgets l and hands its keys to their waiters. It reports whether
// l was still recorded.
func (r *registry) remove(l *heldLock) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.gone {
		return false
	}
	r.dropLocked(l, true)
	return true
}

// released is called after a release of key with token reached a quorum:
// it forgets the matching record and wakes key's first waiter either way.
func (r *registry) released(key, token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.keys[key].held; l != nil && l.token == token {
		r.dropLocked(l, true)
		return
	}
	r.wakeLocked(key)
}

// releasedElsewhere is a release notice for key: the record of key is
// forgotten when its token's tag is tag (the lock released is the one
// remembered), and key's first waiter is woken either way. It reports
// whether key had a waiter.
func (r *registry) releasedElsewhere(key, tag string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.keys[key].held; l != nil && tag != "" && redlock.TokenTag(l.token) == tag {
		r.dropLocked(l, true)
	} else {
		r.wakeLocked(key)
	}
	return len(r.keys[key].queue) > 0
}

// expire runs at l's expiry; an extend in between moved the expiry on.
func (r *registry) expire(l *heldLock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.gone || time.Until(l.expires) > 0 {
		return
	}
	r.dropLocked(l, true)
}

func (r *registry) dropLocked(l *heldLock, wake bool) {
	l.gone = true
	if l.timer != nil {
		l.timer.Stop()
	}
	for _, k := range l.keys {
		if wake { // not a stale record replaced by a new grant (add)
			r.forgetLocked(k)
		}
		if s := r.keys[k]; s.held == l {
			s.held = nil
			r.put(k, s)
			if wake {
				r.wakeLocked(k)
			}
		}
	}
}

// wake signals key's first waiter.
func (r *registry) wake(key string) {
	r.mu.Lock()
	r.wakeLocked(key)
	r.mu.Unlock()
}

func (r *registry) wakeLocked(key string) {
	if q := r.keys[key].queue; len(q) > 0 {
		q[0].signal()
	}
}

// snapshot lists the live records once each, by key.
func (r *registry) snapshot() []*heldLock {
	r.mu.Lock()
	var out []*heldLock
	seen := make(map[*heldLock]bool)
	for _, s := range r.keys {
		if l := s.held; l != nil && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b *heldLock) int { return cmp.Compare(a.keys[0], b.keys[0]) })
	return out
}

// state returns the fields of l that change, read under the lock.
func (r *registry) state(l *heldLock) (deadline, expires time.Time, gone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return l.deadline, l.expires, l.gone
}

// enqueue puts a new waiter at the tail of key's queue; the head is
// signalled at once.
func (r *registry) enqueue(key string) *waiter {
	w := &waiter{wake: make(chan struct{}, 1)}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.keys[key]
	s.queue = append(s.queue, w)
	r.put(key, s)
	if len(s.queue) == 1 {
		w.signal()
	}
	return w
}

// leave takes w out of key's queue; when w was the head, the next waiter
// becomes the head and is signalled.
// The last waiter to leave also ends the watch of key's release notices:
// leave returns its stop function (nil when there is none to call).
func (r *registry) leave(key string, w *waiter) (stop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.keys[key]
	i := slices.Index(s.queue, w)
	if i < 0 {
		return nil
	}
	s.queue = slices.Delete(s.queue, i, i+1)
	if len(s.queue) > 0 && i == 0 {
		s.queue[0].signal()
	}
	if e := s.watch; len(s.queue) == 0 && e != nil {
		s.watch, stop = nil, e.stop
	}
	r.put(key, s)
	return stop
}

// watchEntry is a watch of a key's release notices: stop is nil while
// the subscription is being made.
type watchEntry struct{ stop func() }

// startWatch reserves the watch of key for a waiter about to subscribe;
// nil when key is watched already or has no waiter.
func (r *registry) startWatch(key string) *watchEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.keys[key]
	if len(s.queue) == 0 || s.watch != nil {
		return nil
	}
	s.watch = &watchEntry{}
	r.put(key, s)
	return s.watch
}

// setWatch records the stop function of e, made by startWatch; false
// when the last waiter left meanwhile (the caller then stops it).
func (r *registry) setWatch(key string, e *watchEntry, stop func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys[key].watch != e {
		return false
	}
	e.stop = stop
	return true
}

// watching reports whether e, made by startWatch, is still key's watch
// (some waiter is still queued).
func (r *registry) watching(key string, e *watchEntry) bool { return r.get(key).watch == e }

// isHead reports whether w is first in key's queue.
func (r *registry) isHead(key string, w *waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.keys[key].queue
	return len(q) > 0 && q[0] == w
}

// waiting is the number of waiters queued for key.
func (r *registry) waiting(key string) int { return len(r.get(key).queue) }

// counts returns the live SESSION locks and the queued waiters.
func (r *registry) counts() (sessions, waiters int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[*heldLock]bool)
	for _, s := range r.keys {
		if l := s.held; l != nil && l.session && !seen[l] {
			seen[l] = true
			sessions++
		}
		waiters += len(s.queue)
	}
	return sessions, waiters
}

// Contention answered from memory. Every grant through this proxy (the
// native LOCK and MLOCK, SET NX PX, the library scripts, and the locks
// without expiry, SetIfAbsent with no ttl, with the validity of their first lease)
// is noted here with its token and validity deadline; an acquisition without WAIT
// of a noted key by another token (or by any token, for IfAbsent) is
// answered "held" without a quorum round while the note is within its
// validity, except one acquisition per key every heldRecheck, which asks
// the backends. A note is forgotten by anything through this proxy that
// may change its key: a release, a failed extend, a write, delete,
// expire, flush, counter or script by vote, a release notice, a session
// lost or ended, a registry record dropped. docs/safety.md says why this
// is as safe as asking.

// heldRecheck bounds how long a key released behind this proxy's back
// (through another proxy, or directly on the backends) is still answered
// "held" from memory: the first acquisition of a noted key after this
// long asks the backends.
const heldRecheck = 10 * time.Millisecond

// knownGrant is one noted grant.
type knownGrant struct {
	token    string
	deadline time.Time // end of the validity reported at the grant
	checkAt  time.Time // the next acquisition from then on asks the backends
	kept     bool      // a lock without expiry: noted while kept here
}

// admit is read before an acquisition, under one lock: the forget count
// that noteGrant compares later and, when ask, whether the acquisition
// may be answered "held" from the notes alone (heldLocked).
func (r *registry) admit(keys []string, token string, mine bool, now time.Time, ask bool) (held bool, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ask {
		held = r.heldLocked(keys, token, mine, now)
	}
	return held, r.gen
}

// noteGrant records a grant of keys with token valid until deadline,
// unless one of them was forgotten since gen was read (the key may have
// changed since the acquisition began).
// kept marks the grant of a lock without expiry (SetIfAbsent with no ttl): its note
// counts only while the key is kept here (keptNotesLive).
func (r *registry) noteGrant(keys []string, token string, deadline time.Time, gen uint64, now time.Time, kept bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if r.forgot[slot(k)] > gen {
			return
		}
	}
	// Notes of keys nobody asks for again would stay for good: each new
	// note sweeps a few expired ones (Go's map order is random enough, as
	// Redis's active expiry samples keys).
	swept := 0
	for k, s := range r.keys {
		if swept++; swept > 4 {
			break
		}
		if s.grant != nil && !now.Before(s.grant.deadline) {
			s.grant = nil
			r.put(k, s)
		}
	}
	for _, k := range keys {
		s := r.keys[k]
		s.grant = &knownGrant{token: token, deadline: deadline, checkAt: now.Add(heldRecheck), kept: kept}
		r.put(k, s)
	}
}

// heldLocked reports whether an acquisition of keys by token may be
// answered "held" from the notes alone: some key is noted held by
// another token (any token when !mine), within its validity, and it is
// not that key's turn to ask the backends (which this call then takes).
// r.mu is held.
func (r *registry) heldLocked(keys []string, token string, mine bool, now time.Time) bool {
	for _, k := range keys {
		s := r.keys[k]
		switch g := s.grant; {
		case g == nil, mine && g.token == token:
		case !now.Before(g.deadline):
			s.grant = nil
			r.put(k, s)
		case now.Before(g.checkAt):
			return true
		default:
			g.checkAt = now.Add(heldRecheck)
			return false
		}
	}
	return false
}

// keptNotesLive reports whether the notes of keys that are kept grants
// (locks without expiry granted here) are still kept here with the value
// noted: a keep that ended (its renewal found the key changed, a peer
// took it over) no longer vouches for the key, and its note is dropped
// (the key is not changed by that, so gen stays).
func (r *registry) keptNotesLive(keys []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		s := r.keys[k]
		if g, e := s.grant, s.kept; g != nil && g.kept && (e == nil || e.AnyValue || e.Value != g.token) {
			s.grant = nil
			r.put(k, s)
			return false
		}
	}
	return true
}

// extendedGrant moves the deadline of the notes of keys held by token.
func (r *registry) extendedGrant(keys []string, token string, deadline time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if g := r.keys[k].grant; g != nil && g.token == token {
			g.deadline = deadline
		}
	}
}

// tokens are the tokens key was granted with through here, remembered or
// noted and not forgotten since (lease.lockKnown compares them with the
// value the key holds).
func (r *registry) tokens(key string) []string {
	s := r.get(key)
	var out []string
	if s.held != nil {
		out = append(out, s.held.token)
	}
	if s.grant != nil {
		out = append(out, s.grant.token)
	}
	return out
}

// forget drops the notes of keys: they may have changed.
func (r *registry) forget(keys ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		r.forgetLocked(k)
	}
}

func (r *registry) forgetLocked(key string) {
	r.gen++
	r.forgot[slot(key)] = r.gen
	if s, ok := r.keys[key]; ok {
		s.grant = nil
		r.put(key, s)
	}
}

// forgetBuilt is a change of keys nobody named (a script that builds
// its keys): no acquisition in flight now is noted, whatever its keys.
func (r *registry) forgetBuilt() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stampAll()
}

func (r *registry) stampAll() {
	r.gen++
	for i := range r.forgot {
		r.forgot[i] = r.gen
	}
}

// forgetAll drops every note (a flush).
func (r *registry) forgetAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stampAll()
	for k, s := range r.keys {
		s.grant = nil
		r.put(k, s)
	}
}
