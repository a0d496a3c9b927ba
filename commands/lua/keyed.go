package lua

import (
	"sort"
	"strconv"
	"strings"
)

// The allow-list, as commands sent outside a script see it. A command a
// script by vote may call is one that touches only the keys at its key
// positions and that every backend answers and applies alike: the same
// command sent on its own can therefore run by vote too, as a script that
// only calls it. KeyCommands lists them, so that the proxy's command table
// and the allow-list cannot drift apart.

// KeyCommand is one command of the allow-list (or an unordered-reply
// read) that names its keys.
type KeyCommand struct {
	Name  string // upper case
	Arity int    // Redis 7's convention: n exact, -n at least n (name included)
	// Writes: the command may change data.
	Writes bool
	// Caches: a read that Redis lets update its key (PFCOUNT), which a
	// read-only script may not call: it is not run as a read by vote.
	Caches bool
	// Expires: the command may set its key's expiry and keep its value
	// (GETEX EX|PX|EXAT|PXAT|PERSIST): of a lock, a lock's expiry.
	Expires bool
	// Unordered: an array reply whose order is each backend's own
	// (SMEMBERS, HKEYS); Pairs: field/value pairs in such an order
	// (HGETALL). A vote compares them as a multiset.
	Unordered, Pairs bool
	// First, Last, Step are the key positions as COMMAND INFO shows them
	// (Last -1: the last argument); all 0 for a command whose keys follow
	// a count (ZUNION 2 k1 k2).
	First, Last, Step int
	// NumKeys is the position of a count of the keys that follow it
	// (ZUNION: 1, ZUNIONSTORE: 2); 0: none.
	NumKeys int
	// Movable: keys may stand elsewhere than First..Last (SORT's STORE,
	// SORT_RO's refused BY and GET), as COMMAND INFO's movablekeys says.
	Movable bool

	keys keySpec
}

// redisArities are Redis's redisArities of the allow-list's keyed commands (Redis
// 7.2; the hash field expiry commands as Redis 7.4 and 8 have them).
var redisArities = map[string]int{
	"DEL": -2, "UNLINK": -2, "EXISTS": -2, "TYPE": 2, "TOUCH": -2,
	"EXPIRE": -3, "PEXPIRE": -3, "EXPIREAT": -3, "PEXPIREAT": -3, "PERSIST": 2,
	"TTL": 2, "PTTL": 2, "EXPIRETIME": 2, "PEXPIRETIME": 2,
	"GET": 2, "SET": -3, "SETNX": 3, "SETEX": 4, "PSETEX": 4, "GETSET": 3,
	"GETDEL": 2, "GETEX": -2, "MGET": -2, "MSET": -3, "MSETNX": -3, "APPEND": 3,
	"STRLEN": 2, "GETRANGE": 4, "SUBSTR": 4, "DELEX": -2, "SETRANGE": 4,
	"INCR": 2, "DECR": 2, "INCRBY": 3, "DECRBY": 3, "INCRBYFLOAT": 3, "LCS": -3,
	"SETBIT": 4, "GETBIT": 3, "BITCOUNT": -2, "BITPOS": -3, "BITFIELD": -2,
	"BITFIELD_RO": -2, "BITOP": -4,
	"HDEL": -3, "HEXISTS": 3, "HGET": 3, "HINCRBY": 4, "HINCRBYFLOAT": 4,
	"HLEN": 2, "HMGET": -3, "HMSET": -4, "HSET": -4, "HSETNX": 4, "HSTRLEN": 3,
	"HEXPIRE": -6, "HPEXPIRE": -6, "HEXPIREAT": -6, "HPEXPIREAT": -6,
	"HPERSIST": -5, "HTTL": -5, "HPTTL": -5, "HEXPIRETIME": -5, "HPEXPIRETIME": -5,
	"HGETDEL": -5, "HGETEX": -5, "HSETEX": -6,
	"LINDEX": 3, "LINSERT": 5, "LLEN": 2, "LMOVE": 5, "LMPOP": -4, "LPOP": -2,
	"LPOS": -3, "LPUSH": -3, "LPUSHX": -3, "LRANGE": 4, "LREM": 4, "LSET": 4,
	"LTRIM": 4, "RPOP": -2, "RPOPLPUSH": 3, "RPUSH": -3, "RPUSHX": -3,
	"SADD": -3, "SCARD": 2, "SDIFFSTORE": -3, "SINTERCARD": -3, "SINTERSTORE": -3,
	"SISMEMBER": 3, "SMISMEMBER": -3, "SMOVE": 4, "SREM": -3, "SUNIONSTORE": -3,
	"ZADD": -4, "ZCARD": 2, "ZCOUNT": 4, "ZDIFF": -3, "ZDIFFSTORE": -4,
	"ZINCRBY": 4, "ZINTER": -3, "ZINTERCARD": -3, "ZINTERSTORE": -4,
	"ZLEXCOUNT": 4, "ZMPOP": -4, "ZMSCORE": -3, "ZPOPMAX": -2, "ZPOPMIN": -2,
	"ZRANGE": -4, "ZRANGEBYLEX": -4, "ZRANGEBYSCORE": -4, "ZRANGESTORE": -5,
	"ZRANK": -3, "ZREM": -3, "ZREMRANGEBYLEX": 4, "ZREMRANGEBYRANK": 4,
	"ZREMRANGEBYSCORE": 4, "ZREVRANGE": -4, "ZREVRANGEBYLEX": -4,
	"ZREVRANGEBYSCORE": -4, "ZREVRANK": -3, "ZSCORE": 3, "ZUNION": -3,
	"ZUNIONSTORE": -4,
	"SMEMBERS":    2, "SINTER": -2, "SUNION": -2, "SDIFF": -2,
	"HKEYS": 2, "HVALS": 2, "HGETALL": 2,
	"PFADD": -2, "PFCOUNT": -2, "PFMERGE": -2,
	"GEOADD": -5, "GEOPOS": -2, "GEODIST": -4, "GEOHASH": -2, "GEOSEARCH": -7,
	"GEOSEARCHSTORE": -8, "GEORADIUS_RO": -6, "GEORADIUSBYMEMBER_RO": -5,
	"XADD": -5, "XLEN": 2, "XRANGE": -4, "XREVRANGE": -4, "XDEL": -3, "XTRIM": -4,
	"XSETID": -3, "COPY": -3, "SORT": -2, "SORT_RO": -2,
}

// keyCommands is KeyCommands' list, built once. A keyed command without
// an arity panics at start: a row added to the allow-list must say it.
var keyCommands = func() []KeyCommand {
	var out []KeyCommand
	add := func(c command, unordered bool) {
		if c.keys == kNone {
			return // TIME, PUBLISH: no keys
		}
		n, ok := redisArities[c.name]
		if !ok {
			panic("lua: no arity for " + c.name)
		}
		k := KeyCommand{Name: c.name, Arity: n, Writes: c.flags&fWrite != 0, Caches: c.flags&fCaches != 0, Expires: c.flags&fExpire != 0, keys: c.keys,
			First: c.keys.first, Last: c.keys.last, Step: c.keys.step, NumKeys: c.keys.numkeys,
			Movable: c.keys.store || c.name == "SORT_RO"}
		if unordered {
			k.Unordered, k.Pairs = c.name != "HGETALL", c.name == "HGETALL"
		}
		out = append(out, k)
	}
	for _, c := range allowed {
		add(c, false)
	}
	for _, c := range unordered {
		add(c, true)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}()

// KeyCommands lists every command that names its keys and runs by vote:
// the allow-list's keyed commands and the unordered-reply reads, by name.
func KeyCommands() []KeyCommand { return keyCommands }

// KeyPositions returns the positions of args (the command name at 0)
// that hold keys. A count of keys (ZUNION's numkeys) that is not a
// number within args makes every argument after it a key: Redis refuses
// such a call, and the proxy checks more rather than fewer.
func (c KeyCommand) KeyPositions(args [][]byte) []int {
	var out []int
	s, n := c.keys, len(args)
	if s.first > 0 {
		last := s.last
		if last < 0 {
			last = n + last
		}
		for p := s.first; p <= last && p < n; p += s.step {
			out = append(out, p)
		}
	}
	if s.store {
		if p := sortStore(args); p > 0 {
			out = append(out, p)
		}
	}
	if s.numkeys > 0 && s.numkeys < n {
		// Compared before adding: a count near the largest integer must
		// not wrap round and leave the keys unchecked.
		count, err := strconv.Atoi(string(args[s.numkeys]))
		end := n - 1
		if err == nil && count >= 0 && count < n-1-s.numkeys {
			end = s.numkeys + count
		}
		for p := s.numkeys + 1; p <= end; p++ {
			out = append(out, p)
		}
	}
	return out
}

// Refusal says why a command that names no row of KeyCommands cannot run
// by vote, sent as a command (not from a script), for a command Redis has
// and the proxy knows a reason for (SPOP: a random pick; KEYS: a keyspace
// scan; SELECT: another database; CONFIG: administration); ok is false
// for a name it does not know.
func Refusal(name string) (why string, ok bool) {
	up := strings.ToUpper(name)
	if _, keyed := lookup(up); keyed {
		return "", false
	}
	if _, keyed := lookupUnordered(up); keyed {
		return "", false
	}
	if _, own := ownAnswer[up]; !own && whyNot(up) == up+notListed && up != "RENAME" && up != "RENAMENX" {
		return "", false
	}
	return whyNotIn(up, false), true
}

// Keys returns the keys of args (the command name at 0), as KeyPositions
// finds them.
func (c KeyCommand) Keys(args [][]byte) [][]byte {
	pos := c.KeyPositions(args)
	out := make([][]byte, len(pos))
	for i, p := range pos {
		out[i] = args[p]
	}
	return out
}
