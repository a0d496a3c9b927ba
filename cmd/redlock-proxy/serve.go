package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/conf"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// shutdownGrace bounds the wait for background rollbacks after the clients
// are gone.
const shutdownGrace = time.Second

func newLogger(cfg conf.Config) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "redlock-proxy",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		JSONFormat: cfg.LogFormat == "json",
		Output:     os.Stderr,
	})
}

// serve wires backends → redlock → commands → proxy, serves until a signal
// arrives on sigs, then shuts down in order: clients, rollbacks, backends.
func serve(cfg conf.Config, logger hclog.Logger, sigs <-chan os.Signal) error {
	for _, w := range cfg.Warnings() {
		logger.Warn(w)
	}
	if cfg.Dev {
		dev, err := startDevBackends(5)
		if err != nil {
			return err
		}
		defer dev.Close()
		cfg.Backends = dev.Addrs()
	}
	logger.Info("starting", "version", version, "config", cfg.String())

	redlock.RouteDriverLogs(logger.Named("backend"))
	nodes := make([]redlock.Node, 0, len(cfg.Backends))
	for _, b := range cfg.Backends {
		n, err := redlock.DialNode(b)
		if err != nil {
			return fmt.Errorf("backend %s: %w", conf.RedactBackend(b), err)
		}
		nodes = append(nodes, n)
	}
	locker := redlock.New(nodes, redlock.Options{
		NodeTimeout: cfg.NodeTimeout,
		DriftFactor: cfg.DriftFactor,
		Logger:      logger.Named("redlock"),
	})
	defer locker.CloseNodes()
	checkBackends(logger.Named("backend"), nodes)

	disp := commands.New(commands.Options{
		Locker:        locker,
		MinTTL:        cfg.MinTTL,
		MaxTTL:        cfg.MaxTTL,
		DefaultTTL:    cfg.DefaultTTL,
		MaxWait:       cfg.MaxWait,
		MaxKeyBytes:   cfg.MaxKeyBytes,
		MaxValueBytes: cfg.MaxValueBytes,
		AllowFlush:    cfg.AllowFlush,
		RequirePass:   cfg.RequirePass,
		Version:       version,
		Logger:        logger.Named("commands"),
	})
	srv := proxy.New(proxy.Config{
		Listen:        cfg.Listen,
		MaxClients:    cfg.MaxClients,
		IdleTimeout:   cfg.IdleTimeout,
		WriteTimeout:  cfg.WriteTimeout,
		ProtectedMode: cfg.ProtectedMode,
		RequirePass:   cfg.RequirePass != "",
		Limits: proxy.Limits{
			MaxArgs:        cfg.MaxArgs,
			MaxBulkBytes:   cfg.MaxBulkBytes,
			MaxInlineBytes: cfg.MaxInlineBytes,
		},
	}, disp, logger.Named("proxy"))
	if err := srv.Listen(); err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	select {
	case err := <-served:
		return err
	case sig := <-sigs:
		logger.Info("shutting down", "signal", sig.String(), "timeout", cfg.ShutdownTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	<-served
	rctx, rcancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer rcancel()
	err = errors.Join(err, locker.Close(rctx))
	if err != nil {
		logger.Error("shutdown incomplete", "error", err)
		return err
	}
	logger.Info("stopped")
	return nil
}

// checkBackends pings every backend once at start and logs what it finds;
// an unreachable backend is a warning, not a refusal: it may come back.
func checkBackends(logger hclog.Logger, nodes []redlock.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	type result struct {
		addr string
		err  error
	}
	results := make(chan result, len(nodes))
	for _, n := range nodes {
		go func() {
			var err error
			if rn, ok := n.(*redlock.RedisNode); ok {
				err = rn.Client().Ping(ctx).Err()
			}
			results <- result{n.Addr(), err}
		}()
	}
	for range nodes {
		r := <-results
		if r.err != nil {
			logger.Warn("backend unreachable at start", "node", r.addr, "error", r.err)
		} else {
			logger.Debug("backend reachable", "node", r.addr)
		}
	}
	logger.Info("backends", "count", len(nodes), "quorum", len(nodes)/2+1)
}
