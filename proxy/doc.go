// Package proxy is the network face of redlock-proxy: a redcon server with
// an input guard in front of redcon's parser, per-connection sessions,
// client limits and graceful shutdown.
//
// Every accepted connection is wrapped by the guard (guard.go), which
// validates RESP framing with limits (multibulk count, bulk length, inline
// length; stricter before AUTH) and hands redcon whole commands only; a
// violation is answered -ERR Protocol error: ... and the connection is
// closed. redcon then runs each connection's commands one after another on
// that connection's goroutine; each command goes to commands.Dispatcher
// with panic recovery, and the reply is encoded for the session's RESP
// version.
//
// Limits: max_clients (refused with -ERR max number of clients reached),
// an idle timeout, a write deadline on every write, and protected mode
// (with no password, only loopback clients are served).
//
// Shutdown(ctx) stops accepting, lets commands in flight finish until ctx
// is done (then cancels them), and closes every connection. It is
// idempotent.
//
// Safety: nothing here decides who holds a lock; the proxy keeps no lock
// state of its own, so several proxies may serve the same backends.
package proxy
