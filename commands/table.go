package commands

import (
	"context"
	"strings"
	"unicode/utf8"
)

// Flag describes when a command may run.
type Flag uint16

const (
	// NoAuth commands run before the client has authenticated.
	NoAuth Flag = 1 << iota
	// Admin commands act on the whole proxy: only users with admin = true
	// may run them (users.go).
	Admin
	// InMulti commands may be queued between MULTI and EXEC (tx.go).
	InMulti
	// TxControl commands run at once even inside MULTI.
	TxControl
	// PubSub commands are allowed on a RESP2 connection in subscribed mode.
	PubSub
	// AnyUser commands (the connection's own handshake and introspection)
	// run for every authenticated user, whatever its commands list.
	AnyUser
	// Barrier commands change the connection's state or every key (AUTH,
	// HELLO, MULTI, SUBSCRIBE, FLUSHDB, …): among a connection's pipelined
	// commands each runs alone, after every earlier one and before every
	// later one (Plan).
	Barrier
	// Local commands are answered from the proxy's own state, without a
	// backend round trip (PING, INFO, CLIENT, …).
	Local
	// Reads commands read their keys: a tracking client tracks them
	// (tracking.go), and a transaction may queue them (tx.go) unless they
	// also write.
	Reads
	// Writes commands change their keys: a NOLOOP tracking client is not
	// told of its own change.
	Writes
	// Blocking commands wait for data (BLPOP): Plan makes them Blocks
	// barriers.
	Blocking
)

// handler runs one command. args[0] is the command name as sent.
type handler func(d *Dispatcher, ctx context.Context, c *Client, args [][]byte) Reply

// Command is one row of the command table: everything about a command.
type Command struct {
	Name    string // upper case
	Arity   int    // Redis convention: n exact, -n at least n (name included)
	Flags   Flag
	Key     int // position of the first key, 0 if none (COMMAND INFO)
	LastKey int // position of the last key: 0 the same as Key, -1 the last argument
	KeyStep int // positions between keys (MSET: 2); 0: 1
	// NumKeys is the position of a count of the keys that follow it
	// (EVAL: 2); 0: none. Such a row finds its keys by parsing (keys).
	NumKeys int
	// Movable: keys may also stand where Key, LastKey and NumKeys do not
	// say (SORT … STORE dst): COMMAND INFO reports movablekeys.
	Movable bool
	Group   string
	// Dialect is how the command reaches a lock, as Observe names it
	// (observe.go); "" for commands that touch no lock.
	Dialect string
	Summary string
	run     handler
	keys    func(args [][]byte) [][]byte // keys found by parsing (EVAL numkeys); overrides Key/LastKey; nil: invalid
	// runKeys is the handler of a row with keys, in place of run: it is
	// given what was parsed of the call once (parsedCall: its keys).
	runKeys func(d *Dispatcher, ctx context.Context, c *Client, args [][]byte, p parsedCall) Reply
	lower   string // Name in lower case, for replies and CLIENT LIST
	// subs: the arity of each subcommand (upper case, name included) of a
	// container command (CLIENT ID); its full name is "client|id".
	subs map[string]int
	// reply turns what a script by vote got from the command into what
	// the command alone answers (keyed rows: keyedReply); nil: as it is.
	reply func(c *Client, args [][]byte, r Reply) Reply
}

// table is the one list of commands. A duplicate name panics at start.
var table = []Command{
	// Native lock commands (lock.go, wait.go, session.go, info.go).
	{Name: "LOCK", Arity: -3, Key: 1, Group: "lock", Dialect: DialectNative, Flags: Writes, Summary: "Acquires a quorum lock: LOCK key ttl-ms [WAIT ms] [TOKEN token] [FENCE] [SESSION]", run: (*Dispatcher).lock},
	{Name: "UNLOCK", Arity: 3, Key: 1, Flags: Writes, Group: "lock", Dialect: DialectNative, Summary: "Releases a lock held with token: UNLOCK key token", run: (*Dispatcher).unlock},
	{Name: "EXTEND", Arity: 4, Key: 1, Flags: Writes, Group: "lock", Dialect: DialectNative, Summary: "Extends a lock held with token: EXTEND key token ttl-ms", run: (*Dispatcher).extend},
	{Name: "MLOCK", Arity: -3, Key: 2, LastKey: -1, Group: "lock", Dialect: DialectNative, Flags: Writes, Summary: "Acquires several keys, all or none: MLOCK ttl-ms key [key ...]", run: (*Dispatcher).mlock},
	{Name: "MUNLOCK", Arity: -3, Key: 2, LastKey: -1, Flags: Writes, Group: "lock", Dialect: DialectNative, Summary: "Releases an MLOCK: MUNLOCK token key [key ...]", run: (*Dispatcher).munlock},
	{Name: "LOCKINFO", Arity: 2, Key: 1, Group: "lock", Dialect: DialectNative, Summary: "Validity, nodes holding, fence and holder of a lock; never the token", run: (*Dispatcher).lockinfo},
	{Name: "LOCKADMIN", Arity: -2, Key: 2, Flags: Admin | Writes, Group: "lock", Dialect: DialectNative, Summary: "Operator verbs: RELEASE key (whatever its token), WHO key (who holds it), HOLDS (the tier's holds)", run: (*Dispatcher).lockadmin},
	{Name: "LOCKS", Arity: 1, Flags: Admin | Local, Group: "lock", Dialect: DialectNative, Summary: "The locks held through this proxy, with holder and age", run: (*Dispatcher).locks},

	// Single-Redis dialect (legacy.go): what lock code written for one Redis sends.
	{Name: "SET", Arity: -3, Key: 1, Flags: Writes, Group: "string", Dialect: DialectLegacy, Summary: "SET NX acquires, SET IFEQ|IFNE|IFDEQ|IFDNE writes on a condition (IFEQ of the token renews), SET XX of the held value extends, plain SET writes on every backend", run: (*Dispatcher).set},
	{Name: "SETNX", Arity: 3, Key: 1, Group: "string", Dialect: DialectLegacy, Flags: Writes, Summary: "Acquires with default_ttl", run: (*Dispatcher).setnx},
	{Name: "GET", Arity: 2, Key: 1, Flags: Reads, Group: "string", Dialect: DialectLegacy, Summary: "The value a quorum of backends holds", run: (*Dispatcher).get},
	{Name: "GETSET", Arity: 3, Key: 1, Flags: Reads | Writes, Group: "string", Dialect: DialectLegacy, Summary: "Quorum-safe GETSET", run: (*Dispatcher).getset},
	{Name: "DEL", Arity: -2, Key: 1, LastKey: -1, Flags: InMulti | Writes, Group: "generic", Dialect: DialectLegacy, Summary: "Deletes on every backend; counts keys held on a quorum", run: (*Dispatcher).del},
	{Name: "UNLINK", Arity: -2, Key: 1, LastKey: -1, Flags: Writes, Group: "generic", Dialect: DialectLegacy, Summary: "DEL: deletes on every backend; counts keys held on a quorum", run: (*Dispatcher).del},
	{Name: "EXISTS", Arity: -2, Key: 1, LastKey: -1, Flags: Reads, Group: "generic", Dialect: DialectLegacy, Summary: "Counts keys held on a quorum", run: (*Dispatcher).exists},
	{Name: "PERSIST", Arity: 2, Key: 1, Flags: Writes, Group: "generic", Dialect: DialectLegacy, Summary: "Keeps the key without expiry: the proxy renews its lease while it holds its value", run: (*Dispatcher).persist},
	{Name: "PTTL", Arity: 2, Key: 1, Flags: Reads, Group: "generic", Dialect: DialectLegacy, Summary: "How long (ms) a quorum of backends will still hold the key", run: (*Dispatcher).pttl},
	{Name: "TYPE", Arity: 2, Key: 1, Flags: Reads, Group: "generic", Dialect: DialectLegacy, Summary: "The type of the key a quorum of backends holds", run: (*Dispatcher).typeOf},
	{Name: "TTL", Arity: 2, Key: 1, Flags: Reads, Group: "generic", Dialect: DialectLegacy, Summary: "How long (s) a quorum of backends will still hold the key", run: (*Dispatcher).pttl},
	{Name: "PEXPIRE", Arity: -3, Key: 1, Flags: InMulti | Writes, Group: "generic", Dialect: DialectLegacy, Summary: "Sets the ttl (ms) on a quorum [NX|XX|GT|LT]", run: (*Dispatcher).expire},
	{Name: "EXPIRE", Arity: -3, Key: 1, Flags: InMulti | Writes, Group: "generic", Dialect: DialectLegacy, Summary: "Sets the ttl (s) on a quorum [NX|XX|GT|LT]", run: (*Dispatcher).expire},
	{Name: "PEXPIREAT", Arity: -3, Key: 1, Flags: Writes, Group: "generic", Dialect: DialectLegacy, Summary: "Sets the deadline (Unix ms) on a quorum [NX|XX|GT|LT]", run: (*Dispatcher).expire},
	{Name: "EXPIREAT", Arity: -3, Key: 1, Flags: Writes, Group: "generic", Dialect: DialectLegacy, Summary: "Sets the deadline (Unix s) on a quorum [NX|XX|GT|LT]", run: (*Dispatcher).expire},
	{Name: "PEXPIRETIME", Arity: 2, Key: 1, Flags: Reads, Group: "generic", Dialect: DialectLegacy, Summary: "When (Unix ms) a quorum of backends stops holding the key", run: (*Dispatcher).expiretime},
	{Name: "EXPIRETIME", Arity: 2, Key: 1, Flags: Reads, Group: "generic", Dialect: DialectLegacy, Summary: "When (Unix s) a quorum of backends stops holding the key", run: (*Dispatcher).expiretime},
	{Name: "DELEX", Arity: -2, Key: 1, Flags: Writes, Group: "string", Dialect: DialectLegacy, Summary: "DELEX key [IFEQ|IFNE value | IFDEQ|IFDNE digest]: conditional delete, a release when it deletes a lock's token (Redis 8.4)", run: (*Dispatcher).delex},
	{Name: "DIGEST", Arity: 2, Key: 1, Flags: Reads, Group: "string", Dialect: DialectLegacy, Summary: "The XXH3 digest (16 hex digits) of the value a quorum of backends holds (Redis 8.4)", run: (*Dispatcher).digest},
	{Name: "DELIFEQ", Arity: 3, Key: 1, Flags: Writes, Group: "string", Dialect: DialectLegacy, Summary: "Compare-and-delete (Valkey 9)", run: (*Dispatcher).delifeq},
	{Name: "FLUSHDB", Arity: -1, Flags: Admin | Barrier | Writes, Group: "server", Summary: "Deletes every lock: refused unless allow_flush", run: (*Dispatcher).flush},
	{Name: "FLUSHALL", Arity: -1, Flags: Admin | Barrier | Writes, Group: "server", Summary: "Deletes every lock: refused unless allow_flush", run: (*Dispatcher).flush},

	// Counters (counters.go): INCR grows across the backends.
	{Name: "INCR", Arity: 2, Key: 1, Flags: Writes, Group: "string", Dialect: DialectLegacy, Summary: "Increments on every backend; the largest count, written back to a quorum", run: (*Dispatcher).incr},
	{Name: "INCRBY", Arity: 3, Key: 1, Flags: Writes, Group: "string", Dialect: DialectLegacy, Summary: "INCR by a positive increment", run: (*Dispatcher).incrby},
	{Name: "DECR", Arity: 2, Key: 1, Flags: Writes, Group: "string", Dialect: DialectLegacy, Summary: "Refused: counters only grow", run: (*Dispatcher).decr},
	{Name: "DECRBY", Arity: 3, Key: 1, Flags: Writes, Group: "string", Dialect: DialectLegacy, Summary: "Refused: counters only grow", run: (*Dispatcher).decr},

	// Sorted sets outside scripts, by vote (sortedsets.go): semaphore releases.
	{Name: "ZREM", Arity: -3, Key: 1, Flags: Writes, Group: "sorted-set", Dialect: DialectLegacy, Summary: "Removes members on every backend; the count a quorum agreed on", run: (*Dispatcher).zrem},
	{Name: "ZCARD", Arity: 2, Key: 1, Flags: Reads, Group: "sorted-set", Dialect: DialectLegacy, Summary: "The number of members a quorum of backends agreed on", run: (*Dispatcher).zcard},

	// Scripts: recognised lock operations carried out, others run by vote
	// (scripts.go, meaning.go, commands/lua).
	{Name: "EVAL", Arity: -3, NumKeys: 2, Flags: Reads | Writes, Group: "scripting", Dialect: DialectScript, Summary: "Runs a lock script as the quorum operation it means, or any script that touches only its keys on every backend by vote", runKeys: (*Dispatcher).eval, keys: scriptKeys},
	{Name: "EVALSHA", Arity: -3, NumKeys: 2, Flags: Reads | Writes, Group: "scripting", Dialect: DialectScript, Summary: "EVAL of a script loaded by SHA1", runKeys: (*Dispatcher).evalsha, keys: scriptKeys},
	{Name: "EVAL_RO", Arity: -3, NumKeys: 2, Flags: Reads, Group: "scripting", Dialect: DialectScript, Summary: "EVAL of a script that must not write: one whose shebang lacks no-writes, or that may write or publish, is refused before it runs", runKeys: (*Dispatcher).evalRO, keys: scriptKeys},
	{Name: "EVALSHA_RO", Arity: -3, NumKeys: 2, Flags: Reads, Group: "scripting", Dialect: DialectScript, Summary: "EVAL_RO of a script loaded by SHA1", runKeys: (*Dispatcher).evalshaRO, keys: scriptKeys},
	{Name: "SCRIPT", Arity: -2, Flags: Barrier | Local, Group: "scripting", Dialect: DialectScript, Summary: "SCRIPT LOAD|EXISTS|FLUSH of the proxy's script cache", subs: scriptSubArity, run: (*Dispatcher).scriptCmd},

	// The StackExchange.Redis lock transaction (tx.go).
	{Name: "WATCH", Arity: -2, Key: 1, LastKey: -1, Flags: TxControl | Barrier | Local, Group: "transactions", Dialect: DialectTx, Summary: "Watches keys for the lock transaction", run: (*Dispatcher).watch},
	{Name: "UNWATCH", Arity: 1, Flags: TxControl | Barrier | Local, Group: "transactions", Dialect: DialectTx, Summary: "Forgets watched keys", run: (*Dispatcher).unwatch},
	{Name: "MULTI", Arity: 1, Flags: TxControl | Barrier | Local, Group: "transactions", Dialect: DialectTx, Summary: "Starts the lock transaction", run: (*Dispatcher).multi},
	{Name: "EXEC", Arity: 1, Flags: TxControl | Barrier, Group: "transactions", Dialect: DialectTx, Summary: "Runs it as compare-and-delete or compare-and-expire", run: (*Dispatcher).exec},
	{Name: "DISCARD", Arity: 1, Flags: TxControl | Barrier | Local, Group: "transactions", Dialect: DialectTx, Summary: "Abandons the transaction", run: (*Dispatcher).discard},

	// Pub/sub relayed through the backends, each message delivered once (pubsub.go, redlock/relay).
	{Name: "SUBSCRIBE", Arity: -2, Flags: PubSub | Barrier, Group: "pubsub", Summary: "Subscribes on every backend; each message delivered once", run: (*Dispatcher).subscribe},
	{Name: "PSUBSCRIBE", Arity: -2, Flags: PubSub | Barrier, Group: "pubsub", Summary: "Subscribes to patterns on every backend; each message delivered once", run: (*Dispatcher).subscribe},
	{Name: "SSUBSCRIBE", Arity: -2, Flags: PubSub | Barrier, Group: "pubsub", Summary: "Subscribes to shard channels on every backend; each message delivered once", run: (*Dispatcher).subscribe},
	{Name: "UNSUBSCRIBE", Arity: -1, Flags: PubSub | Barrier | Local, Group: "pubsub", Summary: "Leaves channels", run: (*Dispatcher).unsubscribe},
	{Name: "PUNSUBSCRIBE", Arity: -1, Flags: PubSub | Barrier | Local, Group: "pubsub", Summary: "Leaves patterns", run: (*Dispatcher).unsubscribe},
	{Name: "SUNSUBSCRIBE", Arity: -1, Flags: PubSub | Barrier | Local, Group: "pubsub", Summary: "Leaves shard channels", run: (*Dispatcher).unsubscribe},
	{Name: "PUBLISH", Arity: 3, Group: "pubsub", Summary: "Publishes on every voting backend: the largest receiver count one reported", run: (*Dispatcher).publish},
	{Name: "SPUBLISH", Arity: 3, Group: "pubsub", Summary: "Publishes on a shard channel on every voting backend", run: (*Dispatcher).publish},
	{Name: "PUBSUB", Arity: -2, Flags: Local, Group: "pubsub", Summary: "CHANNELS NUMSUB NUMPAT SHARDCHANNELS SHARDNUMSUB of this proxy's subscribers", subs: pubsubSubArity, run: (*Dispatcher).pubsubCmd},

	// Lists as wake-up signals (lists.go): pushes on every voting backend, pops quorum-aware.
	{Name: "LPUSH", Arity: -3, Key: 1, Flags: Writes, Group: "list", Summary: "Pushes on every voting backend; the longest list's length", run: (*Dispatcher).push},
	{Name: "RPUSH", Arity: -3, Key: 1, Flags: Writes, Group: "list", Summary: "Pushes on every voting backend; the longest list's length", run: (*Dispatcher).push},
	{Name: "LPOP", Arity: -2, Key: 1, Flags: Writes, Group: "list", Summary: "Pops on every voting backend: the element (or, with a count, the elements) most of them popped", run: (*Dispatcher).pop},
	{Name: "RPOP", Arity: -2, Key: 1, Flags: Writes, Group: "list", Summary: "Pops on every voting backend: the element (or, with a count, the elements) most of them popped", run: (*Dispatcher).pop},
	{Name: "LLEN", Arity: 2, Key: 1, Flags: Reads, Group: "list", Summary: "The length a quorum of backends holds at least", run: (*Dispatcher).llen},
	{Name: "LMOVE", Arity: 5, Key: 1, LastKey: 2, Flags: Writes, Group: "list", Summary: "LPOP/RPOP then a push on every voting backend", run: (*Dispatcher).lmove},
	{Name: "BLPOP", Arity: -3, Key: 1, LastKey: -2, Flags: Writes | Blocking, Group: "list", Summary: "Blocks on every backend; the first element popped", run: (*Dispatcher).bpop},
	{Name: "BRPOP", Arity: -3, Key: 1, LastKey: -2, Flags: Writes | Blocking, Group: "list", Summary: "Blocks on every backend; the first element popped", run: (*Dispatcher).bpop},
	{Name: "BLMOVE", Arity: 6, Key: 1, LastKey: 2, Flags: Writes | Blocking, Group: "list", Summary: "A blocking pop, then a push on every voting backend", run: (*Dispatcher).blmove},
	{Name: "BRPOPLPUSH", Arity: 4, Key: 1, LastKey: 2, Flags: Writes | Blocking, Group: "list", Summary: "BLMOVE source destination RIGHT LEFT", run: (*Dispatcher).brpoplpush},

	// Connection commands (connection.go).
	{Name: "AUTH", Arity: -2, Flags: NoAuth | AnyUser | Barrier | Local, Group: "connection", Summary: "Authenticates the connection", run: (*Dispatcher).auth},
	{Name: "HELLO", Arity: -1, Flags: NoAuth | AnyUser | Barrier | Local, Group: "connection", Summary: "Handshakes: protocol version, auth, client name", run: (*Dispatcher).hello},
	{Name: "QUIT", Arity: -1, Flags: NoAuth | PubSub | TxControl | AnyUser | Barrier | Local, Group: "connection", Summary: "Closes the connection", run: (*Dispatcher).quit},
	{Name: "RESET", Arity: 1, Flags: NoAuth | PubSub | TxControl | AnyUser | Barrier | Local, Group: "connection", Summary: "Resets the connection state", run: (*Dispatcher).reset},
	{Name: "PING", Arity: -1, Flags: PubSub | AnyUser | Local, Group: "connection", Summary: "Returns PONG or the message", run: (*Dispatcher).ping},
	{Name: "ECHO", Arity: 2, Flags: AnyUser | Local, Group: "connection", Summary: "Returns the message", run: (*Dispatcher).echo},
	{Name: "SELECT", Arity: 2, Flags: AnyUser | Barrier | Local, Group: "connection", Summary: "Selects database 0 (the only one)", run: (*Dispatcher).selectDB},
	{Name: "CLIENT", Arity: -2, Flags: AnyUser | Barrier | Local, Group: "connection", Summary: "Connection introspection: SETNAME GETNAME SETINFO ID INFO LIST NO-EVICT NO-TOUCH HELP, and key tracking", subs: clientSubArity, run: (*Dispatcher).client},

	// Server commands (server.go).
	{Name: "INFO", Arity: -1, Flags: Local, Group: "server", Summary: "Server, client, backend and lock information", run: (*Dispatcher).info},
	{Name: "CONFIG", Arity: -2, Flags: Admin | Local, Group: "server", Summary: "CONFIG GET answers an empty list", subs: configSubArity, run: (*Dispatcher).config},
	{Name: "COMMAND", Arity: -1, Flags: AnyUser | Local, Group: "server", Summary: "Command introspection: COUNT DOCS INFO LIST GETKEYS HELP", subs: commandSubArity, run: (*Dispatcher).command},
	{Name: "CLUSTER", Arity: -2, Flags: Local, Group: "cluster", Summary: "Cluster support is disabled", run: (*Dispatcher).cluster},
	{Name: "TIME", Arity: 1, Flags: AnyUser | Local, Group: "server", Summary: "The proxy's time", run: (*Dispatcher).time},
	{Name: "DBSIZE", Arity: 1, Flags: Local, Group: "server", Summary: "Always 0: locks live on the backends", run: (*Dispatcher).dbsize},
	{Name: "ROLE", Arity: 1, Flags: AnyUser | Local, Group: "server", Summary: "Always a master without replicas", run: (*Dispatcher).role},
	{Name: "WAIT", Arity: 3, Flags: AnyUser | Local, Group: "generic", Summary: "0 at once: a master without replicas, whose writes are on a quorum when answered", run: (*Dispatcher).wait},
	{Name: "WAITAOF", Arity: 4, Flags: AnyUser | Local, Group: "generic", Summary: "[0, 0] at once: the backends' fsyncs are theirs", run: (*Dispatcher).wait},

	// Discovery of the proxy tier by the Sentinel protocol (sentinel.go).
	{Name: "SENTINEL", Arity: -2, Flags: AnyUser | Local, Group: "sentinel", Summary: "Sentinel discovery: GET-MASTER-ADDR-BY-NAME MASTERS MASTER SENTINELS REPLICAS MYID CKQUORUM", run: (*Dispatcher).sentinel},
}

// served is every command the proxy serves: the table, then a row for
// each command of the scripts' allow-list that the table has none for,
// run by vote (keyed.go). Both come from one list each, so a command
// added to the allow-list is served outside scripts too.
var served = append(table[:len(table):len(table)], keyedRows(table)...)

// commandIndex maps the upper-case name to its row.
var commandIndex = func() map[string]*Command {
	m := make(map[string]*Command, len(served))
	for i := range served {
		c := &served[i]
		if _, dup := m[c.Name]; dup {
			panic("commands: duplicate command " + c.Name)
		}
		c.lower = strings.ToLower(c.Name)
		m[c.Name] = c
	}
	return m
}()

// lookup finds a command by name in any case without allocating for
// names up to 32 bytes.
func (d *Dispatcher) lookup(name []byte) *Command {
	var buf [32]byte
	if len(name) > len(buf) {
		return nil
	}
	up := buf[:len(name)]
	for i, c := range name {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	return d.index[string(up)]
}

// keyRange is the first and last argument positions holding keys (first 0:
// none) for a command of n arguments, name included.
func (c *Command) keyRange(n int) (first, last int) {
	switch {
	case c.Key <= 0 || c.Key >= n:
		return 0, 0
	case c.LastKey < 0:
		return c.Key, n + c.LastKey
	case c.LastKey == 0:
		return c.Key, c.Key
	}
	return c.Key, min(c.LastKey, n-1)
}

// arityOK reports whether n arguments (name included) fit the arity.
func (c *Command) arityOK(n int) bool {
	if c.Arity >= 0 {
		return n == c.Arity
	}
	return n >= -c.Arity
}

// optionNames are the option words of LOCK, SET and EXPIRE, by their
// upper-case form.
var optionNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{"WAIT", "TOKEN", "FENCE", "SESSION",
		"NX", "XX", "GT", "LT", "GET", "EX", "PX", "EXAT", "PXAT", "KEEPTTL", "IFEQ", "IFNE", "IFDEQ", "IFDNE"} {
		m[n] = n
	}
	return m
}()

// option returns strings.ToUpper(string(b)) when that is one of
// optionNames, and "" otherwise (no option is empty), so that a switch
// over option words neither allocates nor changes meaning. ASCII input is
// upper-cased in a stack buffer; anything else takes strings.ToUpper, whose
// Unicode case mapping it must agree with ("ſ" upper-cases to "S").
func option(b []byte) string {
	var buf [16]byte
	if len(b) > len(buf) {
		return optionNames[strings.ToUpper(string(b))]
	}
	up := buf[:len(b)]
	for i, c := range b {
		if c >= utf8.RuneSelf {
			return optionNames[strings.ToUpper(string(b))]
		}
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	return optionNames[string(up)]
}
