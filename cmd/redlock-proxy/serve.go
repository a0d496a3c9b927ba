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
		NodeTimeout:        cfg.NodeTimeout,
		DriftFactor:        cfg.DriftFactor,
		MaxTTL:             cfg.MaxTTL,
		TrustFreshBackends: !cfg.StartupQuarantine,
		DownAfter:          cfg.DownAfter,
		HealthInterval:     cfg.HealthInterval,
		Logger:             logger.Named("redlock"),
	})
	defer locker.CloseNodes()
	if err := checkBackends(logger.Named("backend"), locker, cfg.Strict); err != nil {
		return err
	}
	hctx, stopHealth := context.WithCancel(context.Background())
	healthDone := make(chan struct{})
	go func() { defer close(healthDone); locker.RunHealth(hctx) }()
	defer func() { stopHealth(); <-healthDone }()

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

// checkBackends reports, once at start, what would make the backends unsafe
// for locks (eviction, replicas); with strict it refuses to start on them.
// An unreachable backend is a warning: it may come back.
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
	return nil
}
