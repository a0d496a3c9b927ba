package lua

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// The model is a tiny Redis: string keys with expiry times, frozen at one
// instant, answering the commands lock scripts use exactly as Redis 7 does.
// Recognition runs a script against it and compares what the script left
// behind with what each meaning would; EvalRead runs read-only scripts
// against it, filled from the quorum's view of the keys.

// modelNow is the model's clock in Unix ms; it never moves.
const modelNow int64 = 1_700_000_000_000

// entry is a string key; exp is its expiry in Unix ms, 0 for none.
type entry struct {
	val string
	exp int64
}

// pttl is the remaining ms, or -1 without expiry.
func (e entry) pttl() int64 {
	if e.exp == 0 {
		return -1
	}
	return e.exp - modelNow
}

// errUnsupported marks a command the model does not implement.
var errUnsupported = errors.New("not implemented by the model")

// modelCommands are the commands the model implements. A script calling
// any other command (even on a path the probes never take) is never
// recognised.
var modelCommands = map[string]bool{
	"GET": true, "SET": true, "SETNX": true, "SETEX": true, "PSETEX": true, "GETSET": true,
	"GETDEL": true, "GETEX": true, "MGET": true, "STRLEN": true, "DEL": true, "UNLINK": true,
	"EXISTS": true, "EXPIRE": true, "PEXPIRE": true, "EXPIREAT": true, "PEXPIREAT": true,
	"PERSIST": true, "TTL": true, "PTTL": true, "SELECT": true,
}

// readCommands are those of modelCommands that never write.
var readCommands = map[string]bool{
	"GET": true, "MGET": true, "STRLEN": true, "EXISTS": true, "TTL": true, "PTTL": true,
	"SELECT": true,
}

// arities are the exact argument counts (after the name) of the commands
// that have one.
var arities = map[string]int{
	"GET": 1, "SETNX": 2, "SETEX": 3, "PSETEX": 3, "GETSET": 2, "GETDEL": 1, "STRLEN": 1,
	"PERSIST": 1, "TTL": 1, "PTTL": 1, "SELECT": 1,
}

// store is the model's data.
type store struct {
	m       map[string]entry
	touched []string // keys a command named, in order, without repeats
	// load, when set, fills a key on first use (EvalRead's view).
	load   func(key string) (entry, bool, error)
	loaded map[string]bool
	err    error // from load
}

func (s *store) reset() {
	clear(s.m)
	s.touched = s.touched[:0]
}

func (s *store) touch(k string) {
	for _, t := range s.touched {
		if t == k {
			return
		}
	}
	s.touched = append(s.touched, k)
	if s.load != nil && !s.loaded[k] {
		s.loaded[k] = true
		e, ok, err := s.load(k)
		if err != nil && s.err == nil {
			s.err = err
		}
		if ok {
			s.m[k] = e
		}
	}
}

func (s *store) get(k string) (entry, bool) {
	s.touch(k)
	e, ok := s.m[k]
	return e, ok
}

func (s *store) set(k string, e entry) { s.touch(k); s.m[k] = e }
func (s *store) del(k string) bool {
	_, ok := s.get(k)
	delete(s.m, k)
	return ok
}

// Replies the model shares with Redis 7.
var (
	okReply   = StatusValue("OK")
	errSyntax = ErrorValue("ERR syntax error")
	errNotInt = ErrorValue("ERR value is not an integer or out of range")
)

func arity(name string) Value {
	return ErrorValue("ERR wrong number of arguments for '" + strings.ToLower(name) + "' command")
}

func badExpire(name string) Value {
	return ErrorValue("ERR invalid expire time in '" + strings.ToLower(name) + "' command")
}

// ParseInt reads an integer as Redis does (string2ll): decimal, no
// spaces, no '+', no leading zero, no "-0"; the proxy's own commands read
// their counts with it too.
func ParseInt(s string) (int64, error) {
	if s == "" || s[0] == '+' || (len(s) > 1 && s[0] == '0') || strings.HasPrefix(s, "-0") {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s, 10, 64)
}

// do runs one command. It returns errUnsupported for commands outside
// modelCommands; command errors are error Values, as Redis replies them.
func (s *store) do(args []string) (Value, error) {
	name := strings.ToUpper(args[0])
	if !modelCommands[name] {
		return Value{}, errUnsupported
	}
	a := args[1:]
	if n, ok := arities[name]; ok && len(a) != n {
		return arity(name), nil
	}
	switch name {
	case "GET":
		if e, ok := s.get(a[0]); ok {
			return BulkValue(e.val), nil
		}
		return NilValue(), nil
	case "MGET", "DEL", "UNLINK", "EXISTS", "GETEX":
		if len(a) < 1 {
			return arity(name), nil
		}
		return s.multi(name, a), nil
	case "STRLEN":
		e, _ := s.get(a[0])
		return IntValue(int64(len(e.val))), nil
	case "SET":
		return s.setCmd(a), nil
	case "SETNX":
		if _, ok := s.get(a[0]); ok {
			return IntValue(0), nil
		}
		s.set(a[0], entry{val: a[1]})
		return IntValue(1), nil
	case "SETEX", "PSETEX":
		n, err := ParseInt(a[1])
		if err != nil {
			return errNotInt, nil
		}
		exp, ok := ExpireAt(n, name == "SETEX", false, modelNow)
		if !ok || n <= 0 {
			return badExpire(name), nil
		}
		s.set(a[0], entry{val: a[2], exp: exp})
		return okReply, nil
	case "GETSET", "GETDEL":
		old, ok := s.get(a[0])
		if name == "GETSET" {
			s.set(a[0], entry{val: a[1]})
		} else {
			s.del(a[0])
		}
		if !ok {
			return NilValue(), nil
		}
		return BulkValue(old.val), nil
	case "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT":
		if len(a) < 2 {
			return arity(name), nil
		}
		return s.expire(name, a), nil
	case "PERSIST":
		e, ok := s.get(a[0])
		if !ok || e.exp == 0 {
			return IntValue(0), nil
		}
		s.set(a[0], entry{val: e.val})
		return IntValue(1), nil
	case "SELECT":
		// Only SELECT 0 gets here (the static pass refuses any other
		// literal, and pins ARGV indices passed to SELECT to "0"): the
		// model's one database.
		if a[0] != "0" {
			return Value{}, errUnsupported
		}
		return okReply, nil
	case "TTL", "PTTL":
		e, ok := s.get(a[0])
		switch {
		case !ok:
			return IntValue(-2), nil
		case e.exp == 0:
			return IntValue(-1), nil
		case name == "TTL":
			return IntValue((e.pttl() + 500) / 1000), nil
		}
		return IntValue(e.pttl()), nil
	}
	return Value{}, errUnsupported
}

func (s *store) multi(name string, a []string) Value {
	switch name {
	case "MGET":
		out := make([]Value, len(a))
		for i, k := range a {
			if e, ok := s.get(k); ok {
				out[i] = BulkValue(e.val)
			} else {
				out[i] = NilValue()
			}
		}
		return ArrayValue(out...)
	case "GETEX":
		return s.getex(a)
	}
	n := int64(0)
	for _, k := range a {
		if name == "EXISTS" {
			if _, ok := s.get(k); ok {
				n++
			}
		} else if s.del(k) {
			n++
		}
	}
	return IntValue(n)
}

// ExpireAt turns a time in s or ms, relative to now (ms from the epoch;
// the model's is modelNow) or, with abs, absolute, into ms from the
// epoch; false when it overflows, as Redis checks it.
func ExpireAt(n int64, seconds, abs bool, now int64) (int64, bool) {
	if seconds {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return 0, false
		}
		n *= 1000
	}
	if abs {
		return n, true
	}
	if n > math.MaxInt64-now {
		return 0, false
	}
	return now + n, true
}

// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
func (s *store) setCmd(a []string) Value {
	if len(a) < 2 {
		return arity("SET")
	}
	var nx, xx, get, keep bool
	unit := ""
	var n int64
	for i := 2; i < len(a); i++ {
		switch opt := strings.ToUpper(a[i]); opt {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "GET":
			get = true
		case "KEEPTTL":
			keep = true
		case "EX", "PX", "EXAT", "PXAT":
			if unit != "" || i+1 >= len(a) {
				return errSyntax
			}
			unit = opt
			i++
			v, err := ParseInt(a[i])
			if err != nil {
				return errNotInt
			}
			n = v
		default:
			return errSyntax
		}
	}
	if (nx && xx) || (keep && unit != "") {
		return errSyntax
	}
	var exp int64
	if unit != "" {
		var ok bool
		exp, ok = ExpireAt(n, unit == "EX" || unit == "EXAT", unit == "EXAT" || unit == "PXAT", modelNow)
		if !ok || n <= 0 {
			return badExpire("SET")
		}
	}
	old, exists := s.get(a[0])
	reply := okReply
	if get {
		reply = NilValue()
		if exists {
			reply = BulkValue(old.val)
		}
	}
	if (nx && exists) || (xx && !exists) {
		if get {
			return reply
		}
		return NilValue()
	}
	if keep && exists {
		exp = old.exp
	}
	s.set(a[0], entry{val: a[1], exp: exp})
	return reply
}

// GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]
func (s *store) getex(a []string) Value {
	e, ok := s.get(a[0])
	var exp int64 = -1 // -1: leave the expiry alone
	switch len(a) {
	case 1:
	case 2:
		if strings.ToUpper(a[1]) != "PERSIST" {
			return errSyntax
		}
		exp = 0
	case 3:
		opt := strings.ToUpper(a[1])
		if opt != "EX" && opt != "PX" && opt != "EXAT" && opt != "PXAT" {
			return errSyntax
		}
		n, err := ParseInt(a[2])
		if err != nil {
			return errNotInt
		}
		at, fits := ExpireAt(n, opt == "EX" || opt == "EXAT", opt == "EXAT" || opt == "PXAT", modelNow)
		if !fits || n <= 0 {
			return badExpire("GETEX")
		}
		exp = at
	default:
		return errSyntax
	}
	if !ok {
		return NilValue()
	}
	if exp >= 0 {
		if exp != 0 && exp <= modelNow {
			s.del(a[0])
		} else {
			s.set(a[0], entry{val: e.val, exp: exp})
		}
	}
	return BulkValue(e.val)
}

// EXPIRE key t [NX|XX|GT|LT], and PEXPIRE, EXPIREAT, PEXPIREAT.
func (s *store) expire(name string, a []string) Value {
	opts, err := ParseExpireOptions(a[2:]) // first, as Redis reads them
	if err != nil {
		return ErrorValue(err.Error())
	}
	n, err := ParseInt(a[1])
	if err != nil {
		return errNotInt
	}
	at, ok := ExpireAt(n, name == "EXPIRE" || name == "EXPIREAT", name == "EXPIREAT" || name == "PEXPIREAT", modelNow)
	if !ok {
		return badExpire(name)
	}
	e, exists := s.get(a[0])
	if !exists {
		return IntValue(0)
	}
	if !opts.Allows(e.exp, at) {
		return IntValue(0)
	}
	if at <= modelNow {
		s.del(a[0])
	} else {
		s.set(a[0], entry{val: e.val, exp: at})
	}
	return IntValue(1)
}
