package lua

import (
	"slices"
	"strings"
)

// cmdFlags describe what a command does beyond its keys.
type cmdFlags uint8

const (
	fWrite   cmdFlags = 1 << iota // changes data
	fPublish                      // publishes a message: fires once per backend
	fTime                         // reads the backend's clock
	// fExpire: sets its key's expiry and keeps its value (EXPIRE, PERSIST,
	// GETEX's options). Of a lock that is a lock's expiry, within max_ttl
	// or held (docs/safety.md, "Locks and data"); every other write of a
	// lock's key replaces or changes its value, and is data.
	fExpire
	// fCaches: a read that Redis lets update its key (PFCOUNT caches the
	// count it computed: its key spec is RW), so a read-only script
	// (EVALSHA_RO, which runs a read by vote) may not call it. COMMAND
	// INFO still says readonly, as Redis does.
	fCaches
)

// keySpec says which arguments of a command are keys, counted as Redis's
// COMMAND does: the command name is position 0. Keys are at first,
// first+step, … up to last (a negative last counts from the end: -1 is
// the last argument). When numkeys is not 0, the argument at that position
// is a count N and the N arguments after it are keys too.
type keySpec struct {
	first, last, step int
	numkeys           int
	// store: the argument after a STORE keyword is a key too (SORT);
	// forms.go finds it as Redis's SORT parser does.
	store bool
}

// command is one row of the allow-list of key-local commands a script may
// call when it runs by vote.
type command struct {
	name  string
	keys  keySpec
	flags cmdFlags
}

// Shorthands for the table below.
var (
	kNone   = keySpec{}
	kOne    = keySpec{first: 1, last: 1, step: 1}
	kTwo    = keySpec{first: 1, last: 2, step: 1}
	kAll    = keySpec{first: 1, last: -1, step: 1}
	kPairs  = keySpec{first: 1, last: -1, step: 2}
	kNum    = keySpec{numkeys: 1}                              // ZUNION 2 k1 k2 …
	kDstNum = keySpec{first: 1, last: 1, step: 1, numkeys: 2}  // ZUNIONSTORE dst 2 k1 k2 …
	kSort   = keySpec{first: 1, last: 1, step: 1, store: true} // SORT k … STORE dst
)

// allowed is the allow-list. Every command here touches only the keys at
// its key positions (or none), never the whole keyspace, another database
// or the server's configuration; and given the same data, every backend
// answers it alike and changes the same (deterministic; see ownAnswer).
var allowed = func() map[string]command {
	rows := []command{
		// Keys in general.
		{"DEL", kAll, fWrite}, {"UNLINK", kAll, fWrite}, {"EXISTS", kAll, 0},
		{"TYPE", kOne, 0}, {"TOUCH", kAll, 0},
		// Expiry.
		{"EXPIRE", kOne, fWrite | fExpire}, {"PEXPIRE", kOne, fWrite | fExpire},
		{"EXPIREAT", kOne, fWrite | fExpire}, {"PEXPIREAT", kOne, fWrite | fExpire},
		{"PERSIST", kOne, fWrite | fExpire}, {"TTL", kOne, 0}, {"PTTL", kOne, 0},
		{"EXPIRETIME", kOne, 0}, {"PEXPIRETIME", kOne, 0},
		// Strings.
		{"GET", kOne, 0}, {"SET", kOne, fWrite}, {"SETNX", kOne, fWrite},
		{"SETEX", kOne, fWrite}, {"PSETEX", kOne, fWrite}, {"GETSET", kOne, fWrite},
		{"GETDEL", kOne, fWrite}, {"GETEX", kOne, fWrite | fExpire}, {"MGET", kAll, 0},
		{"MSET", kPairs, fWrite}, {"MSETNX", kPairs, fWrite}, {"APPEND", kOne, fWrite},
		{"STRLEN", kOne, 0}, {"GETRANGE", kOne, 0}, {"SUBSTR", kOne, 0}, {"DELEX", kOne, fWrite},
		{"SETRANGE", kOne, fWrite}, {"INCR", kOne, fWrite}, {"DECR", kOne, fWrite},
		{"INCRBY", kOne, fWrite}, {"DECRBY", kOne, fWrite}, {"INCRBYFLOAT", kOne, fWrite},
		{"LCS", kTwo, 0}, {"SETBIT", kOne, fWrite}, {"GETBIT", kOne, 0},
		{"BITCOUNT", kOne, 0}, {"BITPOS", kOne, 0}, {"BITFIELD", kOne, fWrite},
		{"BITFIELD_RO", kOne, 0}, {"BITOP", keySpec{first: 2, last: -1, step: 1}, fWrite},
		// Hashes.
		{"HDEL", kOne, fWrite}, {"HEXISTS", kOne, 0}, {"HGET", kOne, 0},
		{"HINCRBY", kOne, fWrite}, {"HINCRBYFLOAT", kOne, fWrite},
		{"HLEN", kOne, 0}, {"HMGET", kOne, 0}, {"HMSET", kOne, fWrite}, {"HSET", kOne, fWrite},
		{"HSETNX", kOne, fWrite}, {"HSTRLEN", kOne, 0},
		{"HEXPIRE", kOne, fWrite}, {"HPEXPIRE", kOne, fWrite}, {"HEXPIREAT", kOne, fWrite},
		{"HPEXPIREAT", kOne, fWrite}, {"HPERSIST", kOne, fWrite}, {"HTTL", kOne, 0},
		{"HPTTL", kOne, 0}, {"HEXPIRETIME", kOne, 0}, {"HPEXPIRETIME", kOne, 0},
		{"HGETDEL", kOne, fWrite}, {"HGETEX", kOne, fWrite}, {"HSETEX", kOne, fWrite},
		// Lists.
		{"LINDEX", kOne, 0}, {"LINSERT", kOne, fWrite}, {"LLEN", kOne, 0},
		{"LMOVE", kTwo, fWrite}, {"LMPOP", kNum, fWrite}, {"LPOP", kOne, fWrite},
		{"LPOS", kOne, 0}, {"LPUSH", kOne, fWrite}, {"LPUSHX", kOne, fWrite},
		{"LRANGE", kOne, 0}, {"LREM", kOne, fWrite}, {"LSET", kOne, fWrite},
		{"LTRIM", kOne, fWrite}, {"RPOP", kOne, fWrite}, {"RPOPLPUSH", kTwo, fWrite},
		{"RPUSH", kOne, fWrite}, {"RPUSHX", kOne, fWrite},
		// Sets.
		{"SADD", kOne, fWrite}, {"SCARD", kOne, 0}, {"SDIFFSTORE", kAll, fWrite},
		{"SINTERCARD", kNum, 0}, {"SINTERSTORE", kAll, fWrite}, {"SISMEMBER", kOne, 0},
		{"SMISMEMBER", kOne, 0}, {"SMOVE", kTwo, fWrite}, {"SREM", kOne, fWrite},
		{"SUNIONSTORE", kAll, fWrite},
		// Sorted sets.
		{"ZADD", kOne, fWrite}, {"ZCARD", kOne, 0}, {"ZCOUNT", kOne, 0},
		{"ZDIFF", kNum, 0}, {"ZDIFFSTORE", kDstNum, fWrite}, {"ZINCRBY", kOne, fWrite},
		{"ZINTER", kNum, 0}, {"ZINTERCARD", kNum, 0}, {"ZINTERSTORE", kDstNum, fWrite},
		{"ZLEXCOUNT", kOne, 0}, {"ZMPOP", kNum, fWrite}, {"ZMSCORE", kOne, 0},
		{"ZPOPMAX", kOne, fWrite}, {"ZPOPMIN", kOne, fWrite},
		{"ZRANGE", kOne, 0}, {"ZRANGEBYLEX", kOne, 0}, {"ZRANGEBYSCORE", kOne, 0},
		{"ZRANGESTORE", kTwo, fWrite}, {"ZRANK", kOne, 0}, {"ZREM", kOne, fWrite},
		{"ZREMRANGEBYLEX", kOne, fWrite}, {"ZREMRANGEBYRANK", kOne, fWrite},
		{"ZREMRANGEBYSCORE", kOne, fWrite}, {"ZREVRANGE", kOne, 0},
		{"ZREVRANGEBYLEX", kOne, 0}, {"ZREVRANGEBYSCORE", kOne, 0}, {"ZREVRANK", kOne, 0},
		{"ZSCORE", kOne, 0}, {"ZUNION", kNum, 0},
		{"ZUNIONSTORE", kDstNum, fWrite},
		// HyperLogLogs: registers set by each element's hash, the same on
		// every backend whatever the encoding (sparse or dense).
		{"PFADD", kOne, fWrite}, {"PFCOUNT", kAll, fCaches}, {"PFMERGE", kAll, fWrite},
		// Geo: a sorted set scored by geohash; searches walk it in its own
		// (score, member) order, which identical content shares.
		{"GEOADD", kOne, fWrite}, {"GEOPOS", kOne, 0}, {"GEODIST", kOne, 0},
		{"GEOHASH", kOne, 0}, {"GEOSEARCH", kOne, 0}, {"GEOSEARCHSTORE", kTwo, fWrite},
		{"GEORADIUS_RO", kOne, 0}, {"GEORADIUSBYMEMBER_RO", kOne, 0},
		// Streams, by content only: forms.go refuses the id * (each
		// backend's clock) and the approximate trim ~ (each backend's node
		// layout).
		{"XADD", kOne, fWrite}, {"XLEN", kOne, 0}, {"XRANGE", kOne, 0},
		{"XREVRANGE", kOne, 0}, {"XDEL", kOne, fWrite}, {"XTRIM", kOne, fWrite},
		{"XSETID", kOne, fWrite},
		// Copies and sorts within the declared keys: forms.go refuses
		// COPY … DB and SORT … BY/GET.
		{"COPY", kTwo, fWrite}, {"SORT", kSort, fWrite}, {"SORT_RO", kOne, 0},
		// The clock, read-only: each backend's own, as PEXPIRE uses it, so
		// it is trusted to agree within the clock drift Redlock assumes.
		{"TIME", kNone, fTime},
		// Messages: the channel is not a key and may come from anywhere.
		{"PUBLISH", kNone, fPublish}, {"SPUBLISH", kNone, fPublish},
	}
	m := make(map[string]command, len(rows))
	for _, c := range rows {
		if _, dup := m[c.name]; dup {
			panic("lua: duplicate command " + c.name)
		}
		m[c.name] = c
	}
	return m
}()

// lookup finds a command of the allow-list by name, in any case.
func lookup(name string) (command, bool) {
	c, ok := allowed[strings.ToUpper(name)]
	return c, ok
}

// Callable reports whether a script run by vote may call the command
// (any case): the allow-list, and the reads whose reply has an order of
// each backend's own, which the run-time check sorts.
func Callable(name string) bool {
	if _, ok := lookup(name); ok {
		return true
	}
	_, ok := lookupUnordered(name)
	return ok
}

// ownAnswer lists the key-local commands left off the allow-list because
// each backend answers them its own way even when all hold the same data:
// run by vote, a pick differs between backends (SPOP removes a different
// member on each, and the backends diverge for good), and an order follows
// each backend's encoding and history, so a script that returns it, indexes
// it or writes in its order differs too.
var ownAnswer = map[string]string{
	"SPOP": "removes a random member", "SRANDMEMBER": "picks random members",
	"HRANDFIELD": "picks random fields", "ZRANDMEMBER": "picks random members",
	"RANDOMKEY": "picks a random key of the whole keyspace",
	"SMEMBERS":  orderOfItsOwn, "SINTER": orderOfItsOwn, "SUNION": orderOfItsOwn,
	"SDIFF": orderOfItsOwn, "HKEYS": orderOfItsOwn, "HVALS": orderOfItsOwn,
	"HGETALL": orderOfItsOwn,
	"SSCAN":   "walks the set in an order and with cursors of its own",
	"HSCAN":   "walks the hash in an order and with cursors of its own",
	"ZSCAN":   "walks the sorted set with cursors of its own",
}

// orderOfItsOwn is why an unordered reply is refused anywhere but as the
// script's own reply.
const orderOfItsOwn = "answers in an order of its own"

// unordered are the read-only commands whose array reply has no order two
// backends share: a script may return their reply (reply.go compares it as
// a set or map), never use it otherwise (ownAnswer).
var unordered = map[string]command{
	"SMEMBERS": {"SMEMBERS", kOne, 0}, "SINTER": {"SINTER", kAll, 0},
	"SUNION": {"SUNION", kAll, 0}, "SDIFF": {"SDIFF", kAll, 0},
	"HKEYS": {"HKEYS", kOne, 0}, "HVALS": {"HVALS", kOne, 0},
	"HGETALL": {"HGETALL", kOne, 0},
}

// lookupUnordered finds an unordered-reply command by name, any case.
func lookupUnordered(name string) (command, bool) {
	c, ok := unordered[strings.ToUpper(name)]
	return c, ok
}

// whyNot says, in words a user understands, why a command that is not on
// the allow-list cannot run by vote from a script.
func whyNot(name string) string { return whyNotIn(name, true) }

// whyNotIn is whyNot, in a script or (inScript false) sent as a command.
func whyNotIn(name string, inScript bool) string {
	up := strings.ToUpper(name)
	if why, ok := ownAnswer[up]; ok {
		if _, ok := unordered[up]; ok {
			return up + " " + why + " on each backend (its reply may only be returned as the script's reply, which the vote compares as a set), so the backends would answer or change differently"
		}
		return up + " " + why + " on each backend, so the backends would answer or change differently"
	}
	switch up {
	case "KEYS", "SCAN":
		return up + " scans the whole keyspace"
	case "DBSIZE":
		return "DBSIZE counts the whole keyspace"
	case "FLUSHALL", "FLUSHDB":
		return up + " empties the database"
	case "SELECT", "SWAPDB", "MOVE":
		return up + " reaches another database"
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO", "SCRIPT", "FUNCTION":
		return up + " runs other scripts"
	case "RENAME", "RENAMENX":
		return up + notListedIn(inScript)
	case "BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "WAIT", "WAITAOF":
		return up + " blocks"
	case "XREAD":
		return "XREAD blocks (BLOCK) and names its keys after STREAMS: read a stream with XRANGE or XREVRANGE"
	case "XREADGROUP":
		return "XREADGROUP blocks (BLOCK) and records each delivery in a consumer group with the backend's own clock"
	case "XGROUP", "XACK", "XPENDING", "XCLAIM", "XAUTOCLAIM":
		return up + " keeps a stream's consumer groups, whose pending entries carry each backend's own clock (idle times, delivery times)"
	case "XINFO":
		return "XINFO reports each backend's own stream layout (radix tree nodes) and consumer groups' clocks"
	case "GEORADIUS", "GEORADIUSBYMEMBER":
		return up + " (deprecated) may write to keys named in its STORE and STOREDIST options: use GEOSEARCH, GEOSEARCHSTORE or " + up + "_RO"
	case "DUMP":
		return "DUMP answers in each backend's own serialisation, whose encoding follows the key's history"
	case "RESTORE", "RESTORE-ASKING":
		return up + " writes a serialised value whose size, type and expiry the proxy cannot check against its bounds"
	case "MIGRATE":
		return "MIGRATE moves keys to another server"
	case "PFDEBUG", "PFSELFTEST", "REPLCONF", "ASKING", "READONLY", "READWRITE":
		if !inScript {
			return up + " administers or inspects one server, and the proxy fronts several: administer each backend directly"
		}
		return up + " administers or inspects the server"
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR":
		if !inScript && up == "MONITOR" {
			return "MONITOR streams the commands one server runs, and behind the proxy each backend runs the proxy's quorum operations, not the clients' commands"
		}
		return up + " cannot be called from a script"
	case "CONFIG", "DEBUG", "SHUTDOWN", "SAVE", "BGSAVE", "BGREWRITEAOF", "ACL", "CLIENT", "MODULE",
		"REPLICAOF", "SLAVEOF", "CLUSTER", "FAILOVER", "LATENCY", "MEMORY", "OBJECT", "SLOWLOG",
		"INFO", "LASTSAVE", "ROLE", "SYNC", "PSYNC", "RESET", "COMMAND", "LOLWUT", "PUBSUB":
		if !inScript {
			return up + " administers or inspects one server, and the proxy fronts several: administer each backend directly"
		}
		return up + " administers or inspects the server"
	}
	return up + notListedIn(inScript)
}

// notListed is whyNot's reason for a command it knows nothing more of.
const notListed = " is not on the list of key-local commands"

// notListedIn is notListed, in a script or sent as a command.
func notListedIn(inScript bool) string {
	if inScript {
		return notListed
	}
	return " is not among the commands the proxy runs by vote on every backend"
}

// arg is what the analysis knows of one argument of a call: whether it
// comes from the declared KEYS (directly or by concatenation: derived,
// starting with prefix) and its text when it is a literal.
type arg struct {
	keyish  bool
	derived bool
	prefix  string
	literal string
	isLit   bool
}

// badKey returns the first position (1 = first argument after the command
// name) that is a key position of spec but whose argument does not come
// from KEYS, or 0 when every key argument does. args are the call's
// arguments after the name; tail, when not nil, stands for any number of
// further arguments (a multi-value expression such as unpack(KEYS) last).
// A numkeys count that is not a literal makes every later argument a
// possible key.
func (s keySpec) badKey(args []arg, tail *arg) int {
	return s.firstFailing(args, tail, func(a arg) bool { return a.keyish })
}

// keyArgs calls f with each argument in a key position of spec (the tail
// once when it may hold keys).
func (s keySpec) keyArgs(args []arg, tail *arg, f func(arg)) {
	s.firstFailing(args, tail, func(a arg) bool { f(a); return true })
}

// firstFailing returns the first key position of spec whose argument ok
// refuses, or 0; see badKey.
func (s keySpec) firstFailing(args []arg, tail *arg, ok func(arg) bool) int {
	at := func(p int) (arg, bool) {
		if p <= len(args) {
			return args[p-1], true
		}
		if tail != nil {
			return *tail, true
		}
		return arg{}, false // missing: Redis refuses the call itself
	}
	// Positions beyond the fixed arguments all read the tail, so checking
	// up to len(args)+1 covers every case.
	limit := len(args)
	if tail != nil {
		limit++
	}
	check := func(p int) bool {
		a, present := at(p)
		return !present || ok(a)
	}
	if s.first > 0 {
		last := s.last
		if last < 0 {
			last = limit
		}
		for p := s.first; p <= last && p <= limit; p += s.step {
			if !check(p) {
				return p
			}
		}
		// A step-2 list running into the tail: the tail holds keys and
		// values in turn, so all of it must come from KEYS.
		if s.last < 0 && tail != nil && !ok(*tail) && s.step > 1 {
			return len(args) + 1
		}
	}
	if s.numkeys > 0 {
		a, ok := at(s.numkeys)
		if !ok {
			return 0
		}
		n, err := ParseInt(a.literal)
		if !a.isLit || err != nil || n < 0 || n > int64(limit-s.numkeys) {
			for p := s.numkeys + 1; p <= limit; p++ {
				if !check(p) {
					return p
				}
			}
			return 0
		}
		for p := s.numkeys + 1; p <= s.numkeys+int(n) && p <= limit; p++ {
			if !check(p) {
				return p
			}
		}
	}
	return 0
}

// RunCommand is one command a script by vote may call, as the wrapper on
// the backends checks it at run time (redlock/script.Command): key
// positions as keySpec counts them.
type RunCommand struct {
	Name                  string
	First, Last, Step     int
	NumKeys               int
	Write, Store, Publish bool
	Unordered, Pairs      bool // an unordered reply (HGETALL: field/value pairs)
}

// RunCommands lists the commands a script by vote may call: the
// allow-list, and the unordered reads, whose replies the wrapper sorts
// before the script sees them.
func RunCommands() []RunCommand {
	var out []RunCommand
	add := func(c command, unordered bool) {
		out = append(out, RunCommand{Name: c.name, First: c.keys.first, Last: c.keys.last, Step: c.keys.step,
			NumKeys: c.keys.numkeys, Write: c.flags&fWrite != 0, Store: c.keys.store, Publish: c.flags&fPublish != 0,
			Unordered: unordered, Pairs: c.name == "HGETALL"})
	}
	for _, c := range allowed {
		add(c, false)
	}
	for _, c := range unordered {
		add(c, true)
	}
	slices.SortFunc(out, func(a, b RunCommand) int { return strings.Compare(a.Name, b.Name) })
	return out
}
