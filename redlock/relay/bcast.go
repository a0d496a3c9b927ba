package relay

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// Broadcast tracking (CLIENT TRACKING ON BCAST [PREFIX p …]). Each
// backend gets one more connection, made at the first BCAST watcher, in
// BCAST mode with the union of the watchers' prefixes, reduced so that
// none is a prefix of another (Redis refuses overlapping prefixes on one
// connection). A new prefix that overlaps none already registered is
// added in place; any other change re-registers the whole set inside
// MULTI … EXEC, so no write slips between turning tracking off and on.
// When a watcher leaves, the cover shrinks to what the others want and
// the backends re-register it (a smaller list, in one MULTI … EXEC);
// tracking is turned off when the last one leaves. Prefixes per watcher
// and in all are bounded (limits.go). Every backend pushes an invalidation for each
// change of a matching key, so the copies are matched like messages
// (match.go) and each change reaches each watcher whose prefixes match
// once. When fewer than N−Quorum+1 broadcast connections are up, every
// BCAST watcher is flushed: changes may have been missed.

// ownWindow is how long a NOLOOP watcher's own write suppresses the next
// invalidation of that key.
const ownWindow = 2 * time.Second

// bcast is the BCAST part of the tracker; guarded by tracker.mu.
type bcast struct {
	t        *tracker
	cover    []string // registered prefixes wanted; "" for every key
	watchers map[*Watcher]struct{}
	roles    []*bcastRole
	m        *matcher
}

func (b *bcast) init(t *tracker) {
	b.t = t
	b.watchers = make(map[*Watcher]struct{})
	b.m = newMatcher(len(t.r.backends), 0, 0)
}

// Broadcast switches w to BCAST mode for keys starting with one of
// prefixes (every key when there are none) and waits, at most
// ConfirmWait, until every backend that is up registered them.
func (w *Watcher) Broadcast(ctx context.Context, prefixes []string) error {
	t := w.t
	b := &t.bc
	t.mu.Lock()
	if w.closed || t.r.closed.Load() {
		t.mu.Unlock()
		return ErrClosed
	}
	if len(prefixes) == 0 {
		prefixes = []string{""}
	}
	if err := b.checkLocked(w, prefixes); err != nil {
		t.mu.Unlock()
		t.r.refused.count(err.Limit)
		return err
	}
	w.bcast = true
	w.prefixes = append(w.prefixes, prefixes...)
	b.watchers[w] = struct{}{}
	changed := b.addLocked(prefixes)
	b.startLocked()
	if changed {
		b.pokeLocked()
	}
	t.mu.Unlock()
	_, err := awaitChange(ctx, t.r.confirmWait, &t.mu, func() (bool, chan struct{}) {
		for _, br := range b.roles {
			if br.state != stateDown && (br.state != stateUp || !covers(br.sent, prefixes)) {
				return false, t.changed
			}
		}
		return true, t.changed
	})
	return err
}

// checkLocked refuses prefixes that would take w, or the cover, past its
// bound (limits.go).
func (b *bcast) checkLocked(w *Watcher, prefixes []string) *LimitError {
	if n := len(w.prefixes) + len(prefixes); n > MaxWatcherPrefixes {
		return &LimitError{Limit: LimitWatcherPrefixes, Max: MaxWatcherPrefixes, Want: n}
	}
	if n := len(reduce(b.cover, prefixes)); n > MaxPrefixes {
		return &LimitError{Limit: LimitPrefixes, Max: MaxPrefixes, Want: n}
	}
	if w.user == "" {
		return nil
	}
	var users []string // what the user's watchers hold, and w
	for o := range b.watchers {
		if o.user == w.user {
			users = append(users, o.prefixes...)
		}
	}
	users = append(users, w.prefixes...) // w may not be among them yet
	if n := len(reduce(reduce(nil, users), prefixes)); n > b.t.r.maxUserPrefixes {
		return &LimitError{Limit: LimitUserPrefixes, Max: b.t.r.maxUserPrefixes, Want: n}
	}
	return nil
}

// addLocked adds prefixes to the cover; true when it changed.
func (b *bcast) addLocked(prefixes []string) bool {
	next := reduce(b.cover, prefixes)
	if slices.Equal(next, b.cover) {
		return false
	}
	b.cover = next
	return true
}

// reduce is cover with prefixes added, none a prefix of another: a new
// prefix that one already there starts is left out, and one that starts
// others replaces them. cover is not changed.
func reduce(cover, prefixes []string) []string {
	out := slices.Clone(cover)
	for _, p := range prefixes {
		if covers(out, []string{p}) {
			continue
		}
		out = slices.DeleteFunc(out, func(q string) bool { return strings.HasPrefix(q, p) })
		out = append(out, p)
	}
	return out
}

// covers: every one of ps starts with one of cover.
func covers(cover, ps []string) bool {
	for _, p := range ps {
		if !slices.ContainsFunc(cover, func(q string) bool { return strings.HasPrefix(p, q) }) {
			return false
		}
	}
	return true
}

// leaveLocked forgets a BCAST watcher: the cover shrinks to what the
// others want, and the backends' prefix lists with it (reconcile); the
// last one turns tracking off.
func (b *bcast) leaveLocked(w *Watcher) {
	delete(b.watchers, w)
	var cover []string
	for o := range b.watchers {
		cover = reduce(cover, o.prefixes)
	}
	if len(cover) != len(b.cover) || !allIn(cover, b.cover) {
		b.cover = cover
		b.pokeLocked()
	}
}

func (b *bcast) pokeLocked() {
	for _, br := range b.roles {
		br.s.poke()
	}
}

func (b *bcast) startLocked() {
	if b.roles != nil {
		return
	}
	r := b.t.r
	b.roles = make([]*bcastRole, len(r.backends))
	for i, be := range r.backends {
		br := &bcastRole{b: b, i: i}
		b.roles[i] = br
		br.s = newSession(be, i, br, r.log.With("relay", "broadcast"))
		r.spawn(br.s)
	}
}

// flushLocked tells every BCAST watcher to drop everything.
func (b *bcast) flushLocked() {
	for w := range b.watchers {
		w.invalidate(nil)
	}
}

// invalidated takes backend i's broadcast invalidation.
func (b *bcast) invalidated(i int, keys []any, flush bool) {
	t := b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.r.now()
	if flush {
		if b.m.offer(i, "", now) {
			b.flushLocked()
		}
		return
	}
	batch := make(map[*Watcher][]string)
	for _, v := range keys {
		k, _ := str(v)
		if !b.m.offer(i, "k"+k, now) {
			continue
		}
		for w := range b.watchers {
			if !covers(w.prefixes, []string{k}) {
				continue
			}
			if at, ok := w.own[k]; ok {
				delete(w.own, k)
				if now.Sub(at) < ownWindow {
					continue // NOLOOP: its own write
				}
			}
			batch[w] = append(batch[w], k)
		}
	}
	for w, ks := range batch {
		w.invalidate(ks)
	}
}

// bcastRole is a backend's broadcast tracking connection.
type bcastRole struct {
	b *bcast
	i int
	s *session

	// Under tracker.mu.
	state   int
	sent    []string // the prefixes registered on the current connection
	pending []string // the prefixes the connection being made registers
}

// bcastOn is CLIENT TRACKING ON BCAST with prefixes.
func bcastOn(prefixes []string) []any {
	cmd := []any{"CLIENT", "TRACKING", "ON", "BCAST"}
	for _, p := range prefixes {
		if p != "" {
			cmd = append(cmd, "PREFIX", p)
		}
	}
	return cmd
}

func (br *bcastRole) setup() [][]any {
	t := br.b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	br.pending = slices.Clone(br.b.cover)
	if len(br.pending) == 0 {
		return nil
	}
	return [][]any{bcastOn(br.pending)}
}

func (br *bcastRole) up(*bconn) error {
	t := br.b.t
	t.mu.Lock()
	br.state, br.sent = stateUp, br.pending
	br.b.m.setUp(br.i, true)
	t.notifyLocked()
	t.mu.Unlock()
	br.s.poke() // the cover may have grown since setup
	return nil
}

func (br *bcastRole) down() {
	t := br.b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	was := br.state
	br.state, br.sent = stateDown, nil
	br.b.m.setUp(br.i, false)
	if was == stateUp {
		up := 0
		for _, o := range br.b.roles {
			if o.state == stateUp {
				up++
			}
		}
		if up < t.need {
			br.b.flushLocked()
		}
	}
	t.notifyLocked()
}

// reconcile registers the cover as it is now.
func (br *bcastRole) reconcile(c *bconn) error {
	t := br.b.t
	t.mu.Lock()
	cover, sent := slices.Clone(br.b.cover), br.sent
	t.mu.Unlock()
	if slices.Equal(cover, sent) {
		return nil
	}
	var buf []byte
	replies := 1
	switch {
	case len(cover) == 0:
		buf = resp.AppendCommand(nil, "CLIENT", "TRACKING", "OFF")
	case covers(cover, sent) && len(sent) > 0 && allIn(sent, cover):
		var add []string
		for _, p := range cover {
			if !slices.Contains(sent, p) {
				add = append(add, p)
			}
		}
		buf = resp.AppendCommand(nil, bcastOn(add)...)
	case len(sent) == 0:
		buf = resp.AppendCommand(nil, bcastOn(cover)...)
	default:
		buf = resp.AppendCommand(nil, "MULTI")
		buf = resp.AppendCommand(buf, "CLIENT", "TRACKING", "OFF")
		buf = resp.AppendCommand(buf, bcastOn(cover)...)
		buf = resp.AppendCommand(buf, "EXEC")
		replies = 4
	}
	ch, err := c.call(buf, replies)
	if err != nil {
		return err
	}
	v, err := await(t.r.ctx, ch, writeTimeout)
	if err != nil {
		return err
	}
	if a, ok := v.([]any); ok {
		for _, x := range a {
			if se, isErr := x.(ServerError); isErr {
				return se
			}
		}
	}
	t.mu.Lock()
	br.sent = cover
	t.notifyLocked()
	t.mu.Unlock()
	return nil
}

// allIn: every one of a is in b.
func allIn(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func (br *bcastRole) frame(v any) {
	if keys, flush, ok := invalidation(v); ok {
		br.b.invalidated(br.i, keys, flush)
	}
}
