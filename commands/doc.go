// Package commands turns RESP commands into lock operations: it is to
// package redlock what a thin protocol adapter is to a library.
//
// The command table (table.go) has one row per command: name, arity,
// flags, key positions, documentation and handler. Dispatcher.Do
// upper-cases the name, checks arity, then authentication, then the user's
// permissions (users.go: the row's command, Admin flag and keys), then runs
// the handler. A handler
// parses all of its arguments before any I/O, then operates, then returns
// a Reply value; package proxy encodes it for the client's RESP version
// (AppendReply), so RESP2 and RESP3 differ only in the encoder.
//
// Wire error texts live in errors.go and copy Redis 7 where Redis has the
// same error. Errors from redlock are mapped in one place (lockError): a
// lock held by another owner is a null reply, too few backends is
// -NOQUORUM, and node errors are logged, never sent to clients.
//
// Files: lock.go (LOCK, UNLOCK, EXTEND), wait.go (LOCK … WAIT: per-key
// FIFO queues with hand-off on release), session.go (LOCK … SESSION:
// renewal, release on close and shutdown, lock-lost notices), info.go
// (LOCKINFO, LOCKS, MLOCK, MUNLOCK), registry.go (the locks granted through
// this proxy and their waiters), connection.go (AUTH, HELLO, CLIENT, PING,
// ...), server.go (INFO, COMMAND, CONFIG, ...), users.go (users, password
// checks, permissions, key globs), authlimit.go (failed AUTH by network).
//
// The registry is memory, not authority: it decides how long a waiter
// sleeps, what LOCKINFO and LOCKS show and which locks a session renews,
// never who holds a lock; the backends' quorum does that.
//
// Safety: the commands add nothing to redlock's guarantees and take
// nothing away, with one caveat a client must know: a LOCK reply's
// validity is measured from when the proxy sent the request to the
// backends, so the time the reply spends on the way to the client is part
// of it. A client should treat the lock as held for validity minus its own
// round-trip to the proxy.
package commands
