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
// With Config.TLS the listener is TLS-only (tls.go): each handshake runs
// on its own goroutine under a deadline before redcon sees the connection,
// so the guard reads plaintext and a stalled handshake holds neither
// redcon's accept loop nor a client slot. A plaintext client is answered
// with one clear-text -ERR line and closed. Client certificates do not
// count as authentication: protected mode depends on the password alone.
//
// Two things reach a connection outside its command loop (commands.Hooks):
// a RESP3 push (a SESSION lock lost), written from another goroutine —
// guardConn.Write is atomic and redcon writes each batch of replies in one
// Write, so a push never lands inside a reply — and, while a command blocks
// (LOCK … WAIT), a background read of the socket that notices the client
// going away and keeps what it sent for redcon.
//
// Limits: max_clients (refused with -ERR max number of clients reached),
// an idle timeout, a write deadline on every write, and protected mode
// (with no password, only loopback clients are served).
//
// Shutdown(ctx) stops accepting, lets commands in flight finish until ctx
// is done (then cancels them), and closes every connection. It is
// idempotent.
//
// Observability (metrics.go, ops.go): Metrics holds the Prometheus metrics
// in a private registry, fed by commands.Options.Observe (lock operations
// by command, dialect and result; latency histograms) and read at scrape
// time from the backends' health, the client count and the SESSION and
// WAIT gauges. OpsServer serves them on metrics_listen with /healthz and
// /readyz (200 while a quorum of backends votes, 503 otherwise or once
// draining). docs/operations.md lists every metric.
//
// Safety: nothing here decides who holds a lock, so several proxies may
// serve the same backends.
package proxy
