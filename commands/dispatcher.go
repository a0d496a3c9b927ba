package commands

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
)

// RedisVersion is the Redis version the proxy advertises in HELLO and INFO.
// Clients pick code paths by it: StackExchange.Redis from 8.4 on releases
// and extends its locks with DELEX … IFEQ and SET … IFEQ, which the proxy
// serves (conditional.go), instead of a WATCH/MULTI transaction
// (docs/compatibility.md says why this version).
const RedisVersion = "8.4.0"

// Options configures a Dispatcher.
type Options struct {
	// Leases carries out every operation on the backends (required): the
	// one door to the keyspace (lease/doc.go).
	Leases        *lease.Manager
	MinTTL        time.Duration
	MaxTTL        time.Duration
	MaxWait       time.Duration
	MaxKeyBytes   int
	MaxValueBytes int
	AllowFlush    bool // FLUSHDB/FLUSHALL reach the backends
	// RecognisedOnly runs only scripts recognised as lock operations
	// (scripts = "recognised") and refuses the rest; otherwise eligible
	// scripts run by vote.
	RecognisedOnly bool
	// OtherDB, when not empty, says which backend uses a database other
	// than 0 ("backend 10.0.0.7:6379 uses database 3"). Scripts that
	// SELECT 0 are then refused: there they would miss the proxy's keys.
	OtherDB     string
	RequirePass string // the password of the user "default"; empty: none
	Users       []User // proxy-level users (users.go); any user makes AUTH required
	// AuthFailLimit failed AUTHs from one network within AuthFailWindow
	// make further AUTHs from it refused until the window has passed
	// (authlimit.go). 0: 10 within 10s; negative: no limit.
	AuthFailLimit  int
	AuthFailWindow time.Duration
	Version        string // the proxy's own version, shown in INFO
	Logger         hclog.Logger
	Now            func() time.Time
	// Observe, when set, is called once per command after it ran with the
	// outcome its handler gave (observe.go says how dialect and outcome are
	// named). nil costs nothing.
	Observe func(cmd, dialect string, result Outcome, d time.Duration)
	// Relay carries pub/sub, key tracking and blocking pops to the
	// backends; nil: one over no backend (subscriptions stay local,
	// tracked keys are invalidated at once, blocking pops fail).
	Relay *relay.Relay
}

// Dispatcher runs commands: it owns the command table and the client
// registry, and hands lock operations to the lease Manager.
type Dispatcher struct {
	opts    Options
	leases  *lease.Manager
	log     hclog.Logger
	now     func() time.Time
	started time.Time
	users   authState    // users and their hashed passwords (users.go)
	limiter *authLimiter // failed AUTHs by source network (authlimit.go)
	table   []Command
	index   map[string]*Command
	scripts scriptCache
	// analyses holds a token per script analysis running (analysis.go);
	// nil: unbounded (a Dispatcher built by hand in tests).
	analyses chan struct{}
	// New scripts refused: past a connection's rate, or waiting for a turn.
	refusedNew, refusedBusy atomic.Uint64
	clients                 clientRegistry
	relay                   *relay.Relay
	tier                    Discovery // nil until SetDiscovery (sentinel.go)
}

// New builds a Dispatcher. opts.Leases is required.
func New(opts Options) *Dispatcher {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxKeyBytes <= 0 {
		opts.MaxKeyBytes = 1024
	}
	if opts.MaxValueBytes <= 0 {
		opts.MaxValueBytes = 4096
	}
	d := &Dispatcher{
		opts:   opts,
		leases: opts.Leases,
		log:    opts.Logger,
		now:    opts.Now,
		table:  served,
		index:  commandIndex,
		relay:  opts.Relay,

		analyses: make(chan struct{}, maxAnalyses),
	}
	if d.relay == nil {
		d.relay = relay.New(relay.Options{Logger: opts.Logger})
	}
	d.started = d.now()
	d.scripts.enforce = enforcement(opts.MaxValueBytes, opts.OtherDB == "")
	var unknown []string
	d.users, unknown = newAuthState(opts.RequirePass, opts.Users)
	for _, u := range unknown {
		d.log.Warn("user lists an unknown command: it never matches", "command", u)
	}
	for _, u := range opts.Users {
		if len(u.Keys) == 0 {
			d.log.Warn("user has no key patterns: every command on a key is refused", "user", u.Name)
		}
	}
	d.limiter = newAuthLimiter(opts.AuthFailLimit, opts.AuthFailWindow)
	return d
}

// NewClient registers a new connection. Without a password or user
// configured the client starts authenticated.
func (d *Dispatcher) NewClient(addr, localAddr string) *Client {
	c := &Client{
		ID:        d.clients.nextID.Add(1),
		Addr:      addr,
		LocalAddr: localAddr,
		Created:   d.now(),
	}
	c.owner = lease.NewOwner(c.ID, lease.OwnerHooks{Name: c.Name, Lost: c.lockLost})
	c.proto.Store(2)
	c.authed.Store(!d.users.required)
	d.clients.add(c)
	return c
}

// CloseClient forgets a connection. It is O(1) in the number of clients.
// Its SESSION locks are released in the background.
func (d *Dispatcher) CloseClient(c *Client) {
	d.clients.remove(c)
	c.endPubsub(true)
	c.endTracking()
	if d.leases != nil {
		d.leases.CloseOwner(c.owner)
	} else {
		c.owner.Close()
	}
}

// ClientCount is the number of connected clients.
func (d *Dispatcher) ClientCount() int { return d.clients.count() }

// run runs one command of the row cmd (nil: not in the table): check
// arity, check auth, check the user's permissions, run the handler.
// parsed is the call's keys when a plan parsed them already.
func (d *Dispatcher) run(ctx context.Context, c *Client, cmd *Command, args [][]byte, parsed parsedCall) Reply {
	if cmd != nil && cmd.keys != nil && !parsed.ok {
		parsed = parsedCall{keys: cmd.keys(args), ok: true}
	}
	if d.opts.Observe != nil {
		return unwrap(d.doObserved(ctx, c, cmd, args, parsed))
	}
	return unwrap(d.do(ctx, c, cmd, args, parsed))
}

// do is run without the observer; its reply may carry an outcome mark
// (withOutcome). p is what was parsed of the call (p.keys: what the
// row's keys column parsed; nil for other rows).
func (d *Dispatcher) do(ctx context.Context, c *Client, cmd *Command, args [][]byte, p parsedCall) Reply {
	keys := p.keys
	if cmd == nil {
		if !c.Authenticated() {
			return errNoAuth
		}
		return c.reject(nil, refusal(args))
	}
	c.touch(cmd.lower, d.now())
	if !cmd.arityOK(len(args)) {
		return c.reject(cmd, Errorf(errWrongArity, cmd.lower))
	}
	if r := cmd.subError(args); r != nil {
		return c.reject(cmd, r)
	}
	if !c.Authenticated() && cmd.Flags&NoAuth == 0 {
		return errNoAuth
	}
	if u := c.user.Load(); u != nil && !u.unrestricted {
		if r := permit(u, cmd, args, keys); r != nil {
			return c.reject(cmd, r)
		}
	}
	if r := c.takeLost(cmd, args, keys); r != nil {
		return r
	}
	if c.tx.multi && cmd.Flags&TxControl == 0 {
		return d.queue(c, cmd, args)
	}
	if m := c.modes.Load(); m != 0 {
		if m&modeSubscribed != 0 && c.Proto() == 2 && cmd.Flags&PubSub == 0 {
			return refuseSubscribed(cmd, args)
		}
		if m&modeTracking != 0 {
			if r, done := d.tracked(ctx, c, cmd, args, p); done {
				return r
			}
		}
	}
	return cmd.call(d, ctx, c, args, p)
}

// refuseSubscribed refuses cmd to a RESP2 client in subscribed mode
// under its full name ('client|id'), after an unknown subcommand or a
// subcommand's wrong arity, which Redis answers first.
func refuseSubscribed(cmd *Command, args [][]byte) Reply {
	name := cmd.lower
	if cmd.subs != nil && len(args) > 1 {
		name += "|" + strings.ToLower(string(args[1]))
	}
	return Errorf("ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", name)
}

// subError is the error of a container command's (CLIENT ID) unknown
// subcommand or its wrong arity, which Redis answers before anything
// else of the call; nil for a known one, and for a row without
// subcommands.
func (c *Command) subError(args [][]byte) Reply {
	if c.subs == nil || len(args) < 2 {
		return nil
	}
	sub := strings.ToUpper(string(args[1]))
	want, known := c.subs[sub]
	switch {
	case !known:
		return Errorf(errUnknownSubcmd, args[1], c.Name)
	case (want > 0 && len(args) != want) || (want < 0 && len(args) < -want):
		return Errorf(errWrongArity, c.lower+"|"+strings.ToLower(sub))
	}
	return nil
}

// reject answers r, the refusal of a command before it ran (unknown, of
// the wrong arity, not permitted), as Redis's rejectCommand does: inside
// MULTI it makes EXEC abort, and a refused EXEC aborts the transaction
// itself, with the reason.
func (c *Client) reject(cmd *Command, r Reply) Reply {
	e, ok := r.(Error)
	switch {
	case !ok:
	case cmd != nil && cmd.Name == "EXEC":
		c.tx.reset()
		return Error("EXECABORT Transaction discarded because of: " + strings.TrimPrefix(string(e), "ERR "))
	case c.tx.multi:
		c.tx.dirty = true
	}
	return r
}

// authenticate logs c in as the user whose name (nil: "default") and
// password match, for AUTH and HELLO AUTH; on failure c keeps its current
// user. A network that failed too often is refused without a check.
func (d *Dispatcher) authenticate(c *Client, name, pass []byte) Reply {
	if !d.users.required { // as Redis's user "default" with nopass, the only user
		if name != nil && string(name) != "default" {
			return errWrongPass
		}
		c.login(nil)
		return nil
	}
	now := d.now()
	if d.limiter.blocked(c.Addr, now) {
		d.log.Debug("authentication refused: too many failures", "client-id", c.ID, "remote-addr", c.Addr)
		return errWrongPass
	}
	acc := d.users.check(name, pass)
	if acc == nil {
		user := "<unknown>" // what was sent may be a password typed in the wrong place
		if known := d.users.lookup(name); known != nil {
			user = known.name
		}
		d.log.Warn("authentication failed", "client-id", c.ID, "remote-addr", c.Addr, "user", user)
		if d.limiter.fail(c.Addr, now) {
			d.log.Warn("authentication rate limited: refusing AUTH from this network",
				"remote-addr", c.Addr, "failures", d.limiter.limit, "window", d.limiter.window)
		}
		return errWrongPass
	}
	c.login(acc)
	return nil
}
