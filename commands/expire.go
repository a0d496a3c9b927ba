package commands

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
)

// SET's options and the expiry commands, as Redis 7 parses and answers
// them; docs/compatibility.md says which quorum operation each maps to.

// setRequest is a parsed SET command.
type setRequest struct {
	key, value       string
	nx, xx, get      bool
	keepTTL, expired bool          // expired: an EXAT/PXAT deadline now or past
	cond             *condition    // IFEQ, IFNE, IFDEQ or IFDNE (conditional.go)
	ttl              time.Duration // 0: the command carried no expiry
}

// SET key value [NX | XX | IFEQ value | IFNE value | IFDEQ digest | IFDNE digest] [GET]
// [EX s | PX ms | EXAT ts | PXAT ms | KEEPTTL]
//
// SET NX is an acquisition with token = value; SET IFEQ a compare-and-set
// (the other conditions, and IFEQ with GET or KEEPTTL: condSet);
// plain SET an unconditional write on every backend (it steals a lock, as
// it would on one Redis); SET GET a quorum GETSET. XX, KEEPTTL and a past
// deadline read the key on a quorum first (lease.Manager.Set).
func (d *Dispatcher) set(ctx context.Context, c *Client, args [][]byte) Reply {
	req, r := d.parseSet(args)
	if r != nil {
		return r
	}
	switch {
	case req.nx:
		return d.setNX(ctx, req)
	case req.cond != nil && (req.cond.kind != ifEq || req.get || req.keepTTL):
		return d.condSet(ctx, req)
	case req.cond != nil && req.expired:
		return d.dataReply(d.leases.Release(ctx, req.key, req.cond.arg), OK, Null{})
	case req.cond != nil:
		err := d.leases.CompareAndSet(ctx, req.key, req.cond.arg, req.value, req.ttl)
		return d.dataReply(err, OK, Null{})
	case req.xx || req.keepTTL || req.expired:
		return d.setRead(ctx, req)
	case req.get:
		// A null reply: the key was free, and now holds value.
		return d.getSet(ctx, req.key, req.value, req.ttl, Null{})
	}
	err := d.leases.Write(ctx, req.key, req.value, req.ttl)
	return d.dataReply(err, OK, nil)
}

// setNX is SET NX [GET]: an acquisition. With GET, the value the key holds
// is read first (it answers, and nothing is written, when there is one);
// a deadline already past writes nothing.
func (d *Dispatcher) setNX(ctx context.Context, req setRequest) Reply {
	if !req.get && !req.expired {
		return d.acquireLegacy(ctx, req.key, req.value, req.ttl, OK, Null{})
	}
	var yes Reply = OK
	if req.get {
		yes = nullNotHeld // the key was free: counted as it always was
	}
	v, err := d.leases.Get(ctx, req.key)
	switch {
	case err != nil:
		return d.lockError(err)
	case v.Exists && req.get && v.Type != "":
		return errWrongType
	case v.Exists && req.get:
		return BulkString(v.Data)
	case v.Exists:
		return nullHeld
	case req.expired:
		return yes
	}
	r := d.acquireLegacy(ctx, req.key, req.value, req.ttl, yes, nil)
	if r != nil {
		return r
	}
	// Taken between the read and the acquisition: answer its value.
	if v, err = d.leases.Get(ctx, req.key); err != nil {
		return d.lockError(err)
	}
	return valueReply(v, nullHeld)
}

// setRead is SET with XX, KEEPTTL or a past deadline (and GET): a quorum
// read, then the write it calls for.
func (d *Dispatcher) setRead(ctx context.Context, req setRequest) Reply {
	old, done, err := d.leases.Set(ctx, req.key, req.value, req.ttl, lease.SetOptions{
		XX: req.xx, KeepTTL: req.keepTTL, Expired: req.expired, Strings: req.get,
	})
	var te *lease.TypeError
	switch {
	case errors.As(err, &te):
		return errWrongType
	case err != nil:
		return d.lockError(err)
	case req.get:
		return valueReply(old, nullNotHeld)
	case !done:
		return nullNotHeld
	}
	return OK
}

// parseSet reads SET's arguments as Redis does: the options first (a
// conflict is a syntax error), then the expiry.
func (d *Dispatcher) parseSet(args [][]byte) (setRequest, Reply) {
	req := setRequest{key: string(args[1]), value: string(args[2])}
	if r := d.checkKeyValue(args[1], args[2]); r != nil {
		return req, r
	}
	var unit string
	var expiry []byte
	for i := 3; i < len(args); i++ {
		opt := option(args[i])
		switch {
		case opt == "NX" && !req.xx:
			req.nx = true
		case opt == "XX" && !req.nx:
			req.xx = true
		case opt == "GET":
			req.get = true
		case opt == "KEEPTTL" && unit == "":
			req.keepTTL = true
		case (opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") &&
			!req.keepTTL && (unit == "" || unit == opt) && i+1 < len(args):
			i++
			unit, expiry = opt, args[i]
		case condKinds[opt] != 0 && req.cond == nil && i+1 < len(args):
			i++
			cond, r := d.parseCondition(condKinds[opt], args[i])
			if r != nil {
				return req, r
			}
			req.cond = &cond
		default:
			return req, errSyntax
		}
	}
	if req.cond != nil && (req.nx || req.xx) {
		return req, errSyntax
	}
	if unit != "" {
		var r Reply
		// Data's ttl may go beyond max_ttl; a lock's (NX, a condition) only if
		// it can be held.
		long := !req.nx && req.cond == nil || d.leases.HoldsLong()
		req.ttl, req.expired, r = d.parseExpiry(unit, expiry, "set", long)
		return req, r
	}
	return req, nil
}

// parseExpiry turns SET's EX/PX/EXAT/PXAT argument into a ttl within
// [min_ttl, max_ttl] (beyond max_ttl with long: ttlLong), or expired for a deadline now or past; cmd names
// the command in Redis's error texts. As Redis, a count of 0 or less, or
// one that overflows once in ms from the epoch, is an invalid expire time.
func (d *Dispatcher) parseExpiry(unit string, arg []byte, cmd string, long bool) (time.Duration, bool, Reply) {
	n, err := lua.ParseInt(string(arg))
	if err != nil {
		return 0, false, errNotInteger
	}
	invalid := Errorf("ERR invalid expire time in '%s' command", cmd)
	if n <= 0 {
		return 0, false, invalid
	}
	relative := unit == "EX" || unit == "PX"
	when, ok := lua.ExpireAt(n, unit == "EX" || unit == "EXAT", !relative, time.Now().UnixMilli())
	if !ok {
		return 0, false, invalid
	}
	return d.expiryTTL(n, when, unit == "EX" || unit == "EXAT", relative, long)
}

// expiryTTL is the ttl of a deadline when (ms from the epoch), from the
// count n the client gave: expired when the deadline is now or past, else
// within [min_ttl, max_ttl], or beyond with long (ttlLong). A deadline less
// than min_ttl ahead is taken as now: Redis answers it as it answers a
// past one, and the key, which would live those few ms, goes at once (no
// write lands after it, no lock is granted for less than min_ttl).
func (d *Dispatcher) expiryTTL(n, when int64, seconds, relative, long bool) (time.Duration, bool, Reply) {
	unit := time.Millisecond
	if seconds {
		unit = time.Second
	}
	if relative {
		if n <= 0 {
			return 0, true, nil
		}
		ttl, r := d.ttlLong(n, unit, long)
		return ttl, false, r
	}
	left := when - time.Now().UnixMilli()
	if left < d.opts.MinTTL.Milliseconds() {
		return 0, true, nil
	}
	ttl, r := d.ttlLong(left, time.Millisecond, long)
	return ttl, false, r
}

// ttlHeld is ttlIn for a lock's ttl, which may go beyond max_ttl where
// the proxy holds it (lease.Manager.HoldsLong): the copies carry the
// lease and the key is renewed to its deadline.
func (d *Dispatcher) ttlHeld(n int64, unit time.Duration) (time.Duration, Reply) {
	return d.ttlLong(n, unit, d.leases.HoldsLong())
}

// ttlLong is ttlIn, but for a ttl beyond max_ttl when long: SET's and the
// expiry commands' ttls may be data's, stored as given (docs/safety.md,
// "Locks and data"); the lease decides by the key's kind, and set refuses
// a lock's that cannot be held.
func (d *Dispatcher) ttlLong(n int64, unit time.Duration, long bool) (time.Duration, Reply) {
	if !long || n <= int64(d.opts.MaxTTL/unit) {
		return d.ttlIn(n, unit)
	}
	if n > int64(math.MaxInt64/unit) {
		return math.MaxInt64, nil
	}
	return time.Duration(n) * unit, nil
}

// EXPIRE key s / PEXPIRE key ms / EXPIREAT key ts / PEXPIREAT key ms,
// each [NX | XX | GT | LT]: lease.Manager.ExpireIf. A deadline now or past
// deletes the key (1 when it existed), as on one Redis.
func (d *Dispatcher) expire(ctx context.Context, c *Client, args [][]byte) Reply {
	name := strings.ToLower(string(args[0]))
	cond, r := expireCond(args[3:])
	if r != nil {
		return r
	}
	n, err := lua.ParseInt(string(args[2]))
	if err != nil {
		return errNotInteger
	}
	seconds := name == "expire" || name == "expireat"
	relative := name == "expire" || name == "pexpire"
	when, ok := lua.ExpireAt(n, seconds, !relative, time.Now().UnixMilli())
	if !ok {
		return Errorf("ERR invalid expire time in '%s' command", name)
	}
	ttl, expired, r := d.expiryTTL(n, when, seconds, relative, true) // the lease decides by the key's kind
	if r != nil {
		return r
	}
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	if expired {
		ttl = 0
	}
	done, err := d.leases.ExpireIf(ctx, string(args[1]), ttl, cond)
	if err != nil {
		return d.lockError(err)
	}
	return didReply(done)
}

// expireCond reads EXPIRE's options (lua.ParseExpireOptions, Redis's
// rule and errors) as a lease.ExpireCond.
func expireCond(args [][]byte) (lease.ExpireCond, Reply) {
	opts, _ := argStrings(args, nil)
	o, err := lua.ParseExpireOptions(opts)
	if err != nil {
		return 0, Error(err.Error())
	}
	var cond lease.ExpireCond
	for _, f := range []struct {
		on   bool
		flag lease.ExpireCond
	}{{o.NX, lease.ExpireNX}, {o.XX, lease.ExpireXX}, {o.GT, lease.ExpireGT}, {o.LT, lease.ExpireLT}} {
		if f.on {
			cond |= f.flag
		}
	}
	return cond, nil
}

// EXPIRETIME key / PEXPIRETIME key: the Unix time (s or ms) at which a
// quorum stops holding the key, on this proxy's clock; -2 when absent, -1
// without expiry.
func (d *Dispatcher) expiretime(ctx context.Context, c *Client, args [][]byte) Reply {
	v, r := d.readKey(ctx, args[1], d.leases.Read)
	switch {
	case r != nil:
		return r
	case !v.Exists:
		return absentNotHeld
	case v.PTTL < 0:
		return noExpiryNotHeld
	}
	ms := time.Now().Add(v.PTTL).UnixMilli()
	if strings.EqualFold(string(args[0]), "PEXPIRETIME") {
		return countReply(ms)
	}
	return countReply((ms + 500) / 1000)
}
