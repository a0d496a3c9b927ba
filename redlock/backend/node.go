package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// DialTimeout bounds the dial of a backend connection (TCP, TLS, setup).
const DialTimeout = time.Second

// ErrInvalid: a backend address that is not a redis URL or host:port.
var ErrInvalid = errors.New("invalid argument")

// RedisNode is a Node (package redlock) over one backend. Every command goes through an
// auto-pipelined connection (a Pipe), each kind on one of its own
// so that none waits behind another's load:
//
//   - p: the calls (SetNX, the compare scripts, Eval, Do), shared by all
//     callers;
//   - side: the health probes and the script limit (CONFIG SET), so a
//     probe measures the backend, not the queue of calls in front of it;
//   - bulk: a Do longer than InlineMax (a list push of many
//     values) and the reads by vote (VoteRead: HGETALL, LRANGE, a
//     read-only script, whose replies may be large), out of order with
//     the calls, which would otherwise wait behind their bytes;
//   - kill: SCRIPT KILL's line, authenticated only and kept open ahead
//     (kill.go).
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
	p, side, bulk, kill *Pipe          // see above
	opts                *redis.Options // from the URL: address, TLS, credentials, database

	// native is the backend's compare-and-delete command (a nativeCAD),
	// set from each new pipelined connection's INFO.
	native atomic.Int32
	// scriptLimit is the lua-time-limit in ms each new pipelined
	// connection sets (kill.go); 0: none.
	scriptLimit atomic.Int64

	// noReadOnly sends reads by vote as EVALSHA, not EVALSHA_RO
	// (NoReadOnlyScripts).
	noReadOnly bool

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
	n := &RedisNode{opts: opts}
	n.p = NewPipe(dialer(opts, n.setupPipe), DialTimeout)
	n.side = NewPipe(dialer(opts, n.setupPipe), DialTimeout)
	n.bulk = NewPipe(dialer(opts, n.setupQuiet), DialTimeout)
	n.kill = NewPipe(dialer(opts, n.setupKill), DialTimeout)
	n.p.Prime()
	return n, nil
}

// Connect waits until the pipelined connection is up (after its connect
// check), dialling again after a dial that failed to reach the backend, or
// for ctx. A backend's refusal (WRONGPASS, a bad database) is returned at
// once. Calls do not need it: they dial on demand.
func (n *RedisNode) Connect(ctx context.Context) error {
	for {
		_, err := n.p.Get(ctx)
		var refused resp.Error
		if err == nil || ctx.Err() != nil || n.p.IsClosed() || errors.As(err, &refused) {
			return err
		}
		select { // a refused dial fails at once: pause, do not spin on it
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// Ready returns the calls' pipelined connection while it is up, else nil.
func (n *RedisNode) Ready() *Conn { return n.p.Ready() }

// Addr returns host:port (or the socket path), never credentials.
func (n *RedisNode) Addr() string { return n.opts.Addr }

// DB is the database the node's URL selects (0 unless it names one).
func (n *RedisNode) DB() int { return n.opts.DB }

// SetNX runs SET key value NX PX ttl, with ttl rounded up to whole
// milliseconds (a key that lives slightly longer is safe; shorter is
// not), in acquireOneScript, which also answers the key's version.
func (n *RedisNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, string, error) {
	v, err := n.Run(ctx, &Command{Kind: CallSetNX, Keys: []string{key}, Value: value, TTL: ttl})
	if err != nil {
		return false, "", err
	}
	return Granted(v)
}

// Granted reads an acquire script's reply: 0 not set, 1 set, else set
// with the versions the companions recorded.
func Granted(v any) (ok bool, version string, err error) {
	switch ver, _ := v.(string); {
	case v == int64(0):
		return false, "", nil
	case v == int64(1):
		return true, "", nil
	case ver != "":
		return true, ver, nil
	}
	return false, "", fmt.Errorf("unexpected reply %v, want an acquire's", v)
}

// CompareAndDelete deletes key iff it holds value: with DELEX … IFEQ or
// DELIFEQ when the backend has it (see RedisNode), else with delScript.
func (n *RedisNode) CompareAndDelete(ctx context.Context, key, value string) (bool, error) {
	v, err := n.Run(ctx, &Command{Kind: CallCAD, Keys: []string{key}, Value: value})
	return v == true, err
}

// CompareAndExpire sets key's ttl (rounded up to whole milliseconds) iff
// it holds value.
func (n *RedisNode) CompareAndExpire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	v, err := n.Run(ctx, &Command{Kind: CallCAE, Keys: []string{key}, Value: value, TTL: ttl})
	return v == true, err
}

// Eval runs s with EVALSHA, and with EVAL when the server does not have it
// cached (NOSCRIPT). A nil reply is (nil, nil).
func (n *RedisNode) Eval(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error) {
	return n.Run(ctx, &Command{Kind: CallEval, Script: s, Keys: keys, Args: args})
}

// The scripts of SetNX and the compare calls, written as package
// redlock's (scripts.go), write the lock's marker beside the key
// (marker.go) and SetNX's reads the version its companion recorded.

// VersionPrefix starts each key's version companion (package redlock,
// register.go), under the prefix the proxy reserves.
const VersionPrefix = "redlock-proxy:ver:"

// delScript deletes KEYS[1] iff it holds ARGV[1], and then its lock
// marker KEYS[2]: 1 deleted, 0 not.
var delScript = script.New(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	redis.call("DEL", KEYS[2])
	return redis.call("DEL", KEYS[1])
end
return 0`)

// expireScript sets KEYS[1]'s ttl to ARGV[2] ms iff it holds ARGV[1],
// and its lock marker KEYS[2]'s: 1 done, 0 not.
var expireScript = script.New(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	redis.call("SET", KEYS[2], redis.sha1hex(ARGV[1]), "PX", ARGV[2])
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)

// acquireOneScript is SET KEYS[1] ARGV[1] NX PX ARGV[2] that, where it
// sets the key, writes its lock marker KEYS[3] and answers 0 where it
// does not set it, else the version of its companion, KEYS[2]: "counter
// writer", or 1 without one (an integer that costs no allocation to read).
var acquireOneScript = script.New(`
if not redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return 0
end
redis.call("SET", KEYS[3], redis.sha1hex(ARGV[1]), "PX", ARGV[2])
local c = redis.call("GET", KEYS[2])
return c and string.match(c, "^%d+ %S+") or 1`)

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
func (n *RedisNode) firstStep(c *Command) step {
	if c.Kind == CallCAD && nativeCAD(n.native.Load()) != nativeNone {
		return stepNative
	}
	return stepSHA
}

// encode appends c's command at step st and returns the step it used: a
// native compare-and-delete whose capability went away since the call
// chose stepNative goes out as a script, and finish must know that. A
// CallDo goes out as its raw command, so that the writes of one node
// (SET, PEXPIRE and the scripts) keep their order on one connection.
func (n *RedisNode) encode(b []byte, c *Command, st step) ([]byte, step) {
	switch c.Kind {
	case CallSetNX: // KEYS: the key, its companion and its lock marker
		b = appendScriptName(b, acquireOneScript, st, 3, 2, false)
		b = resp.AppendBulk(b, c.Keys[0])
		b = appendPrefixed(b, VersionPrefix, c.Keys[0])
		b = appendPrefixed(b, script.LockMarkPrefix, c.Keys[0])
		b = resp.AppendBulk(b, c.Value)
		return resp.AppendBulkInt(b, Millis(c.TTL)), st
	case CallCAD:
		if st == stepNative {
			switch nativeCAD(n.native.Load()) {
			case nativeDelex:
				b = append(b, "*4\r\n$5\r\nDELEX\r\n"...)
				b = resp.AppendBulk(b, c.Keys[0])
				b = append(b, "$4\r\nIFEQ\r\n"...)
				return resp.AppendBulk(b, c.Value), st
			case nativeDelIfEq:
				b = append(b, "*3\r\n$7\r\nDELIFEQ\r\n"...)
				b = resp.AppendBulk(b, c.Keys[0])
				return resp.AppendBulk(b, c.Value), st
			}
			st = stepSHA // the capability went away since firstStep
		}
		b = appendScriptName(b, delScript, st, 2, 1, false) // KEYS: the key and its lock marker
		b = resp.AppendBulk(b, c.Keys[0])
		b = appendPrefixed(b, script.LockMarkPrefix, c.Keys[0])
		return resp.AppendBulk(b, c.Value), st
	case CallCAE: // KEYS: the key and its lock marker
		b = appendScriptName(b, expireScript, st, 2, 2, false)
		b = resp.AppendBulk(b, c.Keys[0])
		b = appendPrefixed(b, script.LockMarkPrefix, c.Keys[0])
		b = resp.AppendBulk(b, c.Value)
		return resp.AppendBulkInt(b, Millis(c.TTL)), st
	case CallEval:
		b = appendScriptName(b, c.Script, st, len(c.Keys), len(c.Args), c.Read && !n.noReadOnly)
		for _, k := range c.Keys {
			b = resp.AppendBulk(b, k)
		}
		return resp.AppendArgs(b, c.Args...), st
	case CallDo:
		return resp.AppendCommand(b, c.Args...), st
	}
	return b, st
}

// finish turns the reply to c's command at step st into run's result, or
// names the step to try next: after "unknown command" to a native
// compare-and-delete (whose capability is then cleared), and after NOSCRIPT.
func (n *RedisNode) finish(c *Command, st step, v any, err error) (res any, rerr error, next step, again bool) {
	if err != nil {
		switch {
		case st == stepNative && isErrorReply(err, "ERR unknown command"):
			n.native.Store(int32(nativeNone))
			return nil, nil, stepSHA, true
		case st == stepSHA && c.Kind != CallDo && isErrorReply(err, "NOSCRIPT"):
			return nil, nil, stepSource, true
		}
		return nil, err, 0, false
	}
	if x, isInt := v.(int64); c.Kind == CallCAD || c.Kind == CallCAE { // CallSetNX's reply stays the script's
		if !isInt {
			return nil, fmt.Errorf("unexpected reply %T, want integer", v), 0, false
		}
		return x == 1, nil, 0, false
	}
	return v, nil, 0, false
}

// pipeOf is the connection c goes on: bulk for a read by vote, else the
// calls' p.
func (n *RedisNode) pipeOf(c *Command) *Pipe {
	if c.Read {
		return n.bulk
	}
	return n.p
}

// runPipeFrom runs c over its pipelined connection from step st.
func (n *RedisNode) runPipeFrom(ctx context.Context, c *Command, st step) (any, error) {
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

// Send starts c on the pipelined connection without blocking (see
// Sender); the reply is finished by onReply on the connection's reader
// goroutine. What cannot be pipelined now (no live connection, a full
// queue) runs in a goroutine (GoSend).
func (n *RedisNode) Send(c *Command, deadline time.Time, to Target, tag int, lone bool) {
	if !n.sendStep(n.pipeOf(c).Ready(), c, n.firstStep(c), deadline, to, tag, lone) {
		GoSend(func(ctx context.Context) (any, error) { return n.Run(ctx, c) }, deadline, to, tag)
	}
}

// Run runs c and waits for its result: the reply to a CallSetNX as the
// acquire script gave it (Granted reads it), the compare calls' as a
// bool. A CallDo longer than InlineMax goes on the bulk connection (Do).
func (n *RedisNode) Run(ctx context.Context, c *Command) (any, error) {
	if c.Kind == CallDo && argBytes(c.Args) > InlineMax {
		return n.bulk.Do(ctx, func(b []byte) []byte { return resp.AppendCommand(b, c.Args...) })
	}
	return n.runPipeFrom(ctx, c, n.firstStep(c))
}

// callRequest is a fan-out's call on the pipelined connection: the
// command, how it was sent, and where its result goes. It receives its
// own reply (Receive, on the connection's reader goroutine) and is then
// recycled.
type callRequest struct {
	Request
	node *RedisNode
	call *Command
	step step
	to   Target
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
// Conn.TrySend).
func (n *RedisNode) sendStep(conn *Conn, c *Command, st step, deadline time.Time, to Target, tag int, inline bool) bool {
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
// finished by a goroutine of the operation (Target.Spawn).
func (n *RedisNode) onReply(req *callRequest, v any, err error) {
	c, to, tag, deadline := req.call, req.to, req.tag, req.Deadline
	res, err, next, again := n.finish(c, req.step, v, err)
	if !again {
		to.Deliver(tag, res, err)
		return
	}
	// Past the deadline the caller may already be undoing this call: a
	// retry sent now could land after the undo.
	if !time.Now().Before(deadline) {
		to.Deliver(tag, nil, context.DeadlineExceeded)
		return
	}
	if n.sendStep(n.pipeOf(c).Ready(), c, next, deadline, to, tag, false) { // on the reader: never write here
		return
	}
	to.Spawn(func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		res, err := n.runPipeFrom(ctx, c, next)
		to.Deliver(tag, res, err)
	})
}

// isErrorReply reports a backend's error reply that starts with prefix
// (any error reply for "").
func isErrorReply(err error, prefix string) bool {
	var re resp.Error
	return errors.As(err, &re) && strings.HasPrefix(string(re), prefix)
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

// appendScriptName appends EVALSHA (step stepSHA) or EVAL (stepSource) of
// s up to the key count, nkeys: the caller appends the keys, then the
// nargs arguments. With ro, their read-only forms EVALSHA_RO and EVAL_RO,
// under which the backend itself refuses every command that writes (or
// may replicate, PUBLISH).
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
// Status, an error reply a resp.Error. The command must not block the
// backend (BLPOP and the like take a connection of their own: DialConn).
// It waits until ctx ends: give it a deadline (the pipe has none of its
// own, and a stalled backend never answers). A command longer than
// InlineMax (a list push of many values) goes on the bulk connection
// instead, out of order with the rest: on the calls' connection every
// lock call to this node would wait behind its bytes.
func (n *RedisNode) Do(ctx context.Context, args ...any) (any, error) {
	return n.Run(ctx, &Command{Kind: CallDo, Args: args})
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

// Close closes the node's connections.
func (n *RedisNode) Close() error {
	for _, p := range []*Pipe{n.p, n.side, n.bulk, n.kill} {
		p.Close()
	}
	return nil
}

// NoReadOnlyScripts makes n send reads by vote as EVALSHA and EVAL, for a
// backend whose read-only scripts refuse what Redis allows there: the
// -dev backends (miniredis) take TIME, which the wrappers of held keys
// call, for a write. Call it before the node's first call.
func (n *RedisNode) NoReadOnlyScripts() { n.noReadOnly = true }

// Millis is d in whole milliseconds, rounded up, as every ttl is sent to
// a backend (a key that lives slightly longer is safe; shorter is not).
func Millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++ // rounded up without adding to d: no wrap near math.MaxInt64
	}
	return ms
}
