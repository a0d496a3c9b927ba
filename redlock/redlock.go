package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Sentinel errors. Operations return them wrapped in a *QuorumError (or,
// for ErrInvalid, with a short reason), so test with errors.Is.
var (
	// ErrHeld: the lock could not be acquired because enough nodes answered
	// that the key already exists (another owner holds it).
	ErrHeld = errors.New("lock held by another owner")
	// ErrNoQuorum: too few nodes gave a definite answer to decide, or a
	// quorum granted the lock but its validity was used up on the way.
	ErrNoQuorum = errors.New("too few backends answered")
	// ErrDisagree: a quorum of nodes answered a vote, but no quorum of
	// them gave the same reply. It is a kind of ErrNoQuorum (errors.Is
	// reports both).
	ErrDisagree error = disagreeError{}
	// ErrNotHeld: release or extend found the lock not held by this token
	// (expired, or owned by someone else) on enough nodes.
	ErrNotHeld = errors.New("lock not held")
	// ErrInvalid: an empty key or token, a ttl below one millisecond, or
	// a backend address that is not a URL (backend.ErrInvalid).
	ErrInvalid = backend.ErrInvalid
)

// Status is a simple string reply from a backend (+OK), as opposed to a
// bulk string, which reads as a string.
type Status = resp.Status

// RedisError is an error reply from a backend: "NOSCRIPT No matching ...".
type RedisError = resp.Error

// NodeError is the failure of one node in one operation.
type NodeError struct {
	Addr string
	Err  error
}

func (e *NodeError) Error() string { return "node " + e.Addr + ": " + e.Err.Error() }

func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError reports a failed quorum operation with its counts. Kind is
// one of ErrNoQuorum, ErrHeld or ErrNotHeld and is what Unwrap returns.
// Errs holds the *NodeError values seen before the decision; they are for
// logging and are deliberately left out of Error(), which is safe to show
// to clients.
type QuorumError struct {
	Kind     error
	Answered int // nodes that gave a definite answer (yes or no)
	Granted  int // nodes that said yes
	Nodes    int
	Quorum   int
	Errs     []error
}

func (e *QuorumError) Error() string {
	switch {
	case e.Granted >= e.Quorum:
		return fmt.Sprintf("%v: validity used up (%d of %d backends agreed, need %d)",
			e.Kind, e.Granted, e.Nodes, e.Quorum)
	case errors.Is(e.Kind, ErrDisagree):
		return fmt.Sprintf("%v: %d of %d agree, need %d", e.Kind, e.Granted, e.Nodes, e.Quorum)
	case errors.Is(e.Kind, ErrNoQuorum):
		return fmt.Sprintf("%v: only %d of %d backends answered, need %d",
			e.Kind, e.Answered, e.Nodes, e.Quorum)
	default:
		return fmt.Sprintf("%v: %d of %d backends agreed, need %d",
			e.Kind, e.Granted, e.Nodes, e.Quorum)
	}
}

func (e *QuorumError) Unwrap() error { return e.Kind }

type disagreeError struct{}

func (disagreeError) Error() string { return "backends disagree" }

// Is makes ErrDisagree a kind of ErrNoQuorum.
func (disagreeError) Is(target error) bool { return target == ErrNoQuorum }

// NodeErrors returns the *NodeError values behind the failure.
func (e *QuorumError) NodeErrors() []error { return e.Errs }

// Node is one backend master.
type Node interface {
	// Addr names the node for logs and errors (host:port, no secrets).
	Addr() string
	// SetNX does SET key value NX PX ttl: true when set, false when the
	// key exists. Where it set the key, version is the register version
	// (register.go) the key's companion recorded then, "" without one.
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (ok bool, version string, err error)
	// CompareAndDelete deletes key iff it holds value: true when deleted.
	CompareAndDelete(ctx context.Context, key, value string) (bool, error)
	// CompareAndExpire sets key's ttl iff it holds value: true when done.
	CompareAndExpire(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
	// Eval runs one of this package's scripts: EVALSHA, then EVAL on
	// NOSCRIPT. A nil script reply is returned as (nil, nil), not an error.
	Eval(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error)
	// Do sends one raw command (FLUSHDB, ...). A nil reply is (nil, nil).
	Do(ctx context.Context, args ...any) (any, error)
	Close() error
}

// Options tune a Redlock. The zero value is usable.
type Options struct {
	// NodeTimeout bounds each node call (also capped at 5% of the ttl).
	// Default 50ms.
	NodeTimeout time.Duration
	// DriftFactor is the clock drift allowed per unit of ttl. Zero or
	// negative means the default, 0.01.
	DriftFactor float64
	// RollbackTimeout bounds each background undo of a failed acquire.
	// Default 4×NodeTimeout.
	RollbackTimeout time.Duration
	// Now is the clock validity is measured with; it must be monotonic.
	// Default time.Now.
	Now func() time.Time
	// Logger receives node failures. Default: discard.
	Logger hclog.Logger
	// Events receives the notable backend events (down, up, quarantine,
	// clock jump, script killed) for the status page. Default: a ring of
	// the Redlock's own (Events).
	Events *Events

	// Backend health (health.go, probe.go).

	// MaxTTL bounds every lock's ttl; a restarted backend, one fresh at
	// start, or one whose clock jumped does not vote for MaxTTL +
	// MaxTTL×DriftFactor + 2ms. Zero disables quarantine.
	MaxTTL time.Duration
	// TrustFreshBackends skips the quarantine of backends whose uptime at
	// the first observation is below the quarantine length.
	TrustFreshBackends bool
	// DownAfter consecutive failed calls mark a node down (not called)
	// until a probe answers; only while RunHealth runs. Default 3.
	DownAfter int
	// HealthInterval is RunHealth's period. Default 1s.
	HealthInterval time.Duration
	// ReleaseNotices makes every release and delete publish a notice on
	// each backend, on the key's NoticeChannel (notice.go), for the
	// waiters of other proxies.
	ReleaseNotices bool
	// Mirror, when set, is a required participant beside the quorum in
	// every lock operation: the single Redis the clients locked on before
	// they moved to these nodes, until the move is over (package migrate).
	Mirror Mirror
	// ScriptTimeout bounds how long a script by vote may run on a
	// backend before it is stopped with SCRIPT KILL (scriptkill.go); it
	// is also each vote's per-node deadline when above NodeTimeout, and
	// the busy-script threshold the proxy sets on the backends. Default
	// DefaultScriptTimeout.
	ScriptTimeout time.Duration

	// Borrowed: the nodes are not ours to tune or to stop scripts on
	// (migrate_from's old instance, which clients that have not moved
	// still use): no lua-time-limit is set there, no SCRIPT KILL sent, and
	// their number is not ours to warn about.
	Borrowed bool
	// ObserveCall, when set, is told the outcome and duration of every
	// backend call (metrics); it must be cheap and must not block.
	ObserveCall func(addr string, elapsed time.Duration, err error)
}

// Lock is a lock held on a quorum.
type Lock struct {
	// Key is Keys[0]; Keys are all the keys the lock holds.
	Key   string
	Keys  []string
	Token string
	// Validity is how long the lock is safe to use, counted from the
	// moment Acquire returned at the latest.
	Validity time.Duration
	// Granted is the number of nodes that had said yes when the decision
	// was made; more may have said yes afterwards.
	Granted int
	Fence   int64 // fencing token (AcquireFenced only)
}

// Redlock runs quorum lock operations over a fixed set of nodes. It is safe
// for concurrent use.
type Redlock struct {
	nodes           []Node
	senders         []backend.Sender // one per node: how a fan-out reaches it
	quorum          int
	nodeTimeout     time.Duration
	rollbackTimeout time.Duration
	drift           float64
	now             func() time.Time
	log             hclog.Logger
	bg              Tracker
	gate            keyGate
	waiting         atomic.Int32 // fan-outs between launch and the return of wait
	observeCall     func(addr string, elapsed time.Duration, err error)
	notices         atomic.Bool  // Options.ReleaseNotices, until checkNotices turns them off
	fenceHWM        atomic.Int64 // the highest fence this process issued or learned (fence.go)
	mirror          Mirror       // Options.Mirror, or noMirror

	// Backend health (health.go): one per node, in node order.
	health         []*nodeHealth
	loops          atomic.Int32 // RunHealth loops running: fast failure needs one
	downs          atomic.Int32 // nodes marked down (setDown)
	maxTTL         time.Duration
	trustFresh     bool
	downAfter      int
	healthInterval time.Duration
	scriptTimeout  time.Duration
	borrowed       bool // Options.Borrowed
	events         *Events
}

// Events is the ring the Redlock records its notable events in
// (Options.Events); the layers above add theirs to it.
func (r *Redlock) Events() *Events { return r.events }

// New returns a Redlock over nodes. It does not contact them. Fewer than
// three nodes, or an even number, is allowed but logged as a warning; zero
// nodes is allowed and every operation fails with ErrNoQuorum.
func New(nodes []Node, opts Options) *Redlock {
	r := &Redlock{
		nodes:           append([]Node(nil), nodes...),
		quorum:          len(nodes)/2 + 1,
		nodeTimeout:     opts.NodeTimeout,
		rollbackTimeout: opts.RollbackTimeout,
		drift:           opts.DriftFactor,
		now:             opts.Now,
		log:             opts.Logger,
		maxTTL:          opts.MaxTTL,
		trustFresh:      opts.TrustFreshBackends,
		downAfter:       opts.DownAfter,
		healthInterval:  opts.HealthInterval,
		observeCall:     opts.ObserveCall,
		scriptTimeout:   opts.ScriptTimeout,
		borrowed:        opts.Borrowed,
		mirror:          opts.Mirror,
		events:          opts.Events,
	}
	if r.events == nil {
		r.events = &Events{}
	}
	if r.mirror == nil {
		r.mirror = noMirror{}
	}
	if r.scriptTimeout <= 0 {
		r.scriptTimeout = DefaultScriptTimeout
	}
	if r.nodeTimeout <= 0 {
		r.nodeTimeout = 50 * time.Millisecond
	}
	if r.rollbackTimeout <= 0 {
		r.rollbackTimeout = 4 * r.nodeTimeout
	}
	if r.drift <= 0 {
		r.drift = 0.01
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = hclog.NewNullLogger()
	}
	r.senders = make([]backend.Sender, len(r.nodes))
	for i, n := range r.nodes {
		r.senders[i] = senderOf(n)
		if k, ok := n.(scriptKiller); ok && !r.borrowed {
			k.SetScriptLimit(r.scriptTimeout)
			k.OpenAhead()
		}
	}
	if n := len(nodes); (n < 3 || n%2 == 0) && !r.borrowed {
		r.log.Warn("weak node count: use an odd number of at least 3", "nodes", n, "quorum", r.quorum)
	}
	r.initHealth()
	r.notices.Store(opts.ReleaseNotices)
	return r
}

// Quorum is the number of nodes that must agree: len(nodes)/2+1.
func (r *Redlock) Quorum() int { return r.quorum }

// Nodes returns a copy of the node list.
func (r *Redlock) Nodes() []Node { return append([]Node(nil), r.nodes...) }

// NodeTimeout is the deadline of one node call (Options.NodeTimeout): a
// caller of a node's Do gives it at most this long.
func (r *Redlock) NodeTimeout() time.Duration { return r.nodeTimeout }

// RollbackTimeout bounds each undo of a failed acquire
// (Options.RollbackTimeout).
func (r *Redlock) RollbackTimeout() time.Duration { return r.rollbackTimeout }

// Close waits for the background work of earlier operations (rollbacks of
// failed acquires, node calls still in flight after an early decision),
// then its Mirror's. It returns ctx.Err() if ctx ends first. It is idempotent, does not close the
// nodes, and does not stop the Redlock: operations started later add new
// background work, which a later Close waits for.
func (r *Redlock) Close(ctx context.Context) error {
	if err := r.bg.Wait(ctx); err != nil {
		return err
	}
	return r.mirror.Close(ctx)
}

// CloseNodes closes every node, its Mirror's too, and joins their errors.
func (r *Redlock) CloseNodes() error {
	errs := []error{r.mirror.CloseNodes()}
	for _, n := range r.nodes {
		if err := n.Close(); err != nil {
			errs = append(errs, &NodeError{Addr: n.Addr(), Err: err})
		}
	}
	return errors.Join(errs...)
}

// Connect waits, in parallel, until every node that keeps a connection
// (backend.RedisNode) has it up, or until ctx ends, and returns how many nodes are
// connected. Operations do not need it, since nodes dial on demand, but
// the first one then waits for the dials within its own short deadline.
func (r *Redlock) Connect(ctx context.Context) int {
	var wg sync.WaitGroup
	var up atomic.Int32
	for _, n := range r.nodes {
		c, ok := n.(interface{ Connect(context.Context) error })
		if !ok {
			up.Add(1)
			continue
		}
		wg.Go(func() {
			if c.Connect(ctx) == nil {
				up.Add(1)
			}
		})
	}
	wg.Wait()
	return int(up.Load())
}

// Tracker owns background work: Go starts a goroutine it owns, Add and
// Done bracket work that runs elsewhere (a fan-out's pipelined calls, a
// client's command), and Wait waits until none is left. Unlike sync.WaitGroup it allows new
// work to start while someone is waiting. The count is atomic; the lock is
// taken only when it drops to zero and by Wait. The zero value is ready
// to use.
type Tracker struct {
	n    atomic.Int64
	mu   sync.Mutex
	idle chan struct{} // made by Wait while n > 0, closed when n drops to zero
}

// Go runs f in a goroutine the tracker owns.
func (t *Tracker) Go(f func()) {
	t.Add()
	go func() {
		defer t.Done()
		f()
	}()
}

// Add counts one piece of work until its Done.
func (t *Tracker) Add() { t.n.Add(1) }

// Done ends one piece of work.
func (t *Tracker) Done() {
	if t.n.Add(-1) != 0 {
		return
	}
	t.mu.Lock()
	if t.idle != nil && t.n.Load() == 0 {
		close(t.idle)
		t.idle = nil
	}
	t.mu.Unlock()
}

// Wait returns when no work of the tracker is left, or ctx's error.
func (t *Tracker) Wait(ctx context.Context) error {
	t.mu.Lock()
	if t.n.Load() == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	idle := t.idle
	t.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
