package relay

import (
	"context"
	"math/bits"
	"strings"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// Key tracking (client-side caching). Each backend gets one tracking
// connection (CLIENT TRACKING ON, default mode: every read on it tracks
// what it read), made when the first Watcher tracks a key. Tracking key k
// for a watcher adds the watcher to k's set and registers k on every
// backend whose connection is up (EXISTS k there: a read, so the backend
// tracks k for that connection), waiting for the replies before Track
// returns — the caller reads k only then, so a change after its read is
// a change after the registration, which the backend invalidates. The
// backend then pushes an invalidation when k changes, whoever changes it
// (any proxy, any client of the backend) or when it expires, and the
// watchers of k are told once: k leaves their sets, as Redis stops
// tracking a key for a client after invalidating it, which also absorbs
// the other backends' copies of the same invalidation. A registration
// already in place on every connected backend (no invalidation since) is
// not repeated.
//
// Coverage: a write that a quorum of backends applied changes k on at
// least Quorum backends; it is seen if one of them has k registered on a
// connection that is up. So each key needs registrations on more than
// N−Quorum backends that are up (Track reports whether it got them; the
// caller then invalidates at once after its read, so nothing stale is
// kept), and when a tracking connection is lost every key left with too
// few is invalidated. A backend's FLUSHALL (the null invalidation) flushes
// every watcher that tracked anything since its last flush.

// tracker is the key → watchers table and the tracking sessions.
type tracker struct {
	r       *Relay
	need    int // registrations on live backends a key needs
	mu      sync.Mutex
	keys    map[string]*tracked
	all     map[*Watcher]struct{}
	roles   []*trackRole // nil until the first Track
	changed chan struct{}
	bc      bcast // BCAST mode (bcast.go)
}

// tracked is one key's watchers and where it is registered.
type tracked struct {
	watchers map[*Watcher]struct{}
	reg      uint64 // bit i: registered on backend i's current connection
}

func (t *tracker) init(r *Relay) {
	t.r = r
	t.need = max(len(r.backends)-r.quorum+1, 1)
	t.keys = make(map[string]*tracked)
	t.all = make(map[*Watcher]struct{})
	t.changed = make(chan struct{})
	t.bc.init(t)
}

// Watcher is one tracking client: its keys (default mode) or prefixes
// (BCAST), and where its invalidations go. invalidate is called with the
// keys that changed, or nil when everything must be dropped (a flush); it
// is called on the relay's goroutines, must not block and must not call
// back into the relay.
type Watcher struct {
	t          *tracker
	invalidate func(keys []string)

	// Under t.mu.
	keys     map[string]struct{}
	dirty    bool // tracked something since the last flush
	closed   bool
	bcast    bool
	prefixes []string
	own      map[string]time.Time // BCAST NOLOOP: keys it wrote, when
	ownSweep int                  // len(own) at which old entries are dropped

	user string // SetUser's; "" for none
}

// SetUser names the user whose share of the tier-wide bound w counts
// against (UserShare). Call it before w's first call.
func (w *Watcher) SetUser(name string) { w.user = name }

// NewWatcher returns a watcher whose invalidations go to invalidate.
func (r *Relay) NewWatcher(invalidate func(keys []string)) *Watcher {
	w := &Watcher{t: &r.track, invalidate: invalidate, keys: make(map[string]struct{})}
	r.track.mu.Lock()
	r.track.all[w] = struct{}{}
	r.track.mu.Unlock()
	return w
}

// Track starts tracking keys for w, before the caller reads them. It
// reports whether they are registered on enough live backends that any
// change reaching a quorum will be invalidated; when not, the caller
// should invalidate them itself once it has read them. Errors: ctx's, or
// ErrClosed.
func (w *Watcher) Track(ctx context.Context, keys []string) (bool, error) {
	t := w.t
	t.mu.Lock()
	if w.closed || t.r.closed.Load() {
		t.mu.Unlock()
		return false, ErrClosed
	}
	t.startLocked()
	if len(w.keys)+len(keys) > MaxWatcherKeys {
		// limits.go: drop everything w tracks, and tell it so.
		for k := range w.keys {
			t.untrackLocked(w, k)
		}
		clear(w.keys)
		w.invalidate(nil)
		t.r.refused.count(LimitWatcherKeys)
	}
	var need []string
	var entries []*tracked
	for _, k := range keys {
		e := t.keys[k]
		if e == nil {
			e = &tracked{watchers: make(map[*Watcher]struct{})}
			t.keys[k] = e
		}
		e.watchers[w] = struct{}{}
		w.keys[k] = struct{}{}
		w.dirty = true
		if !t.registeredLocked(e) {
			need = append(need, k)
			entries = append(entries, e)
		}
	}
	t.mu.Unlock()
	if len(need) > 0 {
		if err := t.register(ctx, need, entries); err != nil {
			return false, err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		if e := t.keys[k]; e != nil && t.coveredLocked(e) < t.need {
			return false, nil
		}
	}
	return true, nil
}

// registeredLocked: every backend that is up has e registered, and none
// is still connecting.
func (t *tracker) registeredLocked(e *tracked) bool {
	for _, tr := range t.roles {
		switch tr.state {
		case stateStarting:
			return false
		case stateUp:
			if e.reg&(1<<uint(tr.i)) == 0 {
				return false
			}
		}
	}
	return true
}

// coveredLocked counts the live backends where e is registered.
func (t *tracker) coveredLocked(e *tracked) int {
	var up uint64
	for _, tr := range t.roles {
		if tr.state == stateUp {
			up |= 1 << uint(tr.i)
		}
	}
	return bits.OnesCount64(e.reg & up)
}

// register registers keys on every backend that is up (after waiting,
// within ConfirmWait, for the ones still connecting). An entry counts as
// registered on a backend once the reply to its EXISTS is read: that is
// recorded on the connection's reader, before it reads on, so an
// invalidation the backend sent before the registration (for a change
// made before it, which the caller's read will see) is read while the
// entry is not yet registered there and left alone, and one sent after
// it finds the entry registered.
func (t *tracker) register(ctx context.Context, keys []string, entries []*tracked) error {
	if err := t.awaitStarted(ctx); err != nil {
		return err
	}
	cmd := resp.AppendStrings(nil, "EXISTS", keys)
	var conns []*trackRole
	t.mu.Lock()
	for _, tr := range t.roles {
		if tr.state == stateUp && tr.conn != nil {
			conns = append(conns, tr)
		}
	}
	t.mu.Unlock()
	done := make(chan struct{}, len(conns))
	sent := 0
	for _, tr := range conns { // outside t.mu: a write may wait for a slow backend
		c := tr.conn
		err := c.callFunc(cmd, 1, func(v any, ok bool) {
			defer func() { done <- struct{}{} }()
			if _, isErr := v.(ServerError); !ok || isErr {
				return
			}
			t.mu.Lock()
			defer t.mu.Unlock()
			if tr.conn != c {
				return // another connection by now: this one's registrations are gone
			}
			for j, k := range keys {
				if t.keys[k] == entries[j] {
					entries[j].reg |= 1 << uint(tr.i)
				}
			}
		})
		if err == nil {
			sent++
		}
	}
	timer := time.NewTimer(t.r.confirmWait)
	defer timer.Stop()
	for range sent {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil // the rest count as not registered
		}
	}
	return nil
}

// awaitStarted waits until no tracking session is still making its first
// connection, at most ConfirmWait.
func (t *tracker) awaitStarted(ctx context.Context) error {
	_, err := awaitChange(ctx, t.r.confirmWait, &t.mu, func() (bool, chan struct{}) {
		for _, tr := range t.roles {
			if tr.state == stateStarting {
				return false, t.changed
			}
		}
		return true, t.changed
	})
	return err
}

// Wrote tells the tracker that w's own client is about to write keys
// (NOLOOP): in default mode w stops tracking them without being told, as
// Redis does for a NOLOOP client's own write; in BCAST mode the next
// invalidation of each, within a few seconds, is not sent to w.
func (w *Watcher) Wrote(keys []string) {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.bcast {
		if w.own == nil {
			w.own = make(map[string]time.Time)
		}
		now := t.r.now()
		for _, k := range keys {
			if covers(w.prefixes, []string{k}) { // no invalidation comes for others
				w.own[k] = now
			}
		}
		w.sweepOwnLocked(now)
		return
	}
	for _, k := range keys {
		t.untrackLocked(w, k)
	}
}

// sweepOwnLocked drops own writes older than ownWindow (a write whose
// invalidation never came: it changed nothing, or failed), whenever the
// set has doubled since the last sweep, so it stays bounded by the keys
// written within a window, at a cost linear in the writes.
func (w *Watcher) sweepOwnLocked(now time.Time) {
	if len(w.own) < max(w.ownSweep, 64) {
		return
	}
	for k, at := range w.own {
		if now.Sub(at) >= ownWindow {
			delete(w.own, k)
		}
	}
	w.ownSweep = 2 * len(w.own)
}

func (t *tracker) untrackLocked(w *Watcher, k string) {
	if _, ok := w.keys[k]; !ok {
		return
	}
	delete(w.keys, k)
	if e := t.keys[k]; e != nil {
		delete(e.watchers, w)
		if len(e.watchers) == 0 {
			delete(t.keys, k)
		}
	}
}

// Close stops w's tracking: nothing more is sent to it.
func (w *Watcher) Close() {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	for k := range w.keys {
		t.untrackLocked(w, k)
	}
	delete(t.all, w)
	if w.bcast {
		t.bc.leaveLocked(w)
	}
}

// startLocked starts the tracking sessions at the first Track.
func (t *tracker) startLocked() {
	if t.roles != nil {
		return
	}
	t.roles = make([]*trackRole, len(t.r.backends))
	for i, b := range t.r.backends {
		tr := &trackRole{t: t, i: i}
		t.roles[i] = tr
		tr.s = newSession(b, i, tr, t.r.log.With("relay", "tracking"))
		t.r.spawn(tr.s)
	}
}

func (t *tracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// invalidated takes backend i's invalidation: keys, or nil for a flush.
// A key's entry is invalidated only if it is registered on backend i: an
// invalidation read before the entry's registration there was sent for a
// change made before it (see register), a copy of one that already ended
// the entry's predecessor.
func (t *tracker) invalidated(i int, keys []any, flush bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if flush {
		for w := range t.all {
			if w.dirty && !w.bcast {
				w.dirty = false
				clear(w.keys)
				w.invalidate(nil)
			}
		}
		clear(t.keys)
		return
	}
	batch := make(map[*Watcher][]string)
	for _, v := range keys {
		k, _ := str(v)
		e := t.keys[k]
		if e == nil || e.reg&(1<<uint(i)) == 0 {
			continue
		}
		delete(t.keys, k)
		for w := range e.watchers {
			delete(w.keys, k)
			batch[w] = append(batch[w], k)
		}
	}
	for w, ks := range batch {
		w.invalidate(ks)
	}
}

// lostLocked handles the loss of backend i's tracking connection: its
// registrations are gone, and keys left with too few are invalidated.
func (t *tracker) lostLocked(i int) {
	batch := make(map[*Watcher][]string)
	for k, e := range t.keys {
		e.reg &^= 1 << uint(i)
		if t.coveredLocked(e) >= t.need {
			continue
		}
		delete(t.keys, k)
		for w := range e.watchers {
			delete(w.keys, k)
			batch[w] = append(batch[w], k)
		}
	}
	for w, ks := range batch {
		w.invalidate(ks)
	}
}

// trackRole is a backend's tracking connection.
type trackRole struct {
	t *tracker
	i int
	s *session

	// Under t.mu.
	state int
	conn  *bconn
}

func (tr *trackRole) setup() [][]any { return [][]any{{"CLIENT", "TRACKING", "ON"}} }

func (tr *trackRole) up(c *bconn) error {
	t := tr.t
	t.mu.Lock()
	tr.state, tr.conn = stateUp, c
	t.notifyLocked()
	t.mu.Unlock()
	return nil
}

func (tr *trackRole) down() {
	t := tr.t
	t.mu.Lock()
	defer t.mu.Unlock()
	was := tr.state
	tr.state, tr.conn = stateDown, nil
	if was == stateUp {
		t.lostLocked(tr.i)
	}
	t.notifyLocked()
}

func (tr *trackRole) reconcile(*bconn) error { return nil }

func (tr *trackRole) frame(v any) {
	if keys, flush, ok := invalidation(v); ok {
		tr.t.invalidated(tr.i, keys, flush)
	}
}

// invalidation reads an ["invalidate", keys|nil] push.
func invalidation(v any) (keys []any, flush, ok bool) {
	p, isPush := v.(Push)
	if !isPush || len(p) != 2 {
		return nil, false, false
	}
	if s, _ := str(p[0]); !strings.EqualFold(s, "invalidate") {
		return nil, false, false
	}
	if p[1] == nil {
		return nil, true, true
	}
	keys, ok = p[1].([]any)
	return keys, false, ok
}
