// Package backend is the proxy's client of its Redis backends: the one
// engine every connection to a backend runs on, a pipelined connection
// (Conn) with a queue of waiters and a Pipe that keeps one dialled on
// demand; and RedisNode, the client of one backend that package redlock
// runs its quorum over. A RedisNode keeps four Pipes, one per job so that
// none waits behind another's load (node.go: the calls, the probes, long
// commands and reads by vote, the SCRIPT KILL line: kill.go); the relay's
// RESP3 connections (subscriptions, tracking, blocking pops) run on the
// same engine, dialled by RedisNode.DialConn, with a push handler
// (Options.Push).
//
// What it decides: when a request is written (by its caller on an idle
// connection, else batched by the writer), that a request past its
// deadline is never written, and which reply is whose (replies answer
// requests in the order written; a request may yield several replies, of
// which it gets the last, or none; with a push handler, pushes and the
// replies no request awaits go to the handler). For a RedisNode: what a
// new connection runs before its first command (dial.go: TLS, AUTH,
// SELECT, the script limit, the INFO that reports a restart, probe.go),
// which connection each call goes on, and how a call is written (call.go:
// a Command from a fan-out, finished on the reader and handed to its
// Target without a goroutine; EVALSHA, then EVAL on NOSCRIPT; the native
// compare-and-delete a backend's version offers). What it trusts: package
// redlock for what each call means and for when to probe and to kill (the
// lock marker and the version companion that SetNX's script writes and
// reads are redlock's), go-redis to parse a backend URL, the backend to
// answer in order and to run each script atomically, and package resp to
// frame the replies; a reply that is not RESP fails the connection and
// every request on it.
//
// Auto-pipelining. Every lock operation sends one command to each backend,
// and many operations run at once: a Pipe shares one connection among all
// of them. A writer goroutine takes whatever requests are queued (up to
// maxBatch) and writes them with one write; a reader goroutine reads the
// replies in order and hands each to its caller. So N concurrent lock
// operations cost a few syscalls per backend instead of 2N, and no caller
// waits for a pooled connection. Requests that arrive while a write is in
// flight are queued, and the writer takes them all for its next write.
//
// A request that may be written by its caller (TrySend's inline: a direct
// call, or a fan-out launched while no other waits) and finds the
// connection idle (nothing queued, nothing unanswered) is written by its
// caller at once, so a lone request wakes no writer goroutine. One write
// at a time: the caller and the writer each hold busy while they put
// requests in flight and write them, so replies stay in the order written,
// and no request is written before one queued earlier (see tryInline).
//
// The queue and the in-flight list are channels, not a mutex's slices:
// under more runnable goroutines than cores, a sync.Mutex shared by every
// caller, the writer and the reader hands itself to a waiter that is not
// yet running and stalls the reader behind it (measured: more calls past
// their deadline under load), where a channel's send into its buffer does
// not wait.
//
// A caller waits for its reply until its own context ends; a reply that
// comes later is read and dropped, so the connection stays in step. A
// reply past the reader's bounds (resp.ErrTooDeep, resp.ErrTooLarge) is
// read whole and fails only its own request. A broken connection (a read
// error, bytes that are not RESP) fails every request in flight and is
// dialled again by the next request.
package backend
