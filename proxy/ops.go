package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// OpsServer serves the operator's HTTP endpoints on metrics_listen:
//
//	/         the status page (status.go), and /status.json
//	/metrics  Prometheus metrics (Metrics.Handler)
//	/healthz  200 "ok" while the process runs
//	/readyz   200 while a quorum of backends votes, else 503; 503 once
//	          the proxy is draining for shutdown
//
// It is plain HTTP with no authentication: bind it to an address only
// monitoring can reach.
type OpsServer struct {
	addr     string
	log      hclog.Logger
	srv      *http.Server
	ln       net.Listener
	draining atomic.Bool
}

// opsTimeout bounds reading a request and writing a reply; a scrape of
// this proxy's metrics takes milliseconds.
const opsTimeout = 10 * time.Second

// NewOpsServer builds the server; call Listen (optional), then Serve in a
// goroutine its owner waits for, and Shutdown.
func NewOpsServer(addr string, m *Metrics, b Backends, status *StatusSources, logger hclog.Logger) *OpsServer {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	o := &OpsServer{addr: addr, log: logger}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.Handle("GET /healthz", HealthHandler())
	mux.Handle("GET /readyz", ReadyHandler(b, o.draining.Load))
	if status != nil {
		h := StatusHandler(*status)
		mux.Handle("GET /{$}", h)
		mux.Handle("GET /status.json", h)
	}
	o.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: opsTimeout,
		ReadTimeout:       opsTimeout,
		WriteTimeout:      opsTimeout,
		IdleTimeout:       time.Minute,
		ErrorLog:          logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	return o
}

// Listen binds the socket, so Addr is known before Serve.
func (o *OpsServer) Listen() error {
	if o.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("metrics_listen: %w", err)
	}
	o.ln = ln
	return nil
}

// Serve answers requests until Shutdown; it returns nil after a shutdown.
func (o *OpsServer) Serve() error {
	if err := o.Listen(); err != nil {
		return err
	}
	o.log.Info("serving metrics", "addr", o.ln.Addr().String())
	if err := o.srv.Serve(o.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Drain makes /readyz answer 503 from now on, so a load balancer stops
// sending new clients while the proxy shuts down.
func (o *OpsServer) Drain() { o.draining.Store(true) }

// Shutdown stops accepting and waits for requests in flight, until ctx is
// done. It is safe to call twice.
func (o *OpsServer) Shutdown(ctx context.Context) error {
	o.Drain()
	return o.srv.Shutdown(ctx)
}

// HealthHandler answers 200 "ok": the process is alive and serving HTTP.
func HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
}

// ReadyHandler answers 200 while a quorum of b's backends votes (locks can
// be granted), 503 otherwise or while draining() is true, with one line
// saying how many vote.
func ReadyHandler(b Backends, draining func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining != nil && draining() {
			plain(w, http.StatusServiceUnavailable, "not ready: shutting down\n")
			return
		}
		voting, quorum, total := b.Voting(), b.Quorum(), len(b.Status())
		if voting >= quorum {
			plain(w, http.StatusOK, fmt.Sprintf("ready: %d of %d backends voting, quorum %d\n", voting, total, quorum))
			return
		}
		plain(w, http.StatusServiceUnavailable, fmt.Sprintf("not ready: %d of %d backends voting, quorum %d\n", voting, total, quorum))
	})
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
