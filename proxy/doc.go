// Package proxy is the network face of redlock-proxy: the listener, an
// input guard that checks every byte a client sends before it is parsed,
// per-connection sessions, client limits and graceful shutdown.
//
// Every accepted connection is wrapped by the guard (guard.go), which
// validates RESP framing with limits (multibulk count, bulk length, inline
// length; stricter before AUTH) and locates each multibulk command's
// arguments as it checks them; an inline line, once whole, is split by
// redcon's parser. A violation is answered -ERR Protocol error: ... and the
// connection is closed. Each connection's goroutine reads the socket into
// the guard (input.go: a plain socket from inside one RawConn.Read, so an
// empty socket costs no read that finds it empty) and dispatches the
// commands (conn.go): a lone command runs on the reader itself;
// pipelined commands run concurrently on reused worker goroutines
// (workers.go), ordered per key and behind barriers as commands.Plan says,
// and are answered in arrival order, at most max_pipeline in flight.
// Each command goes to commands.Dispatcher with panic recovery, and the
// reply is encoded for the session's RESP version.
//
// With Config.TLS the listener is TLS-only (tls.go): each handshake runs
// on its own goroutine under a deadline before the connection is served,
// so the guard reads plaintext and a stalled handshake holds neither
// the accept loop nor a client slot. A plaintext client is answered
// with one clear-text -ERR line and closed. Client certificates do not
// count as authentication: protected mode depends on the password alone.
//
// Out-of-band messages reach a connection outside its command loop
// (commands.Hooks, push.go): a SESSION lock lost, pub/sub messages and
// tracking invalidations (RESP3 pushes, or RESP2 arrays) are queued and written between
// replies, never inside one. The reader keeps reading while commands run,
// so a client that goes away is noticed at once, even during a LOCK … WAIT.
//
// Limits: max_clients (refused with -ERR max number of clients reached),
// an idle timeout, a write deadline on every write, and protected mode
// (with no password, only loopback clients are served).
//
// Shutdown(ctx) stops accepting, lets commands in flight finish until ctx
// is done (then cancels them), and closes every connection (hangs it up:
// its goroutine closes it, guardConn.hangUp). It is idempotent.
//
// Observability (metrics.go, ops.go): Metrics holds the Prometheus metrics
// in a private registry, fed by commands.Options.Observe (lock operations
// by command, dialect and result; latency histograms) and read at scrape
// time from the backends' health, the client count and the SESSION and
// WAIT gauges. OpsServer serves them on metrics_listen with /healthz and
// /readyz (200 while a quorum of backends votes, 503 otherwise or once
// draining). status.go renders the status page at / (status.html,
// embedded, server-rendered, reloading itself) and /status.json from
// StatusSources read at each request; key names only with ShowKeys.
// docs/operations.md lists every metric and describes the page.
//
// Safety: nothing here decides who holds a lock, so several proxies may
// serve the same backends.
package proxy
