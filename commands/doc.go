// Package commands turns RESP commands into calls of package lease, the
// one door to the keyspace (lease/doc.go): it holds no Redlock, and no
// handler updates the Manager's memory (the keys kept without expiry, the
// waiters to wake) by hand. It imports package redlock for its types,
// error sentinels and value helpers (NewToken, Reserved) only, and
// package redlock/script to make the scripts it hands the Manager: it
// runs no quorum operation of its own. A handler parses, calls the
// Manager, maps the error and replies, marking a refusal or a lack of
// quorum with its Outcome (observe.go). It is more than a thin adapter where clients need a
// connection's own state or the proxy's answer to a question Redis
// answers alone: the analysis of scripts (commands/lua) and carrying a
// recognised one out as the lock operation it means (meaning.go), the
// transactions (tx.go), key tracking (tracking.go) and subscriptions
// (pubsub.go, over redlock/relay), users and permissions (users.go), and
// the Sentinel protocol over the tier (sentinel.go).
//
// The command table (table.go) has one row per command: name, arity,
// flags, key positions, dialect, documentation and handler. The row is
// looked up once per command: Dispatcher.PlanFor finds it and
// Dispatcher.DoPlanned runs it, which checks
// arity, then authentication, then the user's permissions (users.go: the
// row's command, Admin flag and keys), then runs the handler. A handler parses all of its arguments before any I/O, then
// operates, then returns a Reply value (reply.go); package proxy encodes
// it for the client's RESP version (AppendReply), so RESP2 and RESP3
// differ only in the encoder.
//
// Wire error texts live in errors.go and copy Redis 7 where Redis has the
// same error. Errors from redlock and lease are mapped in one place
// (lockError: too few backends is -NOQUORUM, node errors are logged, never
// sent to clients), after the handler took out the refusals its command
// answers in its own convention (a lock held by another owner: a null
// reply for LOCK, 0 for SETNX).
//
// Files, one per command group: lock.go (LOCK, UNLOCK, EXTEND, MLOCK,
// MUNLOCK), info.go (LOCKINFO, LOCKS), legacy.go (the single-Redis
// dialect: SET, SETNX, GET, DEL, PTTL, …), conditional.go (SET … IFEQ|
// IFNE|IFDEQ|IFDNE, DELEX, DIGEST, DELIFEQ: the conditional writes of
// Redis 8.4 and Valkey 9 over the lock paths), scripts.go and meaning.go
// (EVAL, EVALSHA, SCRIPT: scripts recognised by commands/lua and carried
// out as lock operations, or run by vote), keyed.go (every other
// command of the scripts' allow-list, a generated row each, run by vote as
// a script that only calls it; the reason for commands that cannot), tx.go (the
// StackExchange.Redis lock transaction, and transactions of reads),
// pubsub.go (the subscribe family, PUBLISH, PUBSUB over redlock/relay),
// tracking.go (CLIENT TRACKING and CACHING: which reads are tracked),
// lists.go (list signals and blocking pops), connection.go (AUTH,
// HELLO, CLIENT, PING, …), server.go (INFO, COMMAND, CONFIG, …). Around
// them: dispatcher.go (Options, the run of a row), client.go (a connection's state),
// hooks.go (what reaches a connection outside its replies: pushes, the
// close watch, lock-lost notices), users.go and authlimit.go (users,
// permissions, failed AUTH by network), observe.go (the metrics hook:
// each command's Outcome, as its handler marked its reply — held,
// not_held, noquorum — never read again from the command's arguments or
// the reply's text).
//
// Safety: the commands add nothing to redlock's guarantees and take
// nothing away, with one caveat a client must know: a LOCK reply's
// validity is measured from when the proxy sent the request to the
// backends, so the time the reply spends on the way to the client is part
// of it. A client should treat the lock as held for validity minus its own
// round-trip to the proxy.
package commands
