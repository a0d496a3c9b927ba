package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// dialTimeout bounds the dial of a backend connection (TCP, TLS, setup).
const dialTimeout = time.Second

// Status is a simple string reply from a backend (+OK), as opposed to a
// bulk string, which reads as a string.
type Status = resp.Status

// StatusOK is the most common reply.
const StatusOK = resp.StatusOK

// RedisError is an error reply from a backend: "NOSCRIPT No matching ...".
type RedisError = resp.Error

// isRedisError reports a backend's error reply.
func isRedisError(err error) bool {
	var re RedisError
	return errors.As(err, &re)
}

// RedisNode is a Node over one backend. Every command goes through an
// auto-pipelined connection (a backend.Pipe), each kind on one of its own
// so that none waits behind another's load:
//
//   - p: the calls (SetNX, the compare scripts, Eval, Do), shared by all
//     callers;
//   - side: the health probes and the script limit (CONFIG SET), so a
//     probe measures the backend, not the queue of calls in front of it;
//   - bulk: a Do longer than backend.InlineMax (a list push of many
//     values) and the reads by vote (VoteRead: HGETALL, LRANGE, a
//     read-only script, whose replies may be large), out of order with
//     the calls, which would otherwise wait behind their bytes;
//   - kill: SCRIPT KILL's line, authenticated only and kept open ahead
//     (scriptkill.go).
//
// p is dialled at once, kill and bulk when the Redlock starts with a
// script timeout (a read by vote must not need a new connection when the
// backend is at maxclients), side on first use. Scripts run with EVALSHA and fall
// back to EVAL on NOSCRIPT.
//
// Compare-and-delete uses the backend's own command when it has one:
// Redis ≥ 8.4 has DELEX key IFEQ value (and SET key value IFEQ old), Valkey
// ≥ 9.0 has DELIFEQ key value; both answer 1 deleted, 0 not, as delScript
// does. Which one a backend has is read from the INFO that every new
// pipelined connection runs before its first command (setupPipe), and
// stored atomically, since a re-dialled connection may reach an upgraded
// or downgraded server. A native command answered with "unknown command"
// (a downgrade, or a proxy in front that does not pass it) clears the
// capability and the same call runs delScript instead. Compare-and-expire
// has no native form (SET … IFEQ would rewrite the value) and always runs
// expireScript.
type RedisNode struct {
	p, side, bulk, kill *backend.Pipe // see above
	addr                string
	opts                *redis.Options // from the URL: address, TLS, credentials, database
	db                  int            // the database the URL selects

	// native is the backend's compare-and-delete command (a nativeCAD),
	// set from each new pipelined connection's INFO.
	native atomic.Int32
	// scriptLimit is the lua-time-limit in ms each new pipelined
	// connection sets (scriptkill.go); 0: none.
	scriptLimit atomic.Int64

	// Connection reports (see probe.go): the observer and the last report.
	obsMu    sync.Mutex
	observer func(Probe)
	last     Probe
	reported bool
}

// DialNodeTLS builds a RedisNode from "redis://[user:pass@]host:port[/db]",
// "rediss://…" (TLS) or a bare "host:port" (go-redis parses the URL). A
// call is never retried and ends with its context, so a node call cannot
// outlive its share of the validity window. It neither blocks on nor fails
// for an unreachable server; the connections dial in the background. Every
// new connection but the kill line and the bulk one runs INFO before its first command and
// reports it to the observer (SetObserver), so a restarted backend is seen
// before it votes.
//
// tc gives the TLS settings of rediss:// URLs (roots, client certificate,
// …): when tc is not nil it replaces the URL's default (system roots,
// ServerName from the URL's host). The host stays the ServerName unless tc
// sets one, and MinVersion is at least TLS 1.2. Plain redis:// URLs and
// bare host:port never use tc. Every connection of the node uses the
// result.
func DialNodeTLS(rawurl string, tc *tls.Config) (*RedisNode, error) {
	u := rawurl
	if !strings.Contains(u, "://") {
		u = "redis://" + u
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, fmt.Errorf("%w: backend address %q: not a redis URL or host:port", ErrInvalid, redact(rawurl))
	}
	if opts.TLSConfig != nil && tc != nil {
		opts.TLSConfig = mergeTLS(opts.TLSConfig, tc)
	}
	opts.Dialer = backendDialer(opts)
	n := &RedisNode{addr: opts.Addr, opts: opts, db: opts.DB}
	n.p = backend.NewPipe(n.dialPipe(opts), dialTimeout)
	n.side = backend.NewPipe(n.dialPipe(opts), dialTimeout)
	n.bulk = backend.NewPipe(n.dialQuiet(opts), dialTimeout)
	n.kill = backend.NewPipe(n.dialKill, dialTimeout)
	n.p.Prime()
	return n, nil
}

// mergeTLS returns a copy of tc completed from the URL's config: its
// ServerName when tc has none, and the stricter of the minimum versions.
// InsecureSkipVerify from either (the URL's skip_verify=true, or tc) holds.
func mergeTLS(fromURL, tc *tls.Config) *tls.Config {
	out := tc.Clone()
	if out.ServerName == "" {
		out.ServerName = fromURL.ServerName
	}
	out.MinVersion = max(out.MinVersion, fromURL.MinVersion, tls.VersionTLS12)
	out.InsecureSkipVerify = out.InsecureSkipVerify || fromURL.InsecureSkipVerify
	return out
}

// dialPipe dials a pipelined connection (TLS, AUTH, SELECT) and runs the
// connect check (INFO, reported to the observer) before the connection
// carries its first command.
func (n *RedisNode) dialPipe(opts *redis.Options) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		nc, err := opts.Dialer(ctx, opts.Network, opts.Addr)
		if err != nil {
			return nil, err
		}
		if err := n.setupPipe(ctx, nc, opts); err != nil {
			nc.Close()
			return nil, err
		}
		return nc, nil
	}
}

// dialQuiet dials the bulk connection: authenticated and in the URL's
// database, without the INFO the calls' connection reports (the calls'
// and the probes' connections see a restart; the bulk carries reads and
// long commands of nodes the health loop lets vote).
func (n *RedisNode) dialQuiet(opts *redis.Options) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		nc, err := opts.Dialer(ctx, opts.Network, opts.Addr)
		if err != nil {
			return nil, err
		}
		if _, err := connSetup(ctx, nc, opts); err != nil {
			nc.Close()
			return nil, err
		}
		return nc, nil
	}
}

// backendDialer dials a backend for every connection of a node: TCP (or
// a Unix socket), then TLS when opts has a TLS config. It refuses a TCP
// connection to itself: dialling a loopback port that nothing listens on
// can connect the socket to itself (TCP simultaneous open), and that
// socket would then both pass for the backend, echoing our commands as
// replies, and hold the port the restarting backend needs.
func backendDialer(opts *redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: dialTimeout}
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if selfConnected(nc) {
			nc.Close()
			return nil, fmt.Errorf("dial %s %s: the socket connected to itself (nothing listens there)", network, addr)
		}
		if opts.TLSConfig == nil {
			return nc, nil
		}
		tc := tls.Client(nc, opts.TLSConfig.Clone())
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	}
}

// selfConnected reports a TCP connection whose two ends are one address.
func selfConnected(nc net.Conn) bool {
	l, ok1 := nc.LocalAddr().(*net.TCPAddr)
	r, ok2 := nc.RemoteAddr().(*net.TCPAddr)
	return ok1 && ok2 && l.Port == r.Port && l.IP.Equal(r.IP)
}

// setupPipe starts a fresh pipelined connection as connSetup does (AUTH,
// SELECT), sets the script limit and runs the connect check: INFO,
// reported to the observer.
func (n *RedisNode) setupPipe(ctx context.Context, nc net.Conn, opts *redis.Options) error {
	more := [][]any{{"INFO"}}
	if c := n.scriptLimitCmd(); c != nil {
		more = [][]any{c, {"INFO"}}
	}
	replies, err := connSetup(ctx, nc, opts, more...)
	if err != nil {
		return err
	}
	// A backend that refuses the script limit (CONFIG renamed or not
	// allowed) still serves: CheckBackends reports it.
	info := replies[len(replies)-1]
	if e, isErr := info.(RedisError); isErr {
		return fmt.Errorf("connect: %w", e)
	}
	s, _ := info.(string)
	p := parseInfo(s)
	n.native.Store(int32(p.native))
	n.report(p)
	return nil
}

// redact drops the userinfo part of a URL for error messages.
func redact(rawurl string) string {
	scheme, rest, ok := strings.Cut(rawurl, "://")
	if !ok {
		scheme, rest = "", rawurl
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = "***@" + rest[i+1:]
	}
	if scheme == "" {
		return rest
	}
	return scheme + "://" + rest
}

// Connect waits until the pipelined connection is up (after its connect
// check), dialling again after a dial that failed to reach the backend, or
// for ctx. A backend's refusal (WRONGPASS, a bad database) is returned at
// once. Calls do not need it: they dial on demand.
func (n *RedisNode) Connect(ctx context.Context) error {
	for {
		_, err := n.p.Get(ctx)
		var refused RedisError
		if err == nil || ctx.Err() != nil || n.p.IsClosed() || errors.As(err, &refused) {
			return err
		}
		select { // a refused dial fails at once: do not spin on it
		case <-time.After(connectRetry):
		case <-ctx.Done():
			return err
		}
	}
}

// connectRetry is Connect's pause between dials.
const connectRetry = 50 * time.Millisecond

// Addr returns host:port (or the socket path), never credentials.
func (n *RedisNode) Addr() string { return n.addr }

// DB is the database the node's URL selects (0 unless it names one).
func (n *RedisNode) DB() int { return n.db }

// SetNX runs SET key value NX PX ttl, with ttl rounded up to whole
// milliseconds (a key that lives slightly longer is safe; shorter is
// not), in acquireOneScript, which also answers the key's version.
func (n *RedisNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, string, error) {
	v, err := n.runPipe(ctx, &command{kind: callSetNX, keys: []string{key}, value: value, ttl: ttl})
	if err != nil {
		return false, "", err
	}
	g, err := asGrant(v)
	return g.ok, g.ver, err
}

// CompareAndDelete deletes key iff it holds value: with DELEX … IFEQ or
// DELIFEQ when the backend has it (see RedisNode), else with delScript.
func (n *RedisNode) CompareAndDelete(ctx context.Context, key, value string) (bool, error) {
	v, err := n.runPipe(ctx, &command{kind: callCAD, keys: []string{key}, value: value})
	return v == true, err
}

// CompareAndExpire sets key's ttl (rounded up to whole milliseconds) iff
// it holds value.
func (n *RedisNode) CompareAndExpire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	v, err := n.runPipe(ctx, &command{kind: callCAE, keys: []string{key}, value: value, ttl: ttl})
	return v == true, err
}

// Eval runs s with EVALSHA, and with EVAL when the server does not have it
// cached (NOSCRIPT). A nil reply is (nil, nil).
func (n *RedisNode) Eval(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error) {
	return n.runPipe(ctx, &command{kind: callEval, script: s, keys: keys, args: args})
}

// A step is how a pipelined call sends its command: the backend's native
// compare-and-delete, the script by SHA1, or the script's source. A call
// starts at the first step it can use and moves on when the backend says
// it lacks the command (a downgrade) or the script (NOSCRIPT).
type step uint8

const (
	stepNative step = iota
	stepSHA
	stepSource
)

// firstStep is where c starts on this node.
func (n *RedisNode) firstStep(c *command) step {
	if c.kind == callCAD && nativeCAD(n.native.Load()) != nativeNone {
		return stepNative
	}
	return stepSHA
}

// encode appends c's command at step st and returns the step it used: a
// native compare-and-delete whose capability went away since the call
// chose stepNative goes out as a script, and finish must know that. A
// callDo goes out as its raw command, so that the writes of one node
// (SET, PEXPIRE and the scripts) keep their order on one connection.
func (n *RedisNode) encode(b []byte, c *command, st step) ([]byte, step) {
	switch c.kind {
	case callSetNX: // KEYS: the key, its companion and its lock marker
		b = appendScriptName(b, acquireOneScript, st, 3, 2, false)
		b = resp.AppendBulk(b, c.keys[0])
		b = appendPrefixed(b, VersionPrefix, c.keys[0])
		b = appendPrefixed(b, LockMarkPrefix, c.keys[0])
		b = resp.AppendBulk(b, c.value)
		return resp.AppendBulkInt(b, millis(c.ttl)), st
	case callCAD:
		if st == stepNative {
			switch nativeCAD(n.native.Load()) {
			case nativeDelex:
				b = append(b, "*4\r\n$5\r\nDELEX\r\n"...)
				b = resp.AppendBulk(b, c.keys[0])
				b = append(b, "$4\r\nIFEQ\r\n"...)
				return resp.AppendBulk(b, c.value), st
			case nativeDelIfEq:
				b = append(b, "*3\r\n$7\r\nDELIFEQ\r\n"...)
				b = resp.AppendBulk(b, c.keys[0])
				return resp.AppendBulk(b, c.value), st
			}
			st = stepSHA // the capability went away since firstStep
		}
		b = appendScriptName(b, delScript, st, 2, 1, false) // KEYS: the key and its lock marker
		b = resp.AppendBulk(b, c.keys[0])
		b = appendPrefixed(b, LockMarkPrefix, c.keys[0])
		return resp.AppendBulk(b, c.value), st
	case callCAE: // KEYS: the key and its lock marker
		b = appendScriptName(b, expireScript, st, 2, 2, false)
		b = resp.AppendBulk(b, c.keys[0])
		b = appendPrefixed(b, LockMarkPrefix, c.keys[0])
		b = resp.AppendBulk(b, c.value)
		return resp.AppendBulkInt(b, millis(c.ttl)), st
	case callEval:
		b = appendScriptHead(b, c.script, st, c.keys, len(c.args), c.read)
		return resp.AppendArgs(b, c.args...), st
	case callDo:
		return resp.AppendCommand(b, c.args...), st
	}
	return b, st
}

// finish turns the reply to c's command at step st into run's result, or
// names the step to try next: after "unknown command" to a native
// compare-and-delete (whose capability is then cleared), and after NOSCRIPT.
func (n *RedisNode) finish(c *command, st step, v any, err error) (res any, rerr error, next step, again bool) {
	if err != nil {
		switch {
		case st == stepNative && isUnknownCommand(err):
			n.native.Store(int32(nativeNone))
			return nil, nil, stepSHA, true
		case st == stepSHA && c.kind != callDo && isNoScript(err):
			return nil, nil, stepSource, true
		}
		return nil, err, 0, false
	}
	switch c.kind {
	case callSetNX:
		g, err := asGrant(v)
		if g.ver == "" { // the usual grant (or refusal): a bool, boxed without allocating
			return g.ok, err, 0, false
		}
		return g, err, 0, false
	case callCAD, callCAE:
		x, err := asInt(v)
		return x == 1, err, 0, false
	}
	return v, nil, 0, false
}

// pipeOf is the connection c goes on: bulk for a read by vote, else the
// calls' p.
func (n *RedisNode) pipeOf(c *command) *backend.Pipe {
	if c.read {
		return n.bulk
	}
	return n.p
}

// runPipe runs c over the pipelined connection and waits for the result.
func (n *RedisNode) runPipe(ctx context.Context, c *command) (any, error) {
	return n.runPipeFrom(ctx, c, n.firstStep(c))
}

// runPipeFrom is runPipe starting at step st.
func (n *RedisNode) runPipeFrom(ctx context.Context, c *command, st step) (any, error) {
	for {
		sent := st
		v, err := n.pipeOf(c).Do(ctx, func(b []byte) []byte {
			b, sent = n.encode(b, c, st)
			return b
		})
		res, err, next, again := n.finish(c, sent, v, err)
		if !again {
			return res, err
		}
		st = next
	}
}

// send starts c on the pipelined connection without blocking (see
// sender); the reply is finished by onReply on the connection's reader
// goroutine. What cannot be pipelined now (no live connection, a full
// queue) runs in a goroutine.
func (n *RedisNode) send(c *command, deadline time.Time, to target, tag int, lone bool) {
	if !n.sendStep(n.pipeOf(c).Ready(), c, n.firstStep(c), deadline, to, tag, lone) {
		goSend(n, c, deadline, to, tag)
	}
}

// callRequest is a fan-out's call on the pipelined connection: the
// command, how it was sent, and where its result goes. It receives its
// own reply (Receive, on the connection's reader goroutine) and is then
// recycled.
type callRequest struct {
	backend.Request
	node *RedisNode
	call *command
	step step
	to   target
	tag  int
}

var callRequests = sync.Pool{New: func() any {
	r := &callRequest{}
	r.To = r
	return r
}}

// Receive finishes the call (onReply) and recycles the request.
func (r *callRequest) Receive(v any, err error) {
	r.node.onReply(r, v, err)
	r.node, r.call, r.to = nil, nil, nil
	callRequests.Put(r)
}

// sendStep queues c at step st on conn without waiting for the backend;
// false when it could not (no connection, a full queue). With inline, an
// idle connection's command is written by the caller (see
// backend.Conn.TrySend).
func (n *RedisNode) sendStep(conn *backend.Conn, c *command, st step, deadline time.Time, to target, tag int, inline bool) bool {
	if conn == nil {
		return false
	}
	req := callRequests.Get().(*callRequest)
	req.Cmd, st = n.encode(req.Cmd[:0], c, st)
	req.Deadline = deadline
	req.node, req.call, req.step, req.to, req.tag = n, c, st, to, tag
	if conn.TrySend(&req.Request, inline) {
		return true
	}
	req.node, req.call, req.to = nil, nil, nil
	callRequests.Put(req)
	return false
}

// onReply finishes a call started with send. A call that must try again
// (see finish) is sent again from here when that cannot block, else
// finished by a goroutine of the operation (target.spawn).
func (n *RedisNode) onReply(req *callRequest, v any, err error) {
	c, to, tag, deadline := req.call, req.to, req.tag, req.Deadline
	res, err, next, again := n.finish(c, req.step, v, err)
	if !again {
		to.deliver(tag, res, err)
		return
	}
	// Past the deadline the caller may already be undoing this call: a
	// retry sent now could land after the undo.
	if !time.Now().Before(deadline) {
		to.deliver(tag, nil, context.DeadlineExceeded)
		return
	}
	if n.sendStep(n.pipeOf(c).Ready(), c, next, deadline, to, tag, false) { // on the reader: never write here
		return
	}
	to.spawn(func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		res, err := n.runPipeFrom(ctx, c, next)
		to.deliver(tag, res, err)
	})
}

// isNoScript reports a backend's NOSCRIPT reply.
func isNoScript(err error) bool {
	var re RedisError
	return errors.As(err, &re) && strings.HasPrefix(string(re), "NOSCRIPT")
}

// appendScriptHead appends EVALSHA (step stepSHA) or EVAL (stepSource) of
// s with keys, for nargs arguments that the caller appends; with ro, their
// read-only forms EVALSHA_RO and EVAL_RO, under which the backend itself
// refuses every command that writes (or may replicate, PUBLISH).
func appendScriptHead(b []byte, s *script.Script, st step, keys []string, nargs int, ro bool) []byte {
	b = appendScriptName(b, s, st, len(keys), nargs, ro)
	for _, k := range keys {
		b = resp.AppendBulk(b, k)
	}
	return b
}

// appendPrefixed appends prefix+key as one bulk string, without
// concatenating them first.
func appendPrefixed(b []byte, prefix, key string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(prefix)+len(key)), 10)
	b = append(b, '\r', '\n')
	b = append(b, prefix...)
	b = append(b, key...)
	return append(b, '\r', '\n')
}

// appendScriptName is appendScriptHead up to the key count, nkeys: the
// caller appends the keys, then the nargs arguments.
func appendScriptName(b []byte, s *script.Script, st step, nkeys, nargs int, ro bool) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(3+nkeys+nargs), 10)
	switch {
	case st == stepSource && ro:
		b = append(b, "\r\n$7\r\nEVAL_RO\r\n"...)
		b = resp.AppendBulk(b, s.Source())
	case st == stepSource:
		b = append(b, "\r\n$4\r\nEVAL\r\n"...)
		b = resp.AppendBulk(b, s.Source())
	case ro:
		b = append(b, "\r\n$10\r\nEVALSHA_RO\r\n"...)
		b = resp.AppendBulk(b, s.Hash())
	default:
		b = append(b, "\r\n$7\r\nEVALSHA\r\n"...)
		b = resp.AppendBulk(b, s.Hash())
	}
	return resp.AppendBulkInt(b, int64(nkeys))
}

// Do sends one command on the pipelined connection, in order with the
// node's other calls: a nil reply is (nil, nil), a simple string a
// Status, an error reply a RedisError. The command must not block the
// backend (BLPOP and the like take a connection of their own: DialConn).
// It waits until ctx ends: give it a deadline (the pipe has none of its
// own, and a stalled backend never answers). A command longer than
// backend.InlineMax (a list push of many values) goes on the bulk connection
// instead, out of order with the rest: on the calls' connection every
// lock call to this node would wait behind its bytes.
func (n *RedisNode) Do(ctx context.Context, args ...any) (any, error) {
	if argBytes(args) > backend.InlineMax {
		return n.bulk.Do(ctx, func(b []byte) []byte { return resp.AppendCommand(b, args...) })
	}
	return n.runPipe(ctx, &command{kind: callDo, args: args})
}

// argBytes is about the size of args encoded.
func argBytes(args []any) int {
	size := 0
	for _, a := range args {
		switch v := a.(type) {
		case string:
			size += len(v) + 16
		case []byte:
			size += len(v) + 16
		default:
			size += 32
		}
	}
	return size
}

// isUnknownCommand reports a backend's "ERR unknown command …" reply.
func isUnknownCommand(err error) bool {
	var re RedisError
	return errors.As(err, &re) && strings.HasPrefix(string(re), "ERR unknown command")
}

// Close closes the node's connections.
func (n *RedisNode) Close() error {
	for _, p := range []*backend.Pipe{n.p, n.side, n.bulk, n.kill} {
		p.Close()
	}
	return nil
}

// millis is d in whole milliseconds, rounded up.
func millis(d time.Duration) int64 { return ceilMs(d).Milliseconds() }

// pttl converts a PTTL reply: -1 and -2 stay as they are.
func pttl(ms int64) time.Duration {
	if ms < 0 {
		return time.Duration(ms)
	}
	return time.Duration(ms) * time.Millisecond
}

func ceilMs(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}
