package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
)

// The conditional writes of Redis 8.4 (SET … IFEQ|IFNE|IFDEQ|IFDNE,
// DELEX … IF…, DIGEST) and Valkey 9 (DELIFEQ), carried out with the lock
// paths' compare-and-set and compare-and-delete (docs/compatibility.md,
// "Conditional writes"): IFEQ value is one quorum round; every other
// condition reads the key, decides, and writes only where the key still
// holds the value read, reading again condAttempts times at most.

// condAttempts bounds the read-then-write rounds of one conditional write.
const condAttempts = 3

// digestLen is the length of a DIGEST: XXH3's 64 bits in hex.
const digestLen = 16

// Error texts of the conditional writes.
const (
	// errDigestHex copies Redis 8.4's reply to an IFDEQ/IFDNE digest that
	// is not 16 hex digits.
	errDigestHex = Error("ERR must be exactly 16 hexadecimal characters")
	// errCondChanged: the key changed between the read and the write of
	// every attempt (the proxy's own; Redis does it in one step).
	errCondChanged = Error("ERR the key changed while the conditional write was made, on every attempt: try again")
	// errCondNoKeep: IFNE/IFDNE without expiry may create the key, which
	// needs the lease of writes without expiry (acquireLegacy's rule).
	errCondNoKeep = Error("ERR lock writes without expiry need default_ttl > 0 on redlock-proxy")
)

// condKind is one of the conditions of SET and DELEX.
type condKind uint8

const (
	ifEq  condKind = iota + 1 // IFEQ value: the key holds value
	ifNe                      // IFNE value: the key is absent or holds another value
	ifDEq                     // IFDEQ digest: the key's value has this digest
	ifDNe                     // IFDNE digest: the key is absent or its value has another digest
)

// condKinds names the conditions by their (upper-case) option.
var condKinds = map[string]condKind{"IFEQ": ifEq, "IFNE": ifNe, "IFDEQ": ifDEq, "IFDNE": ifDNe}

// condition is a parsed IFEQ|IFNE|IFDEQ|IFDNE argument.
type condition struct {
	kind condKind
	arg  string // the value, or the digest in lower case
}

// parseCondition reads the condition kind with its argument: a digest
// must be 16 hex digits (compared without regard to case, as Redis does),
// a value no longer than max_value_bytes.
func (d *Dispatcher) parseCondition(kind condKind, arg []byte) (condition, Reply) {
	c := condition{kind: kind, arg: string(arg)}
	if kind == ifEq || kind == ifNe {
		return c, d.checkValue(arg)
	}
	if len(arg) != digestLen || strings.Trim(c.arg, "0123456789abcdefABCDEF") != "" {
		return c, errDigestHex
	}
	c.arg = strings.ToLower(c.arg)
	return c, nil
}

// holds reports whether the condition is met by v, a string value or none.
func (c condition) holds(v redlock.Value) bool {
	switch c.kind {
	case ifEq:
		return v.Exists && v.Data == c.arg
	case ifNe:
		return !v.Exists || v.Data != c.arg
	case ifDEq:
		return v.Exists && digestOf(v.Data) == c.arg
	}
	return !v.Exists || digestOf(v.Data) != c.arg
}

// digestOf is DIGEST's reply for value: its XXH3 64-bit hash, 16 lower-case
// hex digits with leading zeros.
func digestOf(value string) string {
	return fmt.Sprintf("%016x", xxh3.HashString(value))
}

// keyChanged reports whether a conditional write failed because the key
// no longer held what was read (a compare failed, or it was taken).
func keyChanged(err error) bool {
	return errors.Is(err, redlock.ErrNotHeld) || errors.Is(err, redlock.ErrHeld)
}

// DIGEST key  (Redis 8.4): the digest of the value a quorum holds; null
// when there is none.
func (d *Dispatcher) digest(ctx context.Context, c *Client, args [][]byte) Reply {
	v, r := d.readKey(ctx, args[1], d.leases.Get)
	switch {
	case r != nil:
		return r
	case v.Type != "":
		return errWrongType
	case !v.Exists:
		return nullNotHeld
	}
	return BulkString(digestOf(v.Data))
}

// DELEX key [IFEQ value | IFNE value | IFDEQ digest | IFDNE digest]  (Redis 8.4)
//
// Without a condition, DEL; IFEQ is a release of the lock whose token is
// value; the others read the key and release the value they read when it
// meets the condition. 1 deleted, 0 not (absent, or the condition unmet).
func (d *Dispatcher) delex(ctx context.Context, c *Client, args [][]byte) Reply {
	if len(args) == 2 {
		return d.countKeys(ctx, args[1:2], d.leases.Delete)
	}
	kind := condKinds[option(args[2])]
	if len(args) != 4 || kind == 0 {
		return errSyntax
	}
	cond, r := d.parseCondition(kind, args[3])
	if r != nil {
		return r
	}
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	key := string(args[1])
	if kind == ifEq {
		return d.release(ctx, key, cond.arg)
	}
	for range condAttempts {
		v, err := d.leases.Get(ctx, key)
		switch {
		case err != nil:
			return d.lockError(err)
		case v.Type != "":
			return errWrongType
		case !v.Exists || !cond.holds(v):
			return zeroNotHeld
		}
		switch err := d.leases.Release(ctx, key, v.Data); {
		case err == nil:
			return Int(1)
		case !keyChanged(err):
			return d.lockError(err)
		}
	}
	return errCondChanged
}

// DELIFEQ key value  (Valkey 9): DELEX key IFEQ value.
func (d *Dispatcher) delifeq(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKeyValue(args[1], args[2]); r != nil {
		return r
	}
	return d.release(ctx, string(args[1]), string(args[2]))
}

// condSet is SET with a condition other than a plain IFEQ: read, decide,
// write what the condition calls for on the value read (see above). With
// GET it answers the value read, whether it wrote or not.
func (d *Dispatcher) condSet(ctx context.Context, req setRequest) Reply {
	creates := req.cond.kind == ifNe || req.cond.kind == ifDNe
	if creates && req.ttl == 0 && !req.expired && d.leases.KeepTTL() == 0 {
		return errCondNoKeep
	}
	for range condAttempts {
		v, err := d.leases.Read(ctx, req.key)
		switch {
		case err != nil:
			return d.lockError(err)
		case v.Exists && v.Type != "":
			return errWrongType
		}
		done := nullNotHeld
		if req.get {
			done = valueReply(v, Null{})
		}
		if !req.cond.holds(v) {
			return done
		}
		switch err := d.condWrite(ctx, req, v); {
		case err == nil && req.get:
			return done
		case err == nil:
			return OK
		case errors.Is(err, lease.ErrQueued):
			return done // a free key with waiters queued here: theirs first, as for SET NX
		case !keyChanged(err):
			return d.lockError(err)
		}
	}
	return errCondChanged
}

// condWrite makes SET's write on key where it still holds v (read, the
// condition met): a compare-and-set of v, a compare-and-delete of v for a
// deadline already past, an acquisition where v is none.
func (d *Dispatcher) condWrite(ctx context.Context, req setRequest, v redlock.Value) error {
	switch {
	case !v.Exists && req.expired:
		return nil // written and gone at once, as on one Redis
	case !v.Exists:
		return d.leases.SetIfAbsent(ctx, req.key, req.value, req.ttl)
	case req.expired:
		return d.leases.Release(ctx, req.key, v.Data)
	}
	ttl := req.ttl
	if req.keepTTL && v.PTTL > 0 {
		ttl = v.PTTL
	}
	return d.leases.CompareAndSet(ctx, req.key, v.Data, req.value, ttl)
}
