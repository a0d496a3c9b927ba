// Package backend is the one engine every proxy connection to a Redis
// backend runs on: a pipelined connection (Conn) with a queue of waiters,
// and a Pipe that keeps one such connection dialled on demand. It carries
// the quorum's calls, the health probes, long commands and SCRIPT KILL
// (package redlock gives each of those a Pipe of its own, so that none
// waits behind another's load), and the relay's RESP3 connections
// (subscriptions, tracking, blocking pops), whose pushes go to a handler
// (Options.Push).
//
// What it decides: when a request is written (by its caller on an idle
// connection, else batched by the writer), that a request past its
// deadline is never written, and which reply is whose (replies answer
// requests in the order written; a request may yield several replies, of
// which it gets the last, or none; with a push handler, pushes and the
// replies no request awaits go to the handler). What it trusts: the dial
// function for everything about a new connection (TCP or TLS, AUTH,
// SELECT, the connect check: redlock's dialconn.go), the backend to
// answer in order, and package resp to frame the replies; a reply that is
// not RESP fails the connection and every request on it.
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
// call, or a flight launched while no other waits) and finds the
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
