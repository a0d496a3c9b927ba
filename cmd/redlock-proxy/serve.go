package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/conf"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// shutdownGrace bounds the wait for SESSION releases and background
// rollbacks after the clients are gone.
const shutdownGrace = time.Second

func newLogger(cfg conf.Config) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "redlock-proxy",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		JSONFormat: cfg.LogFormat == "json",
		Output:     os.Stderr,
	})
}

// serve wires backends → redlock → commands → proxy (and the metrics
// server), serves until SIGINT or SIGTERM arrives on sigs, then shuts down
// in order: readiness off, clients (in-flight commands finish within
// shutdown_timeout), SESSION locks, rollbacks, the metrics server,
// backends. SIGHUP re-reads the config with reload and applies what can
// change while running (reload.go).
func serve(cfg conf.Config, logger hclog.Logger, sigs <-chan os.Signal, reload func() (conf.Config, error)) error {
	for _, w := range cfg.Warnings() {
		logger.Warn(w)
	}
	loaded := cfg // as configured, before -dev replaces the backends: what a reload compares with
	if cfg.Dev {
		dev, err := startDevBackends(5)
		if err != nil {
			return err
		}
		defer dev.Close()
		cfg.Backends = dev.Addrs()
	}
	logger.Info("starting", "version", version, "config", cfg.String())

	clientTLS, nodeTLS, tlsErr := loadTLS(cfg)
	if tlsErr != nil {
		return tlsErr
	}
	var certs *certReloader // SIGHUP reads the listener's TLS files again
	if clientTLS != nil {
		certs = newCertReloader(clientTLS)
		clientTLS = certs.config()
	}
	redlock.RouteDriverLogs(logger.Named("backend"))
	nodes := make([]redlock.Node, 0, len(cfg.Backends))
	for _, b := range cfg.Backends {
		n, err := redlock.DialNodeTLS(b, nodeTLS)
		if err != nil {
			return fmt.Errorf("backend %s: %w", conf.RedactBackend(b), err)
		}
		nodes = append(nodes, n)
	}
	// Backend calls feed the metrics, which are built once the locker
	// exists (they read its state): the hook finds them through a pointer.
	var callMetrics atomic.Pointer[proxy.Metrics]
	observeCall := func(addr string, d time.Duration, err error) {
		if m := callMetrics.Load(); m != nil {
			m.ObserveBackend(addr, d, err)
		}
	}
	locker := redlock.New(nodes, redlock.Options{
		NodeTimeout:        cfg.NodeTimeout,
		DriftFactor:        cfg.DriftFactor,
		MaxTTL:             cfg.MaxTTL,
		TrustFreshBackends: !cfg.StartupQuarantine,
		DownAfter:          cfg.DownAfter,
		HealthInterval:     cfg.HealthInterval,
		Logger:             logger.Named("redlock"),
		ObserveCall:        observeCall,
	})
	defer locker.CloseNodes()
	if err := checkBackends(logger.Named("backend"), locker, cfg.Strict); err != nil {
		return err
	}
	hctx, stopHealth := context.WithCancel(context.Background())
	healthDone := make(chan struct{})
	go func() { defer close(healthDone); locker.RunHealth(hctx) }()
	defer func() { stopHealth(); <-healthDone }()

	var disp *commands.Dispatcher
	var metrics *proxy.Metrics
	var observe func(cmd, dialect, result string, d time.Duration)
	if cfg.MetricsListen != "" {
		metrics = proxy.NewMetrics(proxy.MetricsSources{
			Backends:     locker,
			Clients:      func() int { return disp.ClientCount() },
			SessionLocks: func() int { return disp.SessionLocks() },
			Waiters:      func() int { return disp.LockWaiters() },
			Version:      version,
		})
		observe = metrics.Observe
		callMetrics.Store(metrics)
	}
	disp = commands.New(commands.Options{
		Locker:         locker,
		MinTTL:         cfg.MinTTL,
		MaxTTL:         cfg.MaxTTL,
		DefaultTTL:     cfg.DefaultTTL,
		MaxWait:        cfg.MaxWait,
		MaxHold:        cfg.MaxHold,
		NodeTimeout:    cfg.NodeTimeout,
		MaxKeyBytes:    cfg.MaxKeyBytes,
		MaxValueBytes:  cfg.MaxValueBytes,
		AllowFlush:     cfg.AllowFlush,
		RequirePass:    cfg.RequirePass,
		AuthFailLimit:  cfg.AuthFailLimit,
		AuthFailWindow: cfg.AuthFailWindow,
		Users:          proxyUsers(cfg.Users),
		Version:        version,
		Logger:         logger.Named("commands"),
		Observe:        observe,
	})
	srv := proxy.New(proxy.Config{
		Listen:        cfg.Listen,
		MaxClients:    cfg.MaxClients,
		IdleTimeout:   cfg.IdleTimeout,
		WriteTimeout:  cfg.WriteTimeout,
		ProtectedMode: cfg.ProtectedMode,
		RequirePass:   passwordConfigured(cfg),
		Limits: proxy.Limits{
			MaxArgs:        cfg.MaxArgs,
			MaxBulkBytes:   cfg.MaxBulkBytes,
			MaxInlineBytes: cfg.MaxInlineBytes,
		},
		TLS: clientTLS,
	}, disp, logger.Named("proxy"))
	if err := srv.Listen(); err != nil {
		return err
	}
	var ops *proxy.OpsServer
	opsDone := make(chan error, 1)
	if metrics != nil {
		ops = proxy.NewOpsServer(cfg.MetricsListen, metrics, locker, logger.Named("metrics"))
		if err := ops.Listen(); err != nil {
			return err
		}
		go func() { opsDone <- ops.Serve() }()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	live := &reloader{log: logger, running: loaded, load: reload, srv: srv, certs: certs}
wait:
	for {
		select {
		case err := <-served:
			if ops != nil {
				ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
				_ = ops.Shutdown(ctx)
				cancel()
				<-opsDone
			}
			return err
		case err := <-opsDone:
			// The lock service outranks its monitoring: keep serving.
			logger.Error("metrics server stopped", "error", err)
			ops, opsDone = nil, nil
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				live.reload()
				continue
			}
			logger.Info("shutting down", "signal", sig.String(), "timeout", cfg.ShutdownTimeout)
			break wait
		}
	}
	if ops != nil {
		ops.Drain() // /readyz says 503 while the clients drain
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	<-served
	// SESSION releases and rollbacks get their own grace, so a drain that
	// ran out of time does not also leave session locks to expire.
	rctx, rcancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer rcancel()
	err = errors.Join(err, releaseSessions(rctx, disp))
	err = errors.Join(err, locker.Close(rctx))
	if ops != nil {
		octx, ocancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer ocancel()
		err = errors.Join(err, ops.Shutdown(octx))
		<-opsDone
	}
	if err != nil {
		logger.Error("shutdown incomplete", "error", err)
		return err
	}
	logger.Info("stopped")
	return nil
}

// checkBackends reports, once at start, what would make the backends unsafe
// for locks (eviction, replicas); with strict it refuses to start on them.
// An unreachable backend is a warning: it may come back. Then it waits up
// to connectWait for the backend connections, so that the first clients
// do not pay for the dials within their short node deadlines.
func checkBackends(logger hclog.Logger, locker *redlock.Redlock, strict bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	problems := locker.CheckBackends(ctx)
	for _, p := range problems {
		if strict {
			return fmt.Errorf("strict: %s", p)
		}
		logger.Warn("backend check", "problem", p)
	}
	logger.Info("backends", "count", len(locker.Nodes()), "quorum", locker.Quorum(), "voting", locker.Voting())
	// The first clients find the backend connections up.
	ctx, cancel = context.WithTimeout(context.Background(), connectWait)
	defer cancel()
	if up, n := locker.Connect(ctx), len(locker.Nodes()); up < n {
		logger.Warn("backends not connected yet", "connected", up, "count", n, "waited", connectWait)
	}
	return nil
}

// connectWait bounds the wait for backend connections at start.
const connectWait = time.Second
