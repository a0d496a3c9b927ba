package relay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Options configure a Relay.
type Options struct {
	// Backends are the lock backends, in the order redlock has them.
	Backends []Backend
	// Quorum is the lock quorum; default len(Backends)/2+1. Key tracking
	// needs registrations on more than len(Backends)−Quorum backends
	// (track.go).
	Quorum int
	// Window is how long the exactly-once matcher remembers a message
	// after its last copy (match.go). Default 5s.
	Window time.Duration
	// ConfirmWait bounds how long Subscribe and Track wait for the
	// backends to confirm. Default 1s.
	ConfirmWait time.Duration
	Logger      hclog.Logger
	Now         func() time.Time
}

// Relay is this proxy's side of what the backends push and block on:
// subscriptions relayed exactly once (hub.go), key tracking with
// invalidations (track.go, bcast.go) and blocking pops (pop.go). It
// opens no connection until a first subscriber, watcher or pop needs one.
type Relay struct {
	backends    []Backend
	quorum      int
	confirmWait time.Duration
	log         hclog.Logger
	now         func() time.Time

	ctx    context.Context // ended by Shutdown
	cancel context.CancelFunc
	bg     redlock.Tracker // the sessions' goroutines, pops in flight
	closed atomic.Bool
	smu    sync.Mutex // spawn against Shutdown

	hub     hub
	track   tracker
	pops    []*popPool
	popping atomic.Int32 // pops holding their connections (MaxPops)
	maxPops int32
	// A user's shares of the tier-wide bounds (UserShare).
	maxUserPrefixes, maxUserTopics int
	refused                        refusals // limits.go
}

// New returns a Relay over backends; it connects to nothing yet.
func New(opts Options) *Relay {
	r := &Relay{
		backends:    append([]Backend(nil), opts.Backends...),
		quorum:      opts.Quorum,
		confirmWait: opts.ConfirmWait,
		log:         opts.Logger,
		now:         opts.Now,
		maxPops:     MaxPops,

		maxUserPrefixes: MaxPrefixes / UserShare,
		maxUserTopics:   MaxTopics / UserShare,
	}
	if r.quorum <= 0 {
		r.quorum = len(r.backends)/2 + 1
	}
	if r.confirmWait <= 0 {
		r.confirmWait = time.Second
	}
	if r.log == nil {
		r.log = hclog.NewNullLogger()
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.hub = hub{r: r, topics: make(map[topic]map[*Subscriber]struct{}), changed: make(chan struct{}),
		m: newMatcher(len(r.backends), opts.Window, 0)}
	r.track.init(r)
	r.pops = make([]*popPool, len(r.backends))
	for i, b := range r.backends {
		r.pops[i] = &popPool{b: b}
	}
	return r
}

// spawn runs a session until Shutdown.
func (r *Relay) spawn(s *session) {
	r.smu.Lock()
	defer r.smu.Unlock()
	if r.closed.Load() {
		return
	}
	r.bg.Go(func() { s.run(r.ctx) })
}

// Shutdown closes every backend connection, ends blocking pops in
// flight, and waits for the relay's goroutines, or for ctx (returning its
// error). Subscribers and watchers get nothing more. It is idempotent.
func (r *Relay) Shutdown(ctx context.Context) error {
	r.smu.Lock()
	r.closed.Store(true)
	r.smu.Unlock()
	r.cancel()
	err := r.bg.Wait(ctx)
	for _, p := range r.pops {
		p.close()
	}
	return err
}

// awaitChange waits until done, called with mu held, reports true:
// it is called again each time the channel it returns (the one closed at
// the next change) is closed. After wait it gives up, timedOut and no
// error; when ctx ends first, ctx's error.
func awaitChange(ctx context.Context, wait time.Duration, mu *sync.Mutex, done func() (bool, chan struct{})) (timedOut bool, err error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		mu.Lock()
		ok, ch := done()
		mu.Unlock()
		if ok {
			return false, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
			return true, nil
		}
	}
}
