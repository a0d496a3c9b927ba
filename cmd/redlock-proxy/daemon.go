package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/conf"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/migrate"
	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
	"github.com/redlock-proxy/redlock-proxy/redlock/tier"
)

// Timeouts of the daemon's own steps.
const (
	// connectWait bounds the wait for backend connections at start.
	connectWait = time.Second
	// checkWait bounds the backend checks at start.
	checkWait = 2 * time.Second
	// shutdownGrace bounds the wait for SESSION releases and background
	// rollbacks after the clients are gone.
	shutdownGrace = time.Second
)

// daemon is one redlock-proxy process: backends → redlock → lease →
// commands → proxy, and the metrics server. newDaemon builds and checks
// it and binds its listeners; start serves; reload applies a re-read
// configuration (reload.go); stop shuts it down in order. Each setting
// goes from conf.Config to the one constructor that uses it, here.
type daemon struct {
	cfg    conf.Config // as configured (before -dev): what a reload compares with
	log    hclog.Logger
	dev    devBackends // -dev only
	certs  *certReloader
	locker *redlock.Redlock
	relay  *relay.Relay
	leases *lease.Manager
	disp   *commands.Dispatcher
	tier   *tier.Tier
	srv    *proxy.Server
	ops    *proxy.OpsServer // nil without metrics_listen

	stopHealth context.CancelFunc
	healthDone chan struct{}
	served     chan error // Serve's result
	opsDone    chan error // the metrics server's; nil once it stopped
}

func newLogger(cfg conf.Config) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "redlock-proxy",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		JSONFormat: cfg.LogFormat == "json",
		Output:     os.Stderr,
	})
}

// newDaemon builds the process from cfg: dials the backends, checks them
// (refusing to start on problems with strict), waits briefly for their
// connections, and binds the listeners. On error everything it made is
// closed again.
func newDaemon(cfg conf.Config, logger hclog.Logger) (d *daemon, err error) {
	d = &daemon{cfg: cfg, log: logger}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	for _, w := range cfg.Warnings() {
		logger.Warn(w)
	}
	backends := cfg.Backends
	if cfg.Dev {
		if d.dev, err = startDevBackends(5); err != nil {
			return d, err
		}
		backends = d.dev.Addrs()
	}
	if cfg.Procs > 0 {
		setProcs(cfg.Procs)
	}
	logger.Info("starting", "version", version, "threads", runtime.GOMAXPROCS(0), "config", cfg.String())

	clientTLS, nodeTLS, err := loadTLS(cfg)
	if err != nil {
		return d, err
	}
	if clientTLS != nil { // SIGHUP reads the listener's TLS files again
		d.certs = newCertReloader(clientTLS)
		clientTLS = d.certs.config()
	}

	var metrics *proxy.Metrics
	var observeCall func(string, time.Duration, error)
	if cfg.MetricsListen != "" {
		metrics = proxy.NewMetrics(version)
		observeCall = metrics.ObserveBackend
	}
	lockOpts := redlock.Options{
		NodeTimeout:        cfg.NodeTimeout,
		ScriptTimeout:      cfg.ScriptTimeout,
		DriftFactor:        cfg.DriftFactor,
		MaxTTL:             cfg.MaxTTL,
		TrustFreshBackends: !cfg.StartupQuarantine,
		DownAfter:          cfg.DownAfter,
		HealthInterval:     cfg.HealthInterval,
		Logger:             logger.Named("redlock"),
		ObserveCall:        observeCall,
		ReleaseNotices:     true,
	}
	if cfg.MigrateFrom != "" { // dialled like a backend, run with the backends' options
		n, err := backend.DialNodeTLS(cfg.MigrateFrom, nodeTLS)
		if err != nil {
			return d, fmt.Errorf("migrate_from %s: %w", conf.RedactBackend(cfg.MigrateFrom), err)
		}
		lockOpts.Mirror = migrate.New(n, lockOpts)
		logger.Info("migrating: every lock operation also takes the old instance", "migrate-from", n.Addr())
	}
	nodes := make([]redlock.Node, 0, len(backends))
	relayed := make([]relay.Backend, 0, len(backends))
	otherDB := "" // a backend whose URL selects a database other than 0
	for _, b := range backends {
		n, err := backend.DialNodeTLS(b, nodeTLS)
		if err != nil {
			return d, fmt.Errorf("backend %s: %w", conf.RedactBackend(b), err)
		}
		if d.dev != nil {
			n.NoReadOnlyScripts()
		}
		nodes = append(nodes, n)
		relayed = append(relayed, n)
		if n.DB() != 0 && otherDB == "" {
			otherDB = fmt.Sprintf("backend %s uses database %d", n.Addr(), n.DB())
		}
	}
	d.locker = redlock.New(nodes, lockOpts)
	if err := d.checkBackends(cfg.Strict); err != nil {
		return d, err
	}
	d.relay = relay.New(relay.Options{
		Backends: relayed,
		Quorum:   d.locker.Quorum(),
		Logger:   logger.Named("relay"),
	})
	d.leases = lease.New(lease.Options{
		Locker:   d.locker,
		MaxHold:  cfg.MaxHold,
		KeepTTL:  cfg.DefaultTTL,
		MaxTTL:   cfg.MaxTTL,
		MaxHolds: cfg.MaxHolds,
		Logger:   logger.Named("lease"),
		// A release through another proxy wakes this one's waiters.
		WatchReleases: watchReleases(d.relay),
	})
	opts := commands.Options{
		Leases:         d.leases,
		MinTTL:         cfg.MinTTL,
		MaxTTL:         cfg.MaxTTL,
		MaxWait:        cfg.MaxWait,
		MaxKeyBytes:    cfg.MaxKeyBytes,
		MaxValueBytes:  cfg.MaxValueBytes,
		AllowFlush:     cfg.AllowFlush,
		RecognisedOnly: cfg.RecognisedScriptsOnly(),
		OtherDB:        otherDB,
		RequirePass:    cfg.RequirePass,
		AuthFailLimit:  cfg.AuthFailLimit,
		AuthFailWindow: cfg.AuthFailWindow,
		Users:          proxyUsers(cfg.Users),
		Version:        version,
		Logger:         logger.Named("commands"),
		Relay:          d.relay,
	}
	if metrics != nil {
		opts.Observe = metrics.Observe
	}
	d.disp = commands.New(opts)
	d.srv = proxy.New(proxy.Config{
		Listen:        cfg.Listen,
		MaxClients:    cfg.MaxClients,
		IdleTimeout:   cfg.IdleTimeout,
		WriteTimeout:  cfg.WriteTimeout,
		ProtectedMode: cfg.ProtectedMode,
		RequirePass:   passwordConfigured(cfg),
		MaxPipeline:   cfg.MaxPipeline,
		Limits: proxy.Limits{
			MaxArgs:        cfg.MaxArgs,
			MaxBulkBytes:   cfg.MaxBulkBytes,
			MaxInlineBytes: cfg.MaxInlineBytes,
		},
		TLS: clientTLS,
	}, d.disp, logger.Named("proxy"))
	if err := d.srv.Listen(); err != nil {
		return d, err
	}
	d.joinTier(cfg, logger.Named("tier"))
	if metrics != nil {
		metrics.Watch(proxy.MetricsSources{
			Backends:     d.locker,
			Clients:      d.disp.ClientCount,
			SessionLocks: d.leases.Sessions,
			Waiters:      d.leases.Waiters,
			Holds:        d.leases.HoldCount,
			TierHolds:    d.leases.TierHoldCount,
			MaxHolds:     func() int { return cfg.MaxHolds },
			HoldsRefused: func() uint64 { return uint64(d.leases.Stats().HoldsRefused) },
			TierMembers:  func() int { return len(d.tier.Members()) },
			Migrate:      d.locker.MigrateStats,
			Refusals: func() map[string]uint64 {
				m := d.relay.Refusals()
				maps.Copy(m, d.disp.Refusals())
				return m
			},
		})
		d.ops = proxy.NewOpsServer(cfg.MetricsListen, metrics, d.locker, d.statusSources(cfg), logger.Named("metrics"))
		if err := d.ops.Listen(); err != nil {
			return d, err
		}
	}
	return d, nil
}

// checkBackends reports, once at start, what would make the backends
// unsafe for locks (eviction, replicas); with strict it refuses to start
// on them. An unreachable backend is a warning: it may come back. Then it
// waits up to connectWait for the backend connections, so that the first
// clients do not pay for the dials within their short node deadlines.
func (d *daemon) checkBackends(strict bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkWait)
	defer cancel()
	for _, p := range d.locker.CheckBackends(ctx) {
		if strict {
			return fmt.Errorf("strict: %s", p)
		}
		d.log.Named("backend").Warn("backend check", "problem", p)
	}
	n := len(d.locker.Nodes())
	d.log.Named("backend").Info("backends", "count", n, "quorum", d.locker.Quorum(), "voting", d.locker.Voting())
	ctx, cancel = context.WithTimeout(context.Background(), connectWait)
	defer cancel()
	if up := d.locker.Connect(ctx); up < n {
		d.log.Named("backend").Warn("backends not connected yet", "connected", up, "count", n, "waited", connectWait)
	}
	return nil
}

// watchReleases is the lease Manager's WatchFunc: a relay subscriber of
// the key's release notice channel, for as long as this proxy has waiters
// for a key held elsewhere. A backend's subscription made again is a gap.
func watchReleases(r *relay.Relay) lease.WatchFunc {
	return func(ctx context.Context, key string, notice func(string), gap func()) func() {
		sub := r.NewSubscriber(func(m relay.Message) { notice(m.Payload) })
		sub.SetResume(gap)
		_ = sub.Subscribe(ctx, relay.Channel, redlock.NoticeChannel(key)) // ctx ended or shut down: the waiter polls
		return sub.Close
	}
}

// joinTier builds this proxy's membership of the tier (redlock/tier) and
// runs its first heartbeat before the listener serves: the entry is
// written, the other proxies are known, and the fence mark is raised to
// every backend's counter before the first fenced grant. The SENTINEL
// commands answer from it, and a change of the advertised proxy is
// published as +switch-master to this proxy's subscribers.
func (d *daemon) joinTier(cfg conf.Config, logger hclog.Logger) {
	announce := cfg.EffectiveAnnounce(d.srv.Addr().String())
	d.tier = tier.New(d.locker, tier.Options{
		Service:  cfg.ServiceName,
		Announce: announce,
		Logger:   logger,
		OnSwitch: func(old, new tier.Member) { d.disp.AnnounceSwitch(old, new) },
	})
	d.disp.SetDiscovery(d.tier)
	ctx, cancel := context.WithTimeout(context.Background(), checkWait)
	defer cancel()
	err := d.tier.Join(ctx)
	logger.Info("tier", "service", cfg.ServiceName, "announce", announce, "id", d.tier.ID(),
		"members", len(d.tier.Members()), "fence-mark", d.locker.FenceHighWater())
	if err != nil {
		logger.Warn("first heartbeat reached too few backends: membership follows when they answer", "error", err)
	}
}

// statusSources are what the status page on metrics_listen reads.
func (d *daemon) statusSources(cfg conf.Config) *proxy.StatusSources {
	return &proxy.StatusSources{
		Backends: d.locker,
		Version:  version,
		ShowKeys: cfg.StatusKeys,
		Events:   d.locker.Events(),
		Members: func() []proxy.StatusMember {
			master, _, ok := d.tier.Master()
			ms := d.tier.Members()
			out := make([]proxy.StatusMember, len(ms))
			for i, m := range ms {
				out[i] = proxy.StatusMember{Addr: m.Addr, ID: m.ID, Self: m.Self, Advertised: ok && m.ID == master.ID}
			}
			return out
		},
		Locks: func() proxy.StatusLocks {
			return proxy.StatusLocks{
				Granted: d.leases.Stats().Acquired, Held: len(d.leases.Snapshot()),
				Waiters: d.leases.Waiters(), Sessions: d.leases.Sessions(), Holds: d.leases.HoldCount(),
			}
		},
		HotKeys: func(n int) []proxy.StatusKey {
			hot := d.leases.HotKeys(n)
			out := make([]proxy.StatusKey, len(hot))
			for i, k := range hot {
				out[i] = proxy.StatusKey{Key: k.Key, Waiters: k.Waiters, Held: k.Held, Age: k.Age}
			}
			return out
		},
	}
}

// liveIDs is the ids of the tier's live members, for the holds record.
func liveIDs(t *tier.Tier) func() []string {
	return func() []string {
		ms := t.Members()
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		return ids
	}
}

// start runs the health loop, the tier's heartbeat, the holds record's
// rounds (every proxy renews the holds whose maker is silent), the client
// listener and the metrics server.
func (d *daemon) start() {
	hctx, stop := context.WithCancel(context.Background())
	d.stopHealth, d.healthDone = stop, make(chan struct{})
	go func() { defer close(d.healthDone); d.locker.RunHealth(hctx) }()
	d.tier.Start()
	d.leases.StartHolds(lease.Holds{Service: d.tier.Service(), ID: d.tier.ID(), Live: liveIDs(d.tier)})
	d.served = make(chan error, 1)
	go func() { d.served <- d.srv.Serve() }()
	if d.ops != nil {
		d.opsDone = make(chan error, 1)
		go func() { d.opsDone <- d.ops.Serve() }()
	}
}

// run serves until SIGINT or SIGTERM arrives on sigs (SIGHUP reloads the
// configuration with load), or the listener fails; then it stops.
func (d *daemon) run(sigs <-chan os.Signal, load func() (conf.Config, error)) error {
	d.start()
	for {
		select {
		case err := <-d.served:
			d.served = nil
			return errors.Join(err, d.stop())
		case err := <-d.opsDone:
			// The lock service outranks its monitoring: keep serving.
			d.log.Error("metrics server stopped", "error", err)
			d.opsDone = nil
		case sig := <-sigs:
			if isReload(sig) {
				d.reload(load)
				continue
			}
			d.log.Info("shutting down", "signal", sig.String(), "timeout", d.cfg.ShutdownTimeout)
			return d.stop()
		}
	}
}

// stop shuts down in order: readiness off, leaving the tier (so the other proxies stop advertising this one
// at once), clients (in-flight commands finish within shutdown_timeout),
// SESSION locks, rollbacks, the metrics server, the health loop, the
// backends.
func (d *daemon) stop() error {
	if d.ops != nil {
		d.ops.Drain() // /readyz says 503 while the clients drain
	}
	tctx, tcancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer tcancel()
	terr := d.tier.Shutdown(tctx)
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	err := errors.Join(terr, d.srv.Shutdown(ctx))
	if d.served != nil {
		err = errors.Join(err, <-d.served)
	}
	// The holds made here are renewed here while the clients drain; once
	// this proxy is gone, the tier renews them as it runs low
	// (lease/holds.go): nothing to hand over.
	// SESSION releases and rollbacks get their own grace, so a drain that
	// ran out of time does not also leave session locks to expire.
	rctx, rcancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer rcancel()
	err = errors.Join(err, d.leases.Shutdown(rctx), d.relay.Shutdown(rctx), d.locker.Close(rctx))
	if d.ops != nil {
		octx, ocancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer ocancel()
		err = errors.Join(err, d.ops.Shutdown(octx))
		if d.opsDone != nil {
			<-d.opsDone
		}
	}
	d.close()
	if err != nil {
		d.log.Error("shutdown incomplete", "error", err)
		return err
	}
	d.log.Info("stopped")
	return nil
}

// close ends what runs without clients: the tier's heartbeat, the
// health loop, the relay's and the other backend connections, and the
// -dev backends.
func (d *daemon) close() {
	if d.tier != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		_ = d.tier.Shutdown(ctx) // idempotent: stop has left already
		cancel()
	}
	if d.relay != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		_ = d.relay.Shutdown(ctx)
		cancel()
	}
	if d.stopHealth != nil {
		d.stopHealth()
		<-d.healthDone
	}
	if d.locker != nil {
		_ = d.locker.CloseNodes()
	}
	d.dev.Close()
}

// setProcs sets how many threads run Go code at once: n, or for 0 what
// the process would start with (GOMAXPROCS from the environment, else the
// runtime's choice: the CPUs or the container's limit, which
// SetDefaultGOMAXPROCS computes without looking at the environment).
func setProcs(n int) {
	if n == 0 {
		if env, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && env > 0 {
			n = env
		}
	}
	if n > 0 {
		runtime.GOMAXPROCS(n)
		return
	}
	runtime.SetDefaultGOMAXPROCS()
}
