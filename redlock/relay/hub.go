package relay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
)

// Kind is what a subscription names: a channel, a pattern or a shard
// channel.
type Kind uint8

const (
	Channel Kind = iota // SUBSCRIBE: messages "message"
	Pattern             // PSUBSCRIBE: messages "pmessage"
	Shard               // SSUBSCRIBE: messages "smessage"
)

var subscribeCmd = [...]string{Channel: "SUBSCRIBE", Pattern: "PSUBSCRIBE", Shard: "SSUBSCRIBE"}
var unsubscribeCmd = [...]string{Channel: "UNSUBSCRIBE", Pattern: "PUNSUBSCRIBE", Shard: "SUNSUBSCRIBE"}

// Message is one delivered message. Pattern is set for Kind Pattern only:
// the pattern subscribed to, Channel the channel it was published on.
type Message struct {
	Kind     Kind
	Pattern  string
	Channel  string
	Payload  string
	Internal bool // delivered by DeliverLocal, not published on the backends
}

// LocalPrefix marks channels that never reach the backends: a
// subscription to one is held by this proxy alone and only DeliverLocal
// delivers on it (__redis__:invalidate, for one).
const LocalPrefix = "__redis__:"

// topic is one subscription target.
type topic struct {
	kind Kind
	name string
}

func (t topic) local() bool { return t.kind != Pattern && strings.HasPrefix(t.name, LocalPrefix) }

// ErrClosed is returned by the subscription and tracking calls of a
// closed Subscriber or Watcher, or of a Relay shut down.
var ErrClosed = errors.New("relay closed")

// hub holds the subscriptions of this proxy's subscribers: the union that
// its subscriber sessions keep on every backend, and who gets what.
type hub struct {
	r       *Relay
	mu      sync.Mutex
	topics  map[topic]map[*Subscriber]struct{}
	byUser  map[string]map[topic]int // a named user's topics: how many of its subscribers hold each
	roles   []*subRole               // nil until the first subscription
	changed chan struct{}
	m       *matcher
}

// Sessions' states as waiters see them.
const (
	stateStarting = iota // the first dial has not ended
	stateUp
	stateDown
)

// Subscriber receives the messages of the channels, patterns and shard
// channels it subscribed to, each message once (match.go). deliver is
// called on the relay's goroutines, in the order messages are decided,
// and must neither block nor call back into the relay.
type Subscriber struct {
	r       *Relay
	deliver func(Message)
	resume  func()             // SetResume's; under hub.mu
	topics  map[topic]struct{} // under hub.mu
	closed  bool
	user    string // SetUser's; "" for none
}

// SetUser names the user whose share of the tier-wide bound s counts
// against (UserShare). Call it before s's first Subscribe.
func (s *Subscriber) SetUser(name string) { s.user = name }

// NewSubscriber returns a subscriber that hands messages to deliver.
func (r *Relay) NewSubscriber(deliver func(Message)) *Subscriber {
	return &Subscriber{r: r, deliver: deliver, topics: make(map[topic]struct{})}
}

// SetResume sets f to be called each time a backend's subscriber
// connection is made again after it was lost, once s's subscriptions were
// sent on it: what that backend published meanwhile did not reach s (the
// other backends' copies did). f is called on a relay goroutine and must
// neither block nor call back into the relay.
func (s *Subscriber) SetResume(f func()) {
	h := &s.r.hub
	h.mu.Lock()
	s.resume = f
	h.mu.Unlock()
}

// Subscribe adds names of kind to s's subscriptions. The first local
// subscriber of a name makes every backend subscribe to it; Subscribe
// then waits until each backend whose connection is up (or still being
// made) confirmed it, at most the relay's ConfirmWait, so that a message
// published after Subscribe returned is delivered. A backend that is
// down is not waited for: it subscribes when it comes back. It returns
// ctx's error, ErrClosed, or a *LimitError (and subscribes to none of
// names) when they would cross a bound (limits.go).
func (s *Subscriber) Subscribe(ctx context.Context, kind Kind, names ...string) error {
	h := &s.r.hub
	h.mu.Lock()
	if s.closed || s.r.closed.Load() {
		h.mu.Unlock()
		return ErrClosed
	}
	if err := h.checkLocked(s, kind, names); err != nil {
		h.mu.Unlock()
		s.r.refused.count(err.Limit)
		return err
	}
	added := false
	wait := make([]topic, 0, len(names))
	for _, n := range names {
		t := topic{kind, n}
		if !t.local() {
			wait = append(wait, t)
		}
		if _, ok := s.topics[t]; ok {
			continue
		}
		s.topics[t] = struct{}{}
		h.userAddLocked(s.user, t)
		subs := h.topics[t]
		if subs == nil {
			subs = make(map[*Subscriber]struct{})
			h.topics[t] = subs
			added = added || !t.local()
		}
		subs[s] = struct{}{}
	}
	if added {
		h.startLocked()
	}
	h.mu.Unlock()
	if added {
		h.poke()
	}
	if len(wait) == 0 {
		return nil
	}
	return h.await(ctx, wait)
}

// checkLocked refuses names that would take s, or the hub, past its
// bound (limits.go).
func (h *hub) checkLocked(s *Subscriber, kind Kind, names []string) *LimitError {
	mine, users, all := 0, 0, 0
	seen := make(map[string]struct{}, len(names))
	userTopics := h.byUser[s.user]
	for _, n := range names {
		t := topic{kind, n}
		if _, dup := seen[n]; dup {
			continue
		}
		seen[n] = struct{}{}
		if _, ok := s.topics[t]; !ok {
			mine++
		}
		if _, ok := userTopics[t]; !ok {
			users++
		}
		if _, ok := h.topics[t]; !ok {
			all++
		}
	}
	if n := len(s.topics) + mine; mine > 0 && n > MaxSubscriberTopics {
		return &LimitError{Limit: LimitSubscriberTopics, Max: MaxSubscriberTopics, Want: n}
	}
	if n := len(userTopics) + users; s.user != "" && users > 0 && n > h.r.maxUserTopics {
		return &LimitError{Limit: LimitUserTopics, Max: h.r.maxUserTopics, Want: n}
	}
	if n := len(h.topics) + all; all > 0 && n > MaxTopics {
		return &LimitError{Limit: LimitTopics, Max: MaxTopics, Want: n}
	}
	return nil
}

// Unsubscribe removes names of kind from s's subscriptions; the last
// local subscriber of a name makes the backends unsubscribe. It does not
// wait for them: no message of those names reaches s after it returned.
func (s *Subscriber) Unsubscribe(kind Kind, names ...string) {
	h := &s.r.hub
	h.mu.Lock()
	removed := false
	for _, n := range names {
		t := topic{kind, n}
		if _, ok := s.topics[t]; !ok {
			continue
		}
		delete(s.topics, t)
		removed = h.dropLocked(t, s) || removed
	}
	h.mu.Unlock()
	if removed {
		h.poke()
	}
}

// Close unsubscribes s from everything; later calls return ErrClosed.
func (s *Subscriber) Close() {
	h := &s.r.hub
	h.mu.Lock()
	s.closed = true
	removed := false
	for t := range s.topics {
		removed = h.dropLocked(t, s) || removed
	}
	clear(s.topics)
	h.mu.Unlock()
	if removed {
		h.poke()
	}
}

// dropLocked removes s from t's subscribers and reports whether the
// backends must unsubscribe from t.
func (h *hub) dropLocked(t topic, s *Subscriber) bool {
	h.userDropLocked(s.user, t)
	subs := h.topics[t]
	delete(subs, s)
	if len(subs) > 0 {
		return false
	}
	delete(h.topics, t)
	return !t.local()
}

// userAddLocked counts that a subscriber of user (none: "") holds t.
func (h *hub) userAddLocked(user string, t topic) {
	if user == "" {
		return
	}
	if h.byUser == nil {
		h.byUser = make(map[string]map[topic]int)
	}
	m := h.byUser[user]
	if m == nil {
		m = make(map[topic]int)
		h.byUser[user] = m
	}
	m[t]++
}

// userDropLocked counts that a subscriber of user no longer holds t.
func (h *hub) userDropLocked(user string, t topic) {
	m := h.byUser[user]
	if m == nil {
		return
	}
	if m[t]--; m[t] <= 0 {
		delete(m, t)
	}
	if len(m) == 0 {
		delete(h.byUser, user)
	}
}

// startLocked starts the subscriber sessions at the first subscription.
func (h *hub) startLocked() {
	if h.roles != nil {
		return
	}
	r := h.r
	h.roles = make([]*subRole, len(r.backends))
	for i, b := range r.backends {
		sr := &subRole{h: h, i: i}
		h.roles[i] = sr
		sr.s = newSession(b, i, sr, r.log)
		r.spawn(sr.s)
	}
}

// poke makes every subscriber session reconcile.
func (h *hub) poke() {
	h.mu.Lock()
	roles := h.roles
	h.mu.Unlock()
	for _, sr := range roles {
		sr.s.poke()
	}
}

// resumed calls the resume functions of the subscribers a backend's new
// subscriber connection serves again.
func (h *hub) resumed() {
	h.mu.Lock()
	var fs []func()
	seen := make(map[*Subscriber]bool)
	for _, subs := range h.topics {
		for s := range subs {
			if s.resume != nil && !seen[s] {
				seen[s] = true
				fs = append(fs, s.resume)
			}
		}
	}
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// notifyLocked wakes the waiters of await.
func (h *hub) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// await waits until every backend that is up confirmed every topic of
// ts, and none is still connecting, for at most ConfirmWait.
func (h *hub) await(ctx context.Context, ts []topic) error {
	timedOut, err := awaitChange(ctx, h.r.confirmWait, &h.mu, func() (bool, chan struct{}) {
		return h.confirmedLocked(ts), h.changed
	})
	if timedOut {
		h.r.log.Debug("subscription not confirmed by every backend in time", "wait", h.r.confirmWait)
	}
	return err
}

func (h *hub) confirmedLocked(ts []topic) bool {
	for _, sr := range h.roles {
		switch sr.state {
		case stateDown:
			continue
		case stateStarting:
			return false
		}
		for _, t := range ts {
			if !sr.have[t] {
				return false
			}
		}
	}
	return true
}

// receive takes a copy of a message from backend i.
func (h *hub) receive(i int, m Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m.offer(i, matchKey(m), h.r.now()) {
		h.deliverLocked(m)
	}
}

// matchKey is a message's identity for the matcher.
func matchKey(m Message) string {
	var b strings.Builder
	b.Grow(len(m.Pattern) + len(m.Channel) + len(m.Payload) + 24)
	b.WriteByte(byte('0' + m.Kind))
	writeLen(&b, len(m.Pattern))
	b.WriteString(m.Pattern)
	writeLen(&b, len(m.Channel))
	b.WriteString(m.Channel)
	b.WriteString(m.Payload)
	return b.String()
}

func writeLen(b *strings.Builder, n int) {
	var buf [11]byte
	i := len(buf) - 1
	buf[i] = ':'
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	b.Write(buf[i:])
}

// deliverLocked hands m to the subscribers of its topic.
func (h *hub) deliverLocked(m Message) int {
	name := m.Channel
	if m.Kind == Pattern {
		name = m.Pattern
	}
	subs := h.topics[topic{m.Kind, name}]
	for s := range subs {
		s.deliver(m)
	}
	return len(subs)
}

// DeliverLocal delivers payload on channel to this proxy's subscribers
// only, as a PUBLISH would (channel subscribers, then each matching
// pattern's), without the backends and without the matcher: for what the
// proxy itself announces (Sentinel's +switch-master, invalidation
// messages). It returns how many subscriptions received it.
func (r *Relay) DeliverLocal(channel, payload string) int {
	h := &r.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.deliverLocked(Message{Kind: Channel, Channel: channel, Payload: payload, Internal: true})
	for t := range h.topics {
		if t.kind == Pattern && GlobMatch(t.name, channel) {
			n += h.deliverLocked(Message{Kind: Pattern, Pattern: t.name, Channel: channel, Payload: payload, Internal: true})
		}
	}
	return n
}

// Names lists the names of kind with at least one local subscriber that
// match pattern (all when pattern is ""), sorted: PUBSUB CHANNELS,
// SHARDCHANNELS.
func (r *Relay) Names(kind Kind, pattern string) []string {
	h := &r.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for t := range h.topics {
		if t.kind == kind && (pattern == "" || GlobMatch(pattern, t.name)) {
			out = append(out, t.name)
		}
	}
	slices.Sort(out)
	return out
}

// Count is the number of local subscribers of name of kind: PUBSUB
// NUMSUB, SHARDNUMSUB; for Pattern with name "", the number of patterns
// subscribed to (PUBSUB NUMPAT).
func (r *Relay) Count(kind Kind, name string) int {
	h := &r.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if kind == Pattern && name == "" {
		n := 0
		for t := range h.topics {
			if t.kind == Pattern {
				n++
			}
		}
		return n
	}
	return len(h.topics[topic{kind, name}])
}
