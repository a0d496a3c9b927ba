package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// config is the parsed command line.
type config struct {
	args       []string
	clients    []int
	duration   time.Duration
	cycles     int // > 0: measure this many cycles instead of duration
	warmup     time.Duration
	keys       keySpace
	ttl        time.Duration
	modes      []*mode
	spawn      int
	idle       int       // -idle: idle connections for the RSS measurement
	handoff    int       // -handoff: hand-offs to measure
	batch      int       // -batch: SET NX per batch
	fill       *fillPlan // -fill-data, -fill-holds: nil without them
	proxyBin   string
	proxySet   []string // -proxy-set: more lines of the spawned proxy's config, "key = value"
	proxyAddr  string
	proxy2Addr string
	backends   []string
	json       bool
	progress   bool
}

func (c *config) validate() error {
	switch {
	case c.duration <= 0 && c.cycles <= 0:
		return errors.New("-d must be positive (or give -n)")
	case c.cycles < 0:
		return errors.New("-n must not be negative")
	case c.warmup < 0:
		return errors.New("-warmup must not be negative")
	case c.ttl < time.Millisecond:
		return errors.New("-ttl must be at least 1ms")
	case c.spawn < 0:
		return errors.New("-spawn must not be negative")
	case c.spawn > 0 && len(c.backends) > 0:
		return errors.New("-spawn starts its own backends: drop -backend")
	case c.idle < 0:
		return errors.New("-idle must not be negative")
	case c.handoff < 0:
		return errors.New("-handoff must not be negative")
	case c.batch < 0:
		return errors.New("-batch must not be negative")
	case len(c.proxySet) > 0 && c.spawn == 0:
		return errors.New("-proxy-set configures the proxy -spawn starts: it needs -spawn N")
	case c.idle > 0 && c.spawn == 0:
		return errors.New("-idle measures the proxy's memory: it needs -spawn N")
	case c.fill != nil && c.spawn == 0:
		return errors.New("-fill-data and -fill-holds start a second proxy: they need -spawn N")
	case c.fill != nil && (c.fill.data < 0 || c.fill.holds < 0 || c.fill.conns < 1 || c.fill.pipeline < 1 || c.fill.quiet <= 0):
		return errors.New("-fill-data and -fill-holds must not be negative, -fill-c, -fill-pipeline and -fill-quiet must be positive")
	case c.keys.held && c.cycles > 0:
		return errors.New("-keys contended refuses every attempt: measure it with -d, not -n")
	case c.keys.held && c.ttl <= c.warmup+c.duration+time.Second:
		return errors.New("-keys contended: the holder keeps the key for the run, so -ttl must exceed -warmup + -d by more than 1s")
	}
	for _, m := range c.modes {
		if m.needsBackends && c.spawn == 0 && len(c.backends) == 0 {
			return fmt.Errorf("mode %s needs -backend (or -spawn N)", m.name)
		}
	}
	return nil
}

// keySpace says which key each cycle locks.
type keySpace struct {
	distinct bool // a key per client
	n        int  // otherwise n keys shared round-robin
	// held: one key, which one more client of the mode (the holder) takes
	// before the run and keeps until its end; every attempt of the clients
	// is refused, and busy/s is the rate of contended acquisitions
	held bool
}

func (k keySpace) String() string {
	switch {
	case k.distinct:
		return "distinct"
	case k.held:
		return "contended"
	}
	return strconv.Itoa(k.n)
}

// key for client's cycle-th attempt. Clients start at different keys so
// that with N keys and N clients they begin spread out.
func (k keySpace) key(mode string, client, cycle int) string {
	switch {
	case k.distinct:
		return "bench:" + mode + ":" + strconv.Itoa(client)
	case k.held:
		return "bench:" + mode + ":contended"
	}
	return "bench:" + mode + ":k" + strconv.Itoa((client+cycle)%k.n)
}

// bench sets up the targets, runs every mode at every client count, and
// reports. It returns the exit code.
func bench(ctx context.Context, cfg config, stdout, stderr io.Writer) int {
	t := targets{proxy: cfg.proxyAddr, proxy2: cfg.proxy2Addr, backends: cfg.backends}
	var spawned *cluster
	if cfg.spawn > 0 {
		var err error
		settings := slices.Clone(cfg.proxySet)
		if cfg.idle > 0 {
			// Before spawning: the proxy inherits the limit.
			if err := raiseFileLimit(cfg.idle + fdHeadroom); err != nil {
				fmt.Fprintln(stderr, "redlock-bench:", err)
				return 1
			}
			if _, set := settingOf(settings, "max_clients"); !set {
				settings = append(settings, "max_clients = "+strconv.Itoa(cfg.idle+100))
			}
		}
		if spawned, err = spawnCluster(ctx, cfg.spawn, cfg.proxyBin, settings, cfg.handoff > 0 || cfg.fill != nil); err != nil {
			fmt.Fprintln(stderr, "redlock-bench:", err)
			return 1
		}
		defer spawned.close()
		t = spawned.targets
	}
	if err := checkTargets(ctx, cfg, t); err != nil {
		fmt.Fprintln(stderr, "redlock-bench:", err)
		return 1
	}

	rep := report{
		Command:    commandLine(cfg.args),
		Go:         goVersion(),
		GOMAXPROCS: gomaxprocs(),
		Spawned:    spawned != nil,
		Proxy:      usedProxy(cfg, t),
		Backends:   t.backends,
		Redis:      redisVersion(ctx, t),
		Keys:       cfg.keys.String(),
		TTLMS:      cfg.ttl.Milliseconds(),
	}
	// abort reports err and returns the exit code, 130 if interrupted.
	abort := func(prefix string, err error) int {
		fmt.Fprintln(stderr, prefix, err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	if cfg.idle > 0 {
		idle, err := measureIdle(ctx, spawned, cfg.idle, stderr)
		if err != nil {
			return abort("redlock-bench:", err)
		}
		rep.Idle = idle
	}
	if cfg.handoff > 0 {
		pairs := [][2]string{{t.proxy, t.proxy}}
		if t.proxy2 != "" {
			pairs = append(pairs, [2]string{t.proxy, t.proxy2})
		}
		for _, p := range pairs {
			h, err := measureHandoff(ctx, p[0], p[1], cfg.handoff, cfg.ttl)
			if err != nil {
				return abort("redlock-bench:", err)
			}
			rep.Handoff = append(rep.Handoff, h)
		}
	}
	if cfg.batch > 0 {
		targets := [][2]string{{"proxy", t.proxy}}
		if len(t.backends) > 0 {
			targets = append(targets, [2]string{"single", t.backends[0]})
		}
		for _, tg := range targets {
			r, err := measureBatch(ctx, tg[0], tg[1], cfg.batch, cfg.ttl)
			if err != nil {
				return abort("redlock-bench:", err)
			}
			rep.Batch = append(rep.Batch, r)
		}
	}
	var filling *fill
	if cfg.fill != nil {
		var err error
		if filling, err = startFill(ctx, *cfg.fill, t, stderr); err != nil {
			return abort("redlock-bench: fill:", err)
		}
	}
	if cfg.cycles > 0 {
		rep.Cycles = cfg.cycles
	} else {
		rep.DurationMS = cfg.duration.Milliseconds()
	}
	for _, c := range cfg.clients {
		for _, m := range cfg.modes {
			if ctx.Err() != nil {
				break
			}
			res := runOne(ctx, cfg, m, t, c, stderr)
			if ctx.Err() != nil {
				break // an interrupted run measures nothing
			}
			rep.Results = append(rep.Results, res)
		}
	}
	if filling != nil {
		rep.Fill = filling.finish(context.WithoutCancel(ctx))
	}
	rep.computeRatios()

	var err error
	switch {
	case len(rep.Results) == 0:
		// interrupted before the first run finished: nothing to show
	case cfg.json:
		err = rep.writeJSON(stdout)
	default:
		err = rep.writeTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "redlock-bench:", err)
		return 1
	}
	failed := rep.writeErrors(stderr)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "redlock-bench: interrupted")
		return 130
	case failed && spawned != nil:
		spawned.writeProxyLog(stderr)
		return 1
	case failed:
		return 1
	}
	return 0
}

// usedProxy is the proxy's address if a selected mode talks to it.
func usedProxy(cfg config, t targets) string {
	for _, m := range cfg.modes {
		if m.needsProxy {
			return t.proxy
		}
	}
	return ""
}

// checkTargets PINGs every server a selected mode needs, so a wrong address
// fails at once with its name rather than as a table of errors.
func checkTargets(ctx context.Context, cfg config, t targets) error {
	need := map[string]bool{}
	for _, m := range cfg.modes {
		if m.needsProxy {
			need[t.proxy] = true
		}
		if m.needsBackends {
			for _, b := range t.backends {
				need[b] = true
			}
		}
	}
	for addr := range need {
		c := newClient(addr)
		err := c.Ping(ctx).Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("PING %s: %w", addr, err)
		}
	}
	for _, m := range cfg.modes {
		if m.prepare != nil {
			if err := m.prepare(ctx, t); err != nil {
				return fmt.Errorf("mode %s: %w", m.name, err)
			}
		}
	}
	return nil
}

// runOne measures one mode at one client count: every client warms up on
// its own, then all start the measured phase together and run until the
// duration is up or their share of -n is done.
func runOne(ctx context.Context, cfg config, m *mode, t targets, clients int, stderr io.Writer) result {
	lockers := make([]locker, clients)
	if m.openAll != nil {
		var err error
		if lockers, err = m.openAll(t, cfg.ttl, clients); err != nil {
			fmt.Fprintf(stderr, "redlock-bench: %s c=%d: %v\n", m.name, clients, err)
			return collect(m.name, clients, cfg.keys.String(), 0, nil)
		}
	} else {
		for i := range lockers {
			lockers[i] = m.open(t, cfg.ttl)
		}
	}
	defer func() {
		for _, l := range lockers {
			l.close()
		}
	}()
	if cfg.keys.held {
		release, err := hold(ctx, cfg, m, t)
		if err != nil {
			fmt.Fprintf(stderr, "redlock-bench: %s c=%d: %v\n", m.name, clients, err)
			return collect(m.name, clients, cfg.keys.String(), 0, nil)
		}
		defer release()
	}

	var (
		stop    atomic.Bool
		done    atomic.Int64 // successful measured cycles, for the progress line
		ready   sync.WaitGroup
		running sync.WaitGroup
		start   = make(chan struct{})
		stats   = make([]*clientStats, clients)
	)
	expect := 0
	if cfg.cycles > 0 {
		expect = cfg.cycles/clients + 1
	}
	ready.Add(clients)
	running.Add(clients)
	for i := range clients {
		quota := -1
		if cfg.cycles > 0 {
			quota = cfg.cycles / clients
			if i < cfg.cycles%clients {
				quota++
			}
		}
		st := newClientStats(expect)
		stats[i] = st
		go func() {
			defer running.Done()
			l, seq := lockers[i], 0
			warm := &clientStats{}
			for end := time.Now().Add(cfg.warmup); time.Now().Before(end) && ctx.Err() == nil && warm.streak < maxErrorStreak; seq++ {
				cycle(ctx, l, cfg.keys.key(m.name, i, seq), warm, false)
			}
			ready.Done()
			<-start
			for quota != 0 && !stop.Load() && ctx.Err() == nil && st.streak < maxErrorStreak {
				if cycle(ctx, l, cfg.keys.key(m.name, i, seq), st, true) {
					done.Add(1)
					quota--
				}
				seq++
			}
			st.gaveUp = st.streak >= maxErrorStreak
		}()
	}

	prog := newProgress(cfg.progress, stderr, m.name, clients, cfg.duration, cfg.cycles)
	prog.phase("warmup", nil, &done)
	ready.Wait()
	// The clients wait for start, so the proxy is idle while it is read.
	scrape := m.needsProxy && t.metrics != ""
	var before, after proxyCounters
	var scrapeErr error
	if scrape {
		before, scrapeErr = scrapeProxy(ctx, t.metrics)
	}
	var cmdBefore commandSample
	cmdErr := errors.New("no fill")
	if cfg.fill != nil {
		cmdBefore, cmdErr = sampleCommands(ctx, t.backends)
	}
	var machBefore, machAfter machineSample
	machErr := errors.New("not spawned")
	if t.proxyPID != 0 {
		machBefore, machErr = sampleMachine(ctx, t)
	}
	t0 := time.Now()
	close(start)
	prog.phase("run", &t0, &done)
	if cfg.cycles == 0 {
		timer := time.AfterFunc(cfg.duration, func() { stop.Store(true) })
		defer timer.Stop()
	}
	running.Wait()
	elapsed := time.Since(t0)
	if scrape && scrapeErr == nil {
		after, scrapeErr = scrapeProxy(ctx, t.metrics)
	}
	if machErr == nil {
		machAfter, machErr = sampleMachine(ctx, t)
	}
	prog.stop()

	res := collect(m.name, clients, cfg.keys.String(), elapsed, stats)
	if cmdErr == nil {
		var cmdAfter commandSample
		if cmdAfter, cmdErr = sampleCommands(ctx, t.backends); cmdErr == nil {
			res.BackendLoad = cmdAfter.loadSince(cmdBefore)
		}
	}
	switch {
	case !scrape:
	case scrapeErr != nil:
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "redlock-bench: %s c=%d: no B/cycle, allocs, cpu/cycle: %v\n", m.name, clients, scrapeErr)
		}
	default:
		res.setProxyCost(before, after)
	}
	switch {
	case t.proxyPID == 0:
	case machErr != nil:
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "redlock-bench: %s c=%d: no syscall and commands columns: %v\n", m.name, clients, machErr)
		}
	default:
		per := res.Cycles
		if cfg.keys.held {
			per = res.Busy
		}
		// cpu/cycle from /proc/PID/stat replaces the metrics' figure (the
		// same counter, read without a scrape).
		res.explain(machBefore, machAfter, per, m.needsProxy)
	}
	prog.finished(res)
	return res
}

// hold takes the -keys contended key with one more client of mode m and
// returns what gives it back at the end of the run.
func hold(ctx context.Context, cfg config, m *mode, t targets) (release func(), err error) {
	var l locker
	if m.openAll != nil {
		ls, err := m.openAll(t, cfg.ttl, 1)
		if err != nil {
			return nil, fmt.Errorf("holder: %w", err)
		}
		l = ls[0]
	} else {
		l = m.open(t, cfg.ttl)
	}
	key := cfg.keys.key(m.name, 0, 0)
	ok, err := l.acquire(ctx, key)
	if err == nil && !ok {
		err = errors.New("the key is held already")
	}
	if err != nil {
		l.close()
		return nil, fmt.Errorf("holder: take %s: %w", key, err)
	}
	return func() {
		_ = l.release(context.WithoutCancel(ctx), key)
		l.close()
	}, nil
}

// cycle is one acquire+release. It reports whether the cycle succeeded;
// record says whether the sample counts.
func cycle(ctx context.Context, l locker, key string, st *clientStats, record bool) bool {
	t0 := time.Now()
	ok, err := l.acquire(ctx, key)
	t1 := time.Now()
	if err == nil && !ok {
		st.busy++
		st.streak = 0
		return false
	}
	if err == nil {
		err = l.release(ctx, key)
	}
	if err != nil {
		st.streak++
		if ctx.Err() == nil {
			st.errs.add(err.Error(), 1)
		}
		return false
	}
	st.streak = 0
	if record {
		st.cycle = append(st.cycle, time.Since(t0))
		st.acquire = append(st.acquire, t1.Sub(t0))
	}
	return true
}

// collect merges the clients' stats into one result row.
func collect(mode string, clients int, keys string, elapsed time.Duration, stats []*clientStats) result {
	cycles := make([][]time.Duration, len(stats))
	acquires := make([][]time.Duration, len(stats))
	r := result{Mode: mode, Clients: clients, Keys: keys, ElapsedMS: float64(elapsed.Microseconds()) / 1000}
	var errs errorTally
	for i, st := range stats {
		cycles[i], acquires[i] = st.cycle, st.acquire
		r.Cycles += int64(len(st.cycle))
		r.Busy += st.busy
		if st.gaveUp {
			r.GaveUp++
		}
		errs.merge(st.errs)
	}
	r.Errors = errs.total
	r.Attempts = r.Cycles + r.Busy + r.Errors
	r.ErrorKinds = errs.sorted()
	secs := elapsed.Seconds()
	if secs > 0 {
		r.CyclesPerSec = float64(r.Cycles) / secs
		r.BusyPerSec = float64(r.Busy) / secs
	}
	cl := summarize(mergeSorted(cycles))
	al := summarize(mergeSorted(acquires))
	r.P50US, r.P99US, r.P999US = micros(cl.p50), micros(cl.p99), micros(cl.p999)
	r.MaxUS, r.MeanUS = micros(cl.max), micros(cl.mean)
	r.AcquireP50US, r.AcquireP99US = micros(al.p50), micros(al.p99)
	return r
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
