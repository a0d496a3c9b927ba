package commands

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// RedisVersion is the Redis version the proxy advertises in HELLO and INFO.
// Clients pick code paths by it (StackExchange.Redis, for one).
const RedisVersion = "7.2.4"

// Options configures a Dispatcher.
type Options struct {
	Locker        *redlock.Redlock
	MinTTL        time.Duration
	MaxTTL        time.Duration
	DefaultTTL    time.Duration
	MaxWait       time.Duration
	MaxKeyBytes   int
	MaxValueBytes int
	AllowFlush    bool   // FLUSHDB/FLUSHALL reach the backends
	RequirePass   string // empty: no authentication
	Version       string // the proxy's own version, shown in INFO
	Logger        hclog.Logger
	Now           func() time.Time
	MaxHold       time.Duration // SESSION locks stop renewing after this; 0: never
	NodeTimeout   time.Duration // bounds LOCKINFO's per-backend reads
	// Observe, when set, is called once per command after it ran (observe.go
	// says how dialect and result are named). nil costs nothing.
	Observe func(cmd, dialect, result string, d time.Duration)
}

// Dispatcher runs commands: it owns the command table, the client registry
// and the lock statistics.
type Dispatcher struct {
	opts    Options
	locker  *redlock.Redlock
	log     hclog.Logger
	now     func() time.Time
	started time.Time
	passSum [32]byte // sha256 of requirepass, for constant-time comparison
	table   []Command
	index   map[string]*Command
	scripts *scriptIndex
	clients clientRegistry
	stats   lockStats

	lockState // locks granted here, waiters, sessions (registry.go, session.go)
}

// New builds a Dispatcher. opts.Locker is required.
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
		opts:    opts,
		locker:  opts.Locker,
		log:     opts.Logger,
		now:     opts.Now,
		table:   table,
		index:   commandIndex,
		scripts: newScriptIndex(catalog),
	}
	d.started = d.now()
	d.passSum = sha256.Sum256([]byte(opts.RequirePass))
	d.initLockState()
	return d
}

// NewClient registers a new connection. Without a password configured the
// client starts authenticated.
func (d *Dispatcher) NewClient(addr, localAddr string) *Client {
	c := &Client{
		ID:        d.clients.nextID.Add(1),
		Addr:      addr,
		LocalAddr: localAddr,
		Created:   d.now(),
		done:      make(chan struct{}),
	}
	c.proto.Store(2)
	c.authed.Store(d.opts.RequirePass == "")
	d.clients.add(c)
	return c
}

// CloseClient forgets a connection. It is O(1) in the number of clients.
// Its SESSION locks are released in the background.
func (d *Dispatcher) CloseClient(c *Client) {
	d.clients.remove(c)
	d.closeSessions(c)
}

// ClientCount is the number of connected clients.
func (d *Dispatcher) ClientCount() int { return d.clients.count() }

// Do runs one command: look up, check arity, check auth, run. args[0] is
// the command name in any case.
func (d *Dispatcher) Do(ctx context.Context, c *Client, args [][]byte) Reply {
	if d.opts.Observe != nil && len(args) > 0 {
		return d.doObserved(ctx, c, args)
	}
	return d.do(ctx, c, args)
}

// do is Do without the observer.
func (d *Dispatcher) do(ctx context.Context, c *Client, args [][]byte) Reply {
	if len(args) == 0 {
		return nil
	}
	cmd := d.lookup(args[0])
	if cmd == nil {
		if !c.Authenticated() {
			return errNoAuth
		}
		return unknownCommand(args)
	}
	c.touch(cmd.lower, d.now())
	if !cmd.arityOK(len(args)) {
		return Errorf(errWrongArity, cmd.lower)
	}
	if !c.Authenticated() && cmd.Flags&NoAuth == 0 {
		return errNoAuth
	}
	if r := c.takeLost(cmd, args); r != nil {
		return r
	}
	if c.tx.multi && cmd.Flags&TxControl == 0 {
		return d.queue(c, cmd, args)
	}
	if len(c.subs) > 0 && c.Proto() == 2 && cmd.Flags&PubSub == 0 {
		return Errorf("ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", cmd.lower)
	}
	return cmd.run(d, ctx, c, args)
}

// checkPassword compares in constant time, whatever the lengths.
func (d *Dispatcher) checkPassword(user, pass []byte) bool {
	if d.opts.RequirePass == "" {
		return true
	}
	sum := sha256.Sum256(pass)
	okPass := subtle.ConstantTimeCompare(sum[:], d.passSum[:]) == 1
	okUser := user == nil || strings.EqualFold(string(user), "default")
	return okPass && okUser
}
