package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
)

// Errors of Acquire besides redlock's. ErrWaitOver and ErrQueued wrap
// redlock.ErrHeld: to a caller who asked for the lock, each means another
// owner has it.
var (
	// ErrWaitOver: LockRequest.Wait ran out with the key still held.
	ErrWaitOver = fmt.Errorf("wait ran out: %w", redlock.ErrHeld)
	// ErrQueued: a request without Wait on a key that has waiters queued
	// here goes behind them, that is, it does not get the lock.
	ErrQueued = fmt.Errorf("waiters queued: %w", redlock.ErrHeld)
	// ErrHeldHere: a request without Wait on a key granted through this
	// proxy to another token, within that grant's validity, answered
	// without asking the backends (registry.go: admit).
	ErrHeldHere = fmt.Errorf("held through this proxy: %w", redlock.ErrHeld)
	// ErrOwnerGone: the owner closed while it waited, or before the grant
	// could reach it (the lock was then given back).
	ErrOwnerGone = errors.New("client connection closed")
	// ErrStopped: the Manager is shutting down.
	ErrStopped = errors.New("shutting down")
)

// releaseTimeout bounds a release the Manager makes on its own: a SESSION
// lock whose owner closed or that was lost, a grant nobody will read.
const releaseTimeout = 2 * time.Second

// Options configure a Manager.
type Options struct {
	Locker *redlock.Redlock // required
	// MaxHold stops the renewal of a SESSION lock this long after its
	// grant; 0: never.
	MaxHold time.Duration
	// KeepTTL is the lease of writes without expiry, renewed while the key
	// holds the value written (keep.go); 0: such writes carry no expiry.
	KeepTTL time.Duration
	// MaxTTL bounds every copy a script by vote leaves (clamp.go): where
	// one would carry no expiry or a longer one, it carries
	// min(KeepTTL, MaxTTL) and the key is held. 0, or a KeepTTL of 0:
	// scripts keep the expiries they set.
	MaxTTL time.Duration
	// MaxHolds bounds the holds of the tier (keys held without expiry or
	// beyond MaxTTL): a lock that would be one more is refused with
	// ErrMaxHolds. 0: no bound.
	MaxHolds int
	// WatchReleases, when set, hears of releases made elsewhere (another
	// proxy) while this Manager has waiters for a key it does not hold
	// (wait.go). nil: such waiters only poll.
	WatchReleases WatchFunc
	Logger        hclog.Logger     // default: discard
	Now           func() time.Time // default time.Now
}

// WatchFunc subscribes to key's release notices (redlock.NoticeChannel)
// and returns once they flow, or ctx ended. It calls notice with each
// notice's token tag, and gap when notices may have been missed (a
// backend's subscription made again); both must not block. stop ends the
// subscription.
type WatchFunc func(ctx context.Context, key string, notice func(tag string), gap func()) (stop func())

// LockRequest is a native LOCK or MLOCK, remembered with its owner.
type LockRequest struct {
	Keys    []string // one key, or several taken all or none (MLOCK)
	Token   string
	TTL     time.Duration
	Wait    time.Duration // > 0: queued behind the key's waiters this long (one key)
	Fence   bool          // with a fencing token (one key)
	Session bool          // renewed while the owner lives, released when it closes (one key)
}

// request is any acquisition inside the Manager: remember a native lock's
// (in the registry with its owner), keep one without expiry's (keep.go).
type request struct {
	keys                           []string
	token                          string
	ttl, wait                      time.Duration
	mode                           redlock.AcquireMode
	fence, session, remember, keep bool
}

// Grant is an acquired lock.
type Grant struct {
	Keys     []string
	Token    string
	Validity time.Duration
	Fence    int64 // when LockRequest.Fence
}

// Stats counts lock operations by outcome, for INFO.
type Stats struct {
	Acquired, Contended, NoQuorum int64
	Released, NotHeld             int64
	Extended, ExtendFailed        int64
	// Notices counts the release notices received (Notice); NoticeWakes
	// those that woke a waiter here.
	Notices, NoticeWakes int64
	// HeldFast counts the acquisitions answered "held" from what this
	// proxy granted, without a quorum round (registry.go: admit); they
	// are in Contended too.
	HeldFast int64
	// HoldsRefused counts the locks refused with ErrMaxHolds.
	HoldsRefused int64
}

// counters are Stats kept atomically.
type counters struct {
	acquired, contended, noQuorum atomic.Int64
	released, notHeld             atomic.Int64
	extended, extendFailed        atomic.Int64
	notices, noticeWakes          atomic.Int64
	heldFast                      atomic.Int64
	holdsRefused                  atomic.Int64
}

// Manager carries out the proxy's lock operations and remembers what it
// granted. It is safe for concurrent use.
type Manager struct {
	locker   *redlock.Redlock
	maxHold  time.Duration
	keepTTL  time.Duration
	maxTTL   time.Duration
	maxHolds int
	watch    WatchFunc // Options.WatchReleases
	log      hclog.Logger
	now      func() time.Time

	reg   registry // what this proxy remembers of each key
	stats counters
	bg    redlock.Tracker // session renewals and releases, give-backs

	life      context.Context // cancelled at the end of Shutdown
	stopLife  context.CancelFunc
	stopWaits chan struct{} // closed when Shutdown begins
	stopOnce  sync.Once
	closing   atomic.Bool // Shutdown began: new sessions are released at once

	holds atomic.Pointer[Holds] // the record, once StartHolds ran
	// toldRenewing is when a round last logged (and showed as an event)
	// that it renewed holds of a silent maker; only the rounds touch it.
	toldRenewing time.Time
}

// New returns a Manager over opts.Locker.
func New(opts Options) *Manager {
	m := &Manager{
		locker:    opts.Locker,
		maxHold:   opts.MaxHold,
		keepTTL:   opts.KeepTTL,
		maxHolds:  opts.MaxHolds,
		maxTTL:    opts.MaxTTL,
		watch:     opts.WatchReleases,
		log:       opts.Logger,
		now:       opts.Now,
		stopWaits: make(chan struct{}),
	}
	if m.log == nil {
		m.log = hclog.NewNullLogger()
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.life, m.stopLife = context.WithCancel(context.Background())
	return m
}

// Acquire takes req.Keys for owner, a native LOCK or MLOCK. It fails
// with redlock.ErrHeld (wrapped: ErrWaitOver, ErrQueued, or a
// *redlock.QuorumError), redlock.ErrNoQuorum, ErrOwnerGone, ErrStopped,
// or the caller's cancellation.
func (m *Manager) Acquire(ctx context.Context, owner *Owner, req LockRequest) (Grant, error) {
	return m.acquire(ctx, owner, request{keys: req.Keys, token: req.Token, ttl: req.TTL,
		wait: req.Wait, fence: req.Fence, session: req.Session, remember: true})
}

// SetIfAbsent is the single-Redis dialect's acquire (SET NX, SETNX, SET
// IF… of a missing key) of key, value its token; ttl 0: without expiry.
func (m *Manager) SetIfAbsent(ctx context.Context, key, value string, ttl time.Duration) error {
	_, err := m.acquire(ctx, nil, request{keys: []string{key}, token: value, ttl: ttl, keep: ttl == 0})
	return err
}

// AcquireScript is a recognised library script's acquire of keys.
func (m *Manager) AcquireScript(ctx context.Context, keys []string, token string, ttl time.Duration, mode redlock.AcquireMode) error {
	_, err := m.acquire(ctx, nil, request{keys: keys, token: token, ttl: ttl, mode: mode})
	return err
}

func (m *Manager) acquire(ctx context.Context, owner *Owner, req request) (Grant, error) {
	if req.keep {
		req.ttl = m.keepTTL
	} else if req.mode == redlock.IfAbsentOrMine {
		for _, k := range req.keys {
			m.unkeepValue(k, req.token) // it may get an expiry: no renewal may undo it
		}
	}
	var until time.Time // a lock beyond MaxTTL: granted with the lease, held (clamp.go)
	if !req.keep && !req.remember && len(req.keys) == 1 {
		req.ttl, until = m.splitTTL(req.ttl)
	}
	if (req.keep || !until.IsZero()) && m.holdsFull(req.keys[0]) {
		return Grant{}, ErrMaxHolds
	}
	// A key granted here is refused from memory while its grant is valid
	// (registry.go: admit); a kept one also while it is still kept here
	// (keptNotesLive). docs/safety.md, "Contention answered from memory".
	held, gen := m.reg.admit(req.keys, req.token, req.mode == redlock.IfAbsentOrMine, m.now(), req.wait <= 0)
	if held && !m.reg.keptNotesLive(req.keys) {
		held = false
	}
	if held {
		m.stats.heldFast.Add(1)
		m.count(ErrHeldHere)
		return Grant{}, ErrHeldHere
	}
	var g Grant
	err := m.acquireWaiting(ctx, owner, req, func(l redlock.Lock, start time.Time) {
		g = Grant{Keys: l.Keys, Token: l.Token, Validity: l.Validity, Fence: l.Fence}
		now := m.now()
		m.reg.noteGrant(l.Keys, l.Token, now.Add(l.Validity), gen, now, req.keep)
		if req.remember {
			m.remember(owner, l, req, start)
		}
	})
	if err == nil && req.remember && !req.session && owner.gone() {
		// The owner closed while the lock was being taken: nobody will
		// read the token, so give it back now.
		h, keys, token := m.reg.byToken(g.Keys[0], g.Token), g.Keys, g.Token
		m.bg.Go(func() { m.giveBack(h, keys, token) })
		return Grant{}, ErrOwnerGone
	}
	m.count(err)
	switch {
	case err == nil && req.keep && m.holds.Load() != nil && len(g.Keys) == 1:
		m.keepRecorded(g.Keys[0], g.Token) // recorded by the acquisition
	case err == nil && req.keep:
		m.keep(g.Keys[0], g.Token)
	case err == nil && !until.IsZero():
		m.HoldKey(g.Keys[0], Hold{Value: g.Token, Deadline: until})
	case err == nil:
		// A grant with an expiry: a quorum had the keys free (or held by
		// this token), so whatever was kept for them is stale, and its
		// renewal must not make this lock endless.
		for _, k := range g.Keys {
			m.unkeep(k)
		}
	}
	return g, err
}

// count records an acquisition's outcome.
func (m *Manager) count(err error) {
	switch {
	case err == nil:
		m.stats.acquired.Add(1)
	case errors.Is(err, redlock.ErrHeld), errors.Is(err, ErrOwnerGone):
		m.stats.contended.Add(1)
	case errors.Is(err, redlock.ErrNoQuorum):
		m.stats.noQuorum.Add(1)
	}
}

// acquireOnce tries once; start is when the attempt began.
func (m *Manager) acquireOnce(ctx context.Context, req request) (redlock.Lock, time.Time, error) {
	start := m.now()
	var (
		l   redlock.Lock
		err error
	)
	h := m.holds.Load()
	switch {
	case req.fence:
		l, err = m.locker.AcquireFenced(ctx, req.keys[0], req.token, req.ttl)
	case req.keep && h != nil && len(req.keys) == 1:
		// The hold's field goes with the lock, in the same call.
		l, err = m.locker.AcquireHold(ctx, h.Service, record.Field{
			Key: req.keys[0], Digest: digestOf(req.token),
		}, req.token, req.ttl)
	default:
		l, err = m.locker.AcquireKeys(ctx, req.keys, req.token, req.ttl, req.mode)
	}
	return l, start, err
}

// remember records a grant (and starts its renewal when it is a SESSION
// lock); start is when the acquisition began.
func (m *Manager) remember(owner *Owner, l redlock.Lock, req request, start time.Time) {
	now := m.now()
	h := &heldLock{
		keys:     l.Keys,
		token:    l.Token,
		fenced:   req.fence,
		fence:    l.Fence,
		ttl:      req.ttl,
		granted:  now,
		owner:    owner,
		session:  req.session,
		deadline: now.Add(l.Validity),
		expires:  start.Add(req.ttl),
	}
	var sctx context.Context
	if req.session {
		sctx, h.stop = context.WithCancel(m.life)
	}
	m.reg.add(h, now)
	if req.session {
		m.startSession(sctx, h)
	}
}

// giveBack releases a grant nobody will read, in the background.
func (m *Manager) giveBack(h *heldLock, keys []string, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := m.locker.ReleaseKeys(ctx, keys, token); err != nil {
		m.log.Debug("release after a closed connection failed", "keys", keys, "error", err)
	}
	m.reg.forget(keys...)
	if h != nil {
		m.reg.remove(h)
	}
}

// Release deletes key where it holds token. It returns nil when a quorum
// released it, a redlock.ErrNotHeld (or ErrInvalid) error when it was not
// held by token, or redlock.ErrNoQuorum. A SESSION lock released this way
// stops renewing, and the key's first waiter is woken.
func (m *Manager) Release(ctx context.Context, key, token string) error {
	m.releasing(key, token)
	m.unkeepGone(key, &token)
	err := m.locker.Release(ctx, key, token)
	m.reg.forget(key)
	switch {
	case err == nil:
		m.stats.released.Add(1)
		m.reg.released(key, token)
	case errors.Is(err, redlock.ErrNotHeld), errors.Is(err, redlock.ErrInvalid):
		m.stats.notHeld.Add(1)
	}
	return err
}

// ReleaseKeys deletes each of keys that holds token and returns each
// key's state (redlock.ReleaseKeys). Each key released wakes its first
// waiter; each is counted as one release.
func (m *Manager) ReleaseKeys(ctx context.Context, keys []string, token string) ([]redlock.KeyState, error) {
	for _, k := range keys {
		m.releasing(k, token)
		m.unkeepGone(k, &token)
	}
	states, err := m.locker.ReleaseKeys(ctx, keys, token)
	m.reg.forget(keys...)
	if err != nil {
		return nil, err
	}
	for i, s := range states {
		if s == redlock.Released {
			m.stats.released.Add(1)
			m.reg.released(keys[i], token)
		} else {
			m.stats.notHeld.Add(1)
		}
	}
	return states, nil
}

// Extend sets the ttl of keys, per mode, where they all hold token, and
// returns the new validity (redlock.ExtendKeys). A remembered lock's
// validity and expiry move with it. One key set (Replace) beyond MaxTTL
// gets the lease, and is held to its deadline while it holds token, as
// Acquire does.
func (m *Manager) Extend(ctx context.Context, keys []string, token string, ttl time.Duration, mode redlock.ExtendMode) (time.Duration, error) {
	for _, k := range keys {
		m.unkeepValue(k, token) // it gets an expiry: no renewal may undo it
	}
	var until time.Time // one key set beyond MaxTTL: the lease, then held (clamp.go)
	if len(keys) == 1 && mode == redlock.Replace {
		ttl, until = m.splitTTL(ttl)
	}
	start := m.now()
	validity, err := m.locker.ExtendKeys(ctx, keys, token, ttl, mode)
	switch {
	case err == nil:
		m.holdUntil(err, keys[0], token, until)
		m.stats.extended.Add(1)
		m.reg.extendedGrant(keys, token, m.now().Add(validity))
		for _, k := range keys {
			m.reg.extended(k, token, start, m.now(), validity)
		}
	case errors.Is(err, redlock.ErrNotHeld), errors.Is(err, redlock.ErrInvalid):
		m.stats.extendFailed.Add(1)
		m.reg.forget(keys...)
	}
	return validity, err
}

// notice takes a release notice of key that a release through another
// proxy (or this one) published on a backend (redlock.Options.
// ReleaseNotices): the key's first waiter here tries at once, and a lock
// remembered here under the released token is forgotten.
func (m *Manager) notice(key, tag string) {
	m.stats.notices.Add(1)
	m.reg.forget(key)
	if m.reg.releasedElsewhere(key, tag) {
		m.stats.noticeWakes.Add(1)
	}
}

// changed tells the Manager that keys may have changed behind its lock
// operations (a library's script run by vote wrote them): their first
// waiters try again at once.
func (m *Manager) changed(keys []string) {
	m.reg.forget(keys...)
	for _, k := range keys {
		m.reg.wake(k)
	}
}

// Stats returns the outcome counters.
func (m *Manager) Stats() Stats {
	s := &m.stats
	return Stats{
		Acquired: s.acquired.Load(), Contended: s.contended.Load(), NoQuorum: s.noQuorum.Load(),
		Released: s.released.Load(), NotHeld: s.notHeld.Load(),
		Extended: s.extended.Load(), ExtendFailed: s.extendFailed.Load(),
		Notices: s.notices.Load(), NoticeWakes: s.noticeWakes.Load(),
		HeldFast: s.heldFast.Load(), HoldsRefused: s.holdsRefused.Load(),
	}
}

// Sessions is the number of SESSION locks held through this Manager.
func (m *Manager) Sessions() int {
	s, _ := m.reg.counts()
	return s
}

// Waiters is the number of requests queued waiting for a key.
func (m *Manager) Waiters() int {
	_, w := m.reg.counts()
	return w
}

// Shutdown makes every waiting Acquire give up, releases every SESSION
// lock and waits for the background work (renewals, releases) to end. It
// returns ctx.Err() when that does not finish in time. Call it after the
// proxy stopped serving; it is safe to call twice.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.stopOnce.Do(func() { close(m.stopWaits) })
	m.closing.Store(true)
	for _, l := range m.reg.snapshot() {
		if l.session {
			m.bg.Go(func() { m.endSession(l) })
		}
	}
	err := m.bg.Wait(ctx)
	m.stopLife()
	return err
}
