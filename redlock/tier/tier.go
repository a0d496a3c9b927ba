package tier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Defaults of Options.
const (
	DefaultService     = "redlock"
	DefaultInterval    = time.Second
	DefaultTTL         = 3 * time.Second
	DefaultCallTimeout = 500 * time.Millisecond
)

// ErrNoQuorum is Beat's error when fewer than a quorum of backends
// answered: the view keeps what earlier rounds found.
var ErrNoQuorum = errors.New("heartbeat reached too few backends")

// Key is the hash that holds service's member entries on every backend.
func Key(service string) string { return redlock.ReservedPrefix + "tier:" + service }

// Options configure a Tier. The zero value of every field but the Redlock
// passed to New is usable.
type Options struct {
	// Service is the name the members share (service_name): proxies of
	// one service see each other. Default "redlock".
	Service string
	// Announce is how clients reach this proxy, host:port. Empty: this
	// proxy does not announce itself; it still beats (sharing its fence
	// mark) and reads the others.
	Announce string
	// Interval is the heartbeat period; TTL how long an entry lives on a
	// backend after its last heartbeat; CallTimeout bounds each backend
	// call. Defaults 1s, 3s, 500ms; TTL is raised to at least 2×Interval
	// and CallTimeout capped at Interval.
	Interval, TTL, CallTimeout time.Duration
	// Now is this proxy's clock: liveness is timed on it, and the joined
	// stamp read from it. Default time.Now.
	Now func() time.Time
	// Logger receives membership changes. Default: discard.
	Logger hclog.Logger
	// OnSwitch, when set, is called when the advertised member's address
	// changed from old to new: after Start on a goroutine of the Tier's
	// own, in order, so that a slow subscriber never delays a heartbeat;
	// before Start, at the end of the Beat that saw the change.
	OnSwitch func(old, new Member)
}

// Tier is this proxy's membership: its heartbeat, and its view of the
// live members. Its methods are safe for concurrent use.
type Tier struct {
	rl          *redlock.Redlock
	nodes       []redlock.Node
	quorum      int
	service     string
	key         string
	announce    string
	interval    time.Duration
	ttl         time.Duration
	callTimeout time.Duration
	now         func() time.Time
	log         hclog.Logger
	onSwitch    func(old, new Member)
	id          string

	mu       sync.Mutex
	joined   int64 // ms; renewed when this proxy dropped out and comes back
	wasLive  bool
	view     *view
	last     Member // the last member advertised
	hasLast  bool
	started  bool
	stopped  bool
	stop     chan struct{}
	loopDone chan struct{}
	notes    chan [2]Member // switches for the notifier, after Start
	noteDone chan struct{}
}

// maxPendingSwitches bounds the switches waiting for OnSwitch.
const maxPendingSwitches = 16

// New returns the tier membership of the proxy running rl. It does not
// contact the backends: Join (or Start) does.
func New(rl *redlock.Redlock, opts Options) *Tier {
	t := &Tier{
		rl: rl, nodes: rl.Nodes(), quorum: rl.Quorum(),
		service: opts.Service, announce: opts.Announce,
		interval: opts.Interval, ttl: opts.TTL, callTimeout: opts.CallTimeout,
		now: opts.Now, log: opts.Logger, onSwitch: opts.OnSwitch,
		id: newID(), stop: make(chan struct{}), loopDone: make(chan struct{}),
		notes: make(chan [2]Member, maxPendingSwitches), noteDone: make(chan struct{}),
	}
	if t.service == "" {
		t.service = DefaultService
	}
	if t.interval <= 0 {
		t.interval = DefaultInterval
	}
	if t.ttl <= 0 {
		t.ttl = DefaultTTL
	}
	t.ttl = max(t.ttl, 2*t.interval)
	if t.callTimeout <= 0 {
		t.callTimeout = DefaultCallTimeout
	}
	t.callTimeout = min(t.callTimeout, t.interval)
	if t.now == nil {
		t.now = time.Now
	}
	if t.log == nil {
		t.log = hclog.NewNullLogger()
	}
	t.key = Key(t.service)
	t.joined = t.now().UnixMilli()
	t.view = newView(t.quorum)
	return t
}

// newID is 40 random hex digits, like a Redis run_id.
func newID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Service is the service name the tier answers for.
func (t *Tier) Service() string { return t.service }

// Announce is this proxy's announced address; "" when it does not announce.
func (t *Tier) Announce() string { return t.announce }

// ID is this process's member id.
func (t *Tier) ID() string { return t.id }

// TTL is how long an entry outlives its last heartbeat: a stopped member
// drops out of every view within it.
func (t *Tier) TTL() time.Duration { return t.ttl }

// Members are the live members, earliest joined first.
func (t *Tier) Members() []Member {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.view.members(t.now(), t.self())
}

// Master is the member to advertise: the earliest-joined live one, with
// live true. When none is live it is the last one advertised, with live
// false; ok is false when there never was one.
func (t *Tier) Master() (m Member, live, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ms := t.view.members(t.now(), t.self()); len(ms) > 0 {
		return ms[0], true, true
	}
	return t.last, false, t.hasLast
}

// self is this process's entry. mu is held.
func (t *Tier) self() entry {
	return entry{addr: t.announce, id: t.id, joined: t.joined}
}

// Join runs the first heartbeat: this proxy's entry is written, the others
// are read, and the fence mark is raised to every backend's counter
// before the proxy issues its first fence. Call it before serving.
func (t *Tier) Join(ctx context.Context) error { return t.Beat(ctx) }

// Beat runs one heartbeat round on every backend and updates the view;
// after it, OnSwitch is called if the advertised address changed. It
// returns ErrNoQuorum (wrapped, with the node errors) when fewer than a
// quorum answered.
func (t *Tier) Beat(ctx context.Context) error {
	t.mu.Lock()
	sent := t.now()
	t.rejoinIfDropped(sent)
	value := entryValue(t.id, t.joined)
	t.mu.Unlock()
	results := t.fanOut(ctx, beatScript, t.announce, value, t.ttl.Milliseconds(), t.rl.FenceHighWater())

	var rounds []round
	var errs []error
	var counter int64
	for _, res := range results {
		if res.err != nil {
			errs = append(errs, &redlock.NodeError{Addr: t.nodes[res.node].Addr(), Err: res.err})
			continue
		}
		rounds = append(rounds, res.r)
		counter = max(counter, res.r.counter)
	}
	if t.rl.RaiseFenceHighWater(counter) {
		t.log.Debug("fence mark raised from the backends", "fence", counter)
	}

	t.mu.Lock()
	before := t.view.members(sent, t.self())
	t.view.observe(sent, rounds)
	now := t.now()
	t.view.prune(now)
	t.wasLive = t.view.live(now, t.self())
	after := t.view.members(now, t.self())
	old, hadLast := t.last, t.hasLast
	switched := false
	if len(after) > 0 {
		switched = hadLast && after[0].Addr != old.Addr
		t.last, t.hasLast = after[0], true
	}
	started := t.started
	t.mu.Unlock()

	t.logChanges(before, after)
	if switched {
		t.log.Info("advertised proxy changed", "service", t.service, "old", old.Addr, "new", after[0].Addr)
		t.notify(old, after[0], started)
	}
	if len(rounds) < t.quorum {
		return fmt.Errorf("%w: %d of %d answered: %w", ErrNoQuorum, len(rounds), len(t.nodes), errors.Join(errs...))
	}
	return nil
}

// rejoinIfDropped takes a new joined stamp, before a round writes the
// entry, when this proxy's entry was live and will not be half an Interval
// from now: its heartbeats have not reached a quorum for about TTL −
// Interval/2 (with the defaults, one missed round is tolerated, two are
// not). The others keep the old entry until about TTL after the last
// heartbeat that reached a quorum, so a round that still writes the old
// stamp lands while they still hold it: this proxy never reappears under
// its old stamp after the others dropped it, and never takes the
// advertised role back from the member that took over. mu is held.
func (t *Tier) rejoinIfDropped(now time.Time) {
	if t.announce == "" || !t.wasLive || t.view.live(now.Add(t.interval/2), t.self()) {
		return
	}
	t.joined = now.UnixMilli()
	t.wasLive = false
	t.log.Warn("this proxy's heartbeats missed a quorum for too long: it rejoins as the newest member", "announce", t.announce)
}

// notify hands a switch to OnSwitch: to the notifier once started, else
// at once.
func (t *Tier) notify(old, new Member, started bool) {
	if t.onSwitch == nil {
		return
	}
	if !started {
		t.onSwitch(old, new)
		return
	}
	select {
	case t.notes <- [2]Member{old, new}:
	default:
		t.log.Warn("switch notice dropped: the subscribers are not keeping up", "old", old.Addr, "new", new.Addr)
	}
}

// notifier calls OnSwitch for each switch, in order, until Shutdown.
func (t *Tier) notifier() {
	defer close(t.noteDone)
	for {
		select {
		case <-t.stop:
			return
		case n := <-t.notes:
			t.onSwitch(n[0], n[1])
		}
	}
}

// logChanges logs the members that joined and left between two views.
func (t *Tier) logChanges(before, after []Member) {
	has := func(ms []Member, addr string) bool {
		return slices.ContainsFunc(ms, func(m Member) bool { return m.Addr == addr })
	}
	for _, m := range after {
		if !has(before, m.Addr) {
			t.log.Info("proxy joined the tier", "service", t.service, "addr", m.Addr, "id", m.ID, "self", m.Self)
		}
	}
	for _, m := range before {
		if !has(after, m.Addr) {
			t.log.Info("proxy left the tier", "service", t.service, "addr", m.Addr, "id", m.ID)
		}
	}
}

// Start runs the heartbeat every Interval on a goroutine the Tier owns,
// until Shutdown. A second Start does nothing.
func (t *Tier) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started || t.stopped {
		return
	}
	t.started = true
	go t.loop()
	go t.notifier()
}

func (t *Tier) loop() {
	defer close(t.loopDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		err := t.Beat(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			t.log.Warn("heartbeat failed: membership kept from earlier rounds", "error", err)
			failing = true
		case err == nil && failing:
			t.log.Info("heartbeat reaches a quorum again")
			failing = false
		}
	}
}

// Shutdown stops the heartbeat and removes this proxy's entry from the
// backends, so the others stop advertising it at their next round instead
// of after TTL. It returns ctx.Err() if ctx ends first. It is idempotent.
func (t *Tier) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return nil
	}
	t.stopped = true
	started := t.started
	close(t.stop)
	t.mu.Unlock()
	if started {
		for _, done := range []chan struct{}{t.loopDone, t.noteDone} {
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if t.announce == "" {
		return nil
	}
	left := 0
	for _, res := range t.fanOut(ctx, leaveScript, t.announce, t.id) {
		if res.err == nil {
			left++
		}
	}
	t.log.Info("left the tier", "announce", t.announce, "backends", left)
	return ctx.Err()
}
