package commands

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
)

// Client is the state of one client connection. proxy creates it with
// Dispatcher.NewClient and forgets it with Dispatcher.CloseClient. Its
// commands run one at a time on the connection's goroutine; the fields
// other connections read (CLIENT LIST, INFO) are guarded.
type Client struct {
	ID        int64
	Addr      string
	LocalAddr string
	Created   time.Time

	authed     atomic.Bool
	user       atomic.Pointer[account] // nil: no users configured, or not logged in
	proto      atomic.Int32
	closeAfter bool // QUIT: close once the reply is written
	tx         txState
	// readTx: a MULTI is open as far as the connection has read (PlanFor,
	// on the connection's reader only); tx.multi is the same once the
	// commands read so far have run.
	readTx bool

	// What the relay sends it (pubsub.go, tracking.go): modes says at
	// once whether either is in use; pmu guards ps and gone.
	modes   atomic.Uint32
	pmu     sync.Mutex
	ps      *pubsubState
	gone    bool // CloseClient ran: nothing more is set up
	trk     atomic.Pointer[trackState]
	caching atomic.Int32 // CLIENT CACHING YES|NO for the next command
	replies atomic.Int32 // CLIENT REPLY: repliesOn, repliesOff, or repliesSkip (the next command's)
	// blocked ends the blocking pop in flight, for CLIENT UNBLOCK (lists.go).
	blocked atomic.Pointer[context.CancelCauseFunc]

	// The connection as a holder of locks, and what reaches it outside
	// its replies (hooks.go).
	owner *lease.Owner
	hooks atomic.Pointer[Hooks]
	lostN atomic.Int32
	smu   sync.Mutex
	lost  map[string]string // key → why it was lost (RESP2: told on the next command)

	// scriptsCoolUntil: unix nanoseconds until which its scripts by vote
	// are refused, after one ran past script_timeout (scripts.go).
	scriptsCoolUntil atomic.Int64
	// newScripts counts the new script texts it had analysed this second
	// (analysis.go).
	newScripts rateWindow

	mu      sync.Mutex
	name    string
	libName string
	libVer  string
	lastCmd string
	lastAt  time.Time
}

// Authenticated reports whether the client may run commands beyond AUTH.
func (c *Client) Authenticated() bool { return c.authed.Load() }

// User is the name of the user the client is logged in as ("default"
// when no user is configured).
func (c *Client) User() string {
	if u := c.user.Load(); u != nil {
		return u.name
	}
	return "default"
}

// login records a successful AUTH as acc (nil: no users configured).
func (c *Client) login(acc *account) {
	c.user.Store(acc)
	c.authed.Store(true)
}

// logout forgets the user; the client stays authenticated only when no
// credential is required.
func (c *Client) logout(required bool) {
	c.user.Store(nil)
	c.authed.Store(!required)
}

// Proto is the RESP version the client speaks: 2 or 3.
func (c *Client) Proto() int { return int(c.proto.Load()) }

// CloseRequested reports whether the connection must close after the reply.
func (c *Client) CloseRequested() bool { return c.closeAfter }

// Name is the name set by CLIENT SETNAME or HELLO SETNAME.
func (c *Client) Name() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.name
}

func (c *Client) setName(name string) {
	c.mu.Lock()
	c.name = name
	c.mu.Unlock()
}

// touch records the command about to run; name is the table's lower-case
// name (a constant: no allocation).
func (c *Client) touch(name string, now time.Time) {
	c.mu.Lock()
	c.lastCmd = name
	c.lastAt = now
	c.mu.Unlock()
}

// infoLine renders the client as CLIENT INFO / CLIENT LIST do.
// Its flags are P (subscribed), t (tracking) or N (neither).
func (c *Client) infoLine(now time.Time) string {
	var subs [3]int // by relay.Kind
	c.pmu.Lock()
	if c.ps != nil {
		for k, names := range c.ps.names {
			subs[k] = len(names)
		}
	}
	c.pmu.Unlock()
	flags, redir := "", int64(-1)
	if c.subscribed() {
		flags += "P"
	}
	if t := c.trk.Load(); t != nil {
		flags += "t"
		redir = t.redirect
	}
	if flags == "" {
		flags = "N"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	idle := time.Duration(0)
	if !c.lastAt.IsZero() {
		idle = now.Sub(c.lastAt)
	}
	cmd := c.lastCmd
	if cmd == "" {
		cmd = "NULL" // Redis's word for a client that ran no command yet
	}
	// Every field of Redis's line, in its order (redis-py's client_info()
	// reads the buffer sizes as integers); the proxy's buffers are not
	// Redis's, so those are 0.
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=-1 name=%s age=%d idle=%d flags=%s db=0 sub=%d psub=%d ssub=%d multi=-1 watch=0 "+
		"qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=%s user=%s redir=%d resp=%d lib-name=%s lib-ver=%s",
		c.ID, c.Addr, c.LocalAddr, c.name, int64(now.Sub(c.Created)/time.Second), int64(idle/time.Second), flags,
		subs[relay.Channel], subs[relay.Pattern], subs[relay.Shard], cmd, c.User(), redir, c.Proto(), c.libName, c.libVer)
}

// clientRegistry holds the connected clients for CLIENT LIST and INFO.
type clientRegistry struct {
	nextID atomic.Int64
	mu     sync.Mutex
	m      map[int64]*Client
}

func (r *clientRegistry) add(c *Client) {
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[int64]*Client)
	}
	r.m[c.ID] = c
	r.mu.Unlock()
}

func (r *clientRegistry) remove(c *Client) {
	r.mu.Lock()
	delete(r.m, c.ID)
	r.mu.Unlock()
}

func (r *clientRegistry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// snapshot returns the clients ordered by id.
func (r *clientRegistry) snapshot() []*Client {
	r.mu.Lock()
	out := make([]*Client, 0, len(r.m))
	for _, c := range r.m {
		out = append(out, c)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b *Client) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
