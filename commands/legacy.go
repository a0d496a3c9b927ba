package commands

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
)

// ttlIn is n units as a ttl within [min_ttl, max_ttl]. The range is checked
// before multiplying, so no n, however large, wraps around into range.
func (d *Dispatcher) ttlIn(n int64, unit time.Duration) (time.Duration, Reply) {
	if n >= 0 && n <= int64(d.opts.MaxTTL/unit) {
		return d.checkTTL(time.Duration(n) * unit)
	}
	ms := n // for the message, in ms, saturated
	if per := int64(unit / time.Millisecond); per > 1 {
		switch {
		case n > math.MaxInt64/per:
			ms = math.MaxInt64
		case n < math.MinInt64/per:
			ms = math.MinInt64
		default:
			ms = n * per
		}
	}
	return 0, Errorf(errTTLRange, ms, d.opts.MinTTL.Milliseconds(), d.opts.MaxTTL.Milliseconds())
}

// checkTTL enforces [min_ttl, max_ttl]: the bound is a safety parameter,
// so a legacy client asking for more gets an error, not a shorter lock.
func (d *Dispatcher) checkTTL(ttl time.Duration) (time.Duration, Reply) {
	if ttl < d.opts.MinTTL || ttl > d.opts.MaxTTL {
		return 0, Errorf(errTTLRange, ttl.Milliseconds(), d.opts.MinTTL.Milliseconds(), d.opts.MaxTTL.Milliseconds())
	}
	return ttl, nil
}

// acquireLegacy is SET NX / SETNX: an acquisition with the client's value
// as token, answered yes or no (counted held) in the command's own
// convention. Without
// expiry the lock is kept, as on one Redis, until it is released.
func (d *Dispatcher) acquireLegacy(ctx context.Context, key, value string, ttl time.Duration, yes, no Reply) Reply {
	if ttl == 0 && d.leases.KeepTTL() == 0 {
		return Error("ERR lock writes without expiry need default_ttl > 0 on redlock-proxy")
	}
	err := d.leases.SetIfAbsent(ctx, key, value, ttl)
	switch {
	case err == nil:
		return yes
	case errors.Is(err, redlock.ErrHeld) && no != nil:
		return withOutcome(no, ResultHeld)
	case errors.Is(err, redlock.ErrHeld):
		return nil
	}
	return d.lockError(err)
}

// dataReply maps an operation's error: nil → ok; "not held" → no
// (counted not_held); anything else through lockError.
func (d *Dispatcher) dataReply(err error, ok, no Reply) Reply {
	switch {
	case err == nil:
		return ok
	case no != nil && (errors.Is(err, redlock.ErrNotHeld) || errors.Is(err, redlock.ErrHeld)):
		return withOutcome(no, ResultNotHeld)
	}
	return d.lockError(err)
}

// SETNX key value
func (d *Dispatcher) setnx(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKeyValue(args[1], args[2]); r != nil {
		return r
	}
	return d.acquireLegacy(ctx, string(args[1]), string(args[2]), 0, Int(1), Int(0))
}

// readKey checks key and reads it with read (leases.Get or Read); a
// reply when either fails.
func (d *Dispatcher) readKey(ctx context.Context, key []byte, read func(context.Context, string) (redlock.Value, error)) (redlock.Value, Reply) {
	if r := d.checkKey(key); r != nil {
		return redlock.Value{}, r
	}
	v, err := read(ctx, string(key))
	if err != nil {
		return v, d.lockError(err)
	}
	return v, nil
}

// GET key: the value a quorum of backends holds.
func (d *Dispatcher) get(ctx context.Context, c *Client, args [][]byte) Reply {
	v, r := d.readKey(ctx, args[1], d.leases.Get)
	switch {
	case r != nil:
		return r
	case v.Type != "":
		return errWrongType
	}
	if c.tx.watched != nil {
		var read *string
		if v.Exists {
			read = &v.Data
		}
		c.tx.noteRead(string(args[1]), read)
	}
	return valueReply(v, nullNotHeld)
}

// valueReply is the value v, or absent when there is none.
func valueReply(v redlock.Value, absent Reply) Reply {
	if !v.Exists {
		return absent
	}
	return BulkString(v.Data)
}

// GETSET key value
func (d *Dispatcher) getset(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKeyValue(args[1], args[2]); r != nil {
		return r
	}
	return d.getSet(ctx, string(args[1]), string(args[2]), 0, nullNotHeld)
}

// getSet writes value and answers the value it replaced, or absent.
func (d *Dispatcher) getSet(ctx context.Context, key, value string, ttl time.Duration, absent Reply) Reply {
	old, err := d.leases.GetSet(ctx, key, value, ttl)
	var te *lease.TypeError
	switch {
	case errors.As(err, &te):
		return errWrongType
	case err != nil:
		return d.lockError(err)
	}
	return valueReply(old, absent)
}

// DEL key [key ...] / UNLINK key [key ...] / EXISTS key [key ...]: keys
// that hold on a quorum (none: not_held). UNLINK is DEL: how the backends
// free the memory does not show through the proxy.
func (d *Dispatcher) del(ctx context.Context, c *Client, args [][]byte) Reply {
	return d.countKeys(ctx, args[1:], d.leases.Delete)
}

func (d *Dispatcher) exists(ctx context.Context, c *Client, args [][]byte) Reply {
	return d.countKeys(ctx, args[1:], d.leases.Exists)
}

func (d *Dispatcher) countKeys(ctx context.Context, keyArgs [][]byte, op func(context.Context, []string) (int, error)) Reply {
	keys, r := d.keyList(keyArgs)
	if r != nil {
		return r
	}
	n, err := op(ctx, keys)
	if err != nil {
		return d.lockError(err)
	}
	return countReply(int64(n))
}

func (d *Dispatcher) keyList(args [][]byte) ([]string, Reply) { return argStrings(args, d.checkKey) }

// argStrings is args as strings, each passing check first (nil: none).
func argStrings(args [][]byte, check func([]byte) Reply) ([]string, Reply) {
	out := make([]string, len(args))
	for i, a := range args {
		if check != nil {
			if r := check(a); r != nil {
				return nil, r
			}
		}
		out[i] = string(a)
	}
	return out, nil
}

// PTTL key / TTL key: how long a quorum of backends will still hold the
// key with the value a quorum agrees on (redlock.Read); -2 when absent
// (not_held), -1 without expiry (ok).
func (d *Dispatcher) pttl(ctx context.Context, c *Client, args [][]byte) Reply {
	v, r := d.readKey(ctx, args[1], d.leases.Read)
	switch {
	case r != nil:
		return r
	case !v.Exists:
		return absentNotHeld
	case v.PTTL < 0:
		return Int(-1)
	case strings.EqualFold(string(args[0]), "PTTL"):
		return countReply(v.PTTL.Milliseconds())
	}
	return countReply((v.PTTL.Milliseconds() + 500) / 1000)
}

// TYPE key: the type of the value a quorum of backends holds ("none" when
// a quorum holds no key).
func (d *Dispatcher) typeOf(ctx context.Context, c *Client, args [][]byte) Reply {
	v, r := d.readKey(ctx, args[1], d.leases.Get)
	switch {
	case r != nil:
		return r
	case !v.Exists:
		return Simple("none")
	case v.Type != "":
		return Simple(v.Type)
	}
	return Simple("string")
}

// PERSIST key: the key loses its expiry (a lock: held, its lease renewed
// while it holds its value). 1 when the key had an expiry, 0 (not_held)
// when it is absent or had none.
func (d *Dispatcher) persist(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	done, err := d.leases.Persist(ctx, string(args[1]))
	if err != nil {
		return d.lockError(err)
	}
	return didReply(done)
}

// expireArgs reads PEXPIRE/EXPIRE key t queued inside MULTI: the count,
// its unit, or the error for a bad count or an option (NX, XX, GT, LT:
// not supported inside MULTI).
func expireArgs(args [][]byte) (int64, time.Duration, Reply) {
	if len(args) > 3 {
		return 0, 0, Errorf(errNotSupported, strings.ToUpper(string(args[0]))+" "+strings.ToUpper(string(args[3])))
	}
	n, err := lua.ParseInt(string(args[2]))
	if err != nil {
		return 0, 0, errNotInteger
	}
	if strings.EqualFold(string(args[0]), "EXPIRE") {
		return n, time.Second, nil
	}
	return n, time.Millisecond, nil
}

// FLUSHDB / FLUSHALL [ASYNC|SYNC]: every lock on every backend; refused
// unless allow_flush = true.
func (d *Dispatcher) flush(ctx context.Context, c *Client, args [][]byte) Reply {
	if !d.opts.AllowFlush {
		return Errorf("ERR %s would delete every lock on every backend: refused by redlock-proxy unless allow_flush = true", strings.ToUpper(string(args[0])))
	}
	if len(args) > 2 {
		return errSyntax
	}
	err := d.leases.FlushAll(ctx)
	return d.dataReply(err, OK, nil)
}

func (d *Dispatcher) checkKeyValue(key, value []byte) Reply {
	if r := d.checkKey(key); r != nil {
		return r
	}
	return d.checkValue(value)
}

// checkValue refuses a value or token longer than max_value_bytes.
func (d *Dispatcher) checkValue(value []byte) Reply {
	if len(value) > d.opts.MaxValueBytes {
		return Errorf(errValueTooLong, d.opts.MaxValueBytes)
	}
	return nil
}

// didReply is 1 when a lock dialect's command did what it asked, else 0
// (not_held).
func didReply(done bool) Reply {
	if done {
		return Int(1)
	}
	return zeroNotHeld
}

func boolInt(b bool) Int {
	if b {
		return 1
	}
	return 0
}
