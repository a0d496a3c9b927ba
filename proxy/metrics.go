package proxy

import (
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// metricPrefix starts every metric name of the proxy's own.
const metricPrefix = "redlock_proxy_"

// latencyBuckets span a lock operation's range: a fast quorum on a LAN
// (~100µs) up to a LOCK … WAIT that waits out max_wait (10s by default).
var latencyBuckets = []float64{
	.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10,
}

// Backends is the view of backend health that the metrics and /readyz
// read; *redlock.Redlock has it.
type Backends interface {
	Status() []redlock.NodeStatus
	Voting() int
	Quorum() int
}

// MetricsSources are what the gauges read at scrape time.
type MetricsSources struct {
	Backends     Backends   // required
	Clients      func() int // connected clients; nil reads 0
	SessionLocks func() int // SESSION locks this proxy holds and renews; nil reads 0
	Waiters      func() int // LOCK … WAIT callers queued on this proxy; nil reads 0
	Holds        func() int // keys this proxy renews as holds; nil reads 0
	TierHolds    func() int // holds of the whole tier, as max_holds counts them; nil reads 0
	MaxHolds     func() int // the max_holds setting; nil reads 0
	// HoldsRefused counts the locks refused at max_holds; nil reads 0.
	HoldsRefused func() uint64
	TierMembers  func() int // live proxies of the tier as this one sees them; nil reads 0
	// Migrate reads what the old instance of migrate_from showed; nil
	// registers no migrate_* metrics.
	Migrate func() redlock.MigrateStats
	// Refusals counts the commands refused by a per-client bound, by the
	// bound's name (docs/operations.md); nil reads none.
	Refusals func() map[string]uint64
}

// Metrics are the proxy's Prometheus metrics, in a registry of their own
// (nothing is registered with the global default registry). Observe and
// ObserveBackend feed the counters and latency histograms; everything
// else is read from the MetricsSources given to Watch when scraped.
type Metrics struct {
	reg     *prometheus.Registry
	ops     *prometheus.CounterVec
	latency *prometheus.HistogramVec
	calls   *prometheus.HistogramVec // backend call durations, by backend
	callErr *prometheus.CounterVec   // backend call errors, by backend

	// Children looked up once per label set, so Observe neither hashes
	// label values nor allocates on the common path.
	opsBy   children[opKey, prometheus.Counter]
	latByOp children[string, prometheus.Observer]
	byAddr  children[string, backendChildren]
}

// children is a read-mostly map of metric children. A lookup loads an
// immutable map and takes no lock: a shared RWMutex's reader count is a
// cache line every core writes, here once per command and once per
// backend call. A key seen for the first time is added to a copy under
// mu; the keys are few (backends, commands × dialects × outcomes).
type children[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex
}

// get returns k's child, made by newV the first time.
func (c *children[K, V]) get(k K, newV func(K) V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	next := make(map[K]V)
	if old != nil {
		maps.Copy(next, *old)
	}
	v := newV(k)
	next[k] = v
	c.m.Store(&next)
	return v
}

type backendChildren struct {
	calls prometheus.Observer
	errs  prometheus.Counter
}

type opKey struct {
	cmd, dialect string
	result       commands.Outcome
}

// NewMetrics builds the registry with the lock operation and backend call
// metrics, the build info of version, and the Go and process collectors.
// Watch adds the gauges read from the running proxy.
func NewMetrics(version string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "lock_operations_total",
			Help: "Lock operations by command, client dialect (native, legacy, script, tx) and result (ok, held, not_held, noquorum, error).",
		}, []string{"command", "dialect", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "lock_operation_duration_seconds",
			Help:    "Time from a lock operation's arrival to its reply, by command, WAIT included.",
			Buckets: latencyBuckets,
		}, []string{"command"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "backend_call_duration_seconds",
			Help:    "Duration of each call to a backend (one per backend per lock operation), errors included.",
			Buckets: latencyBuckets,
		}, []string{"backend"}),
		callErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "backend_call_errors_total",
			Help: "Backend calls that failed: timeouts, connection errors, error replies.",
		}, []string{"backend"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "build_info",
		Help: "Always 1; the version label is the proxy's version.",
	}, []string{"version"})
	build.WithLabelValues(version).Set(1)
	m.reg.MustRegister(
		m.ops, m.latency, m.calls, m.callErr, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Watch registers the gauges read from src at scrape time: backend
// health, clients, SESSION locks, waiters, holds and the tier's size.
// Call it once.
func (m *Metrics) Watch(src MetricsSources) {
	gauge := func(name, help string, f func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricPrefix + name, Help: help},
			func() float64 {
				if f == nil {
					return 0
				}
				return float64(f())
			})
	}
	m.reg.MustRegister(
		gauge("clients_connected", "Client connections open now.", src.Clients),
		gauge("session_locks", "SESSION locks this proxy holds and renews for its clients.", src.SessionLocks),
		gauge("lock_waiters", "LOCK … WAIT callers queued on this proxy for a held key.", src.Waiters),
		gauge("holds", "Keys this proxy renews as holds (kept without expiry or beyond max_ttl).", src.Holds),
		gauge("tier_members", "Live proxies of the tier (this one included) as this proxy sees them.", src.TierMembers),
		gauge("tier_holds", "Holds of the whole tier as max_holds counts them: the record as of the last round, and this proxy's own.", src.TierHolds),
		gauge("max_holds", "The max_holds setting: past it, locks without expiry or beyond max_ttl are refused (0: no bound).", src.MaxHolds),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricPrefix + "holds_refused_total",
			Help: "Locks without expiry or beyond max_ttl refused because the tier held max_holds."},
			func() float64 {
				if src.HoldsRefused == nil {
					return 0
				}
				return float64(src.HoldsRefused())
			}),
		backendCollector{b: src.Backends},
		refusalCollector{f: src.Refusals},
	)
	if f := src.Migrate; f != nil {
		counter := func(name, help string, v func(redlock.MigrateStats) uint64) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricPrefix + name, Help: help},
				func() float64 { return float64(v(f())) })
		}
		m.reg.MustRegister(
			gauge("migrate_from_active", "1 while migrate_from is set: every lock operation also takes the old single Redis.",
				func() int { return int(boolFloat(f().Addr != "")) }),
			counter("migrate_held_acquires_total", "Acquisitions refused because the old instance of migrate_from held the key for another value.",
				func(s redlock.MigrateStats) uint64 { return s.HeldAcquires }),
			counter("migrate_legacy_holds_total", "Keys seen held on the old instance of migrate_from and not on a quorum of backends: locks of clients that have not moved.",
				func(s redlock.MigrateStats) uint64 { return s.LegacyHolds }),
		)
	}
}

// refusalsDesc is the counter of commands refused by a per-client bound.
var refusalsDesc = prometheus.NewDesc(metricPrefix+"limit_refusals_total",
	"Commands refused because they would take one client, or all of them, past a bound on what the proxy holds on the shared backend connections (limit: the bound's name).",
	[]string{"limit"}, nil)

// refusalCollector reads the refusal counts at scrape time.
type refusalCollector struct{ f func() map[string]uint64 }

func (c refusalCollector) Describe(ch chan<- *prometheus.Desc) { ch <- refusalsDesc }

func (c refusalCollector) Collect(ch chan<- prometheus.Metric) {
	if c.f == nil {
		return
	}
	for limit, n := range c.f() {
		ch <- prometheus.MustNewConstMetric(refusalsDesc, prometheus.CounterValue, float64(n), limit)
	}
}

// Observe counts one command by the outcome its handler gave; it has
// commands.Options.Observe's signature. Commands of no lock dialect
// (PING, INFO, …) are not counted.
func (m *Metrics) Observe(cmd, dialect string, result commands.Outcome, d time.Duration) {
	if dialect == "" {
		return
	}
	c := m.opsBy.get(opKey{cmd, dialect, result}, func(k opKey) prometheus.Counter {
		return m.ops.WithLabelValues(k.cmd, k.dialect, k.result.String())
	})
	h := m.latByOp.get(cmd, func(cmd string) prometheus.Observer {
		return m.latency.WithLabelValues(cmd)
	})
	c.Inc()
	h.Observe(d.Seconds())
}

// ObserveBackend records one backend call; it has
// redlock.Options.ObserveCall's signature and allocates nothing once a
// backend has been seen.
func (m *Metrics) ObserveBackend(addr string, d time.Duration, err error) {
	ch := m.byAddr.get(addr, func(addr string) backendChildren {
		return backendChildren{calls: m.calls.WithLabelValues(addr), errs: m.callErr.WithLabelValues(addr)}
	})
	ch.calls.Observe(d.Seconds())
	if err != nil {
		ch.errs.Inc()
	}
}

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics / protobuf when the scraper asks).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// backendStates are the values of the state label, in NodeStatus terms.
var backendStates = []string{redlock.StateUp, redlock.StateDown, redlock.StateQuarantined, redlock.StateLoading, redlock.StateRefilling}

var (
	descBackendState = prometheus.NewDesc(metricPrefix+"backend_state",
		"1 for the backend's current state (up, down, quarantined, loading, refilling), 0 for the others.",
		[]string{"backend", "state"}, nil)
	descBackendRefill = prometheus.NewDesc(metricPrefix+"backend_refill_keys",
		"Keys of the refill of a backend that came back empty, while it runs: scanned, copied to it, deleted from it, unsolved (the others disagree).",
		[]string{"backend", "outcome"}, nil)
	descBackendRefilling = prometheus.NewDesc(metricPrefix+"backend_refilling",
		"1 while the backend, back from empty, is being refilled from the others, else 0.",
		[]string{"backend"}, nil)
	descBackendVoting = prometheus.NewDesc(metricPrefix+"backend_voting",
		"1 when the backend's answers count towards a quorum now, else 0.",
		[]string{"backend"}, nil)
	descBackendQuarantine = prometheus.NewDesc(metricPrefix+"backend_quarantine_seconds",
		"Seconds until the backend's quarantine ends (restart, fresh start or clock jump); 0 when not quarantined.",
		[]string{"backend"}, nil)
	descBackendFailures = prometheus.NewDesc(metricPrefix+"backend_consecutive_failures",
		"Consecutive failed calls to the backend; down_after of them mark it down.",
		[]string{"backend"}, nil)
	descBackendClockJumps = prometheus.NewDesc(metricPrefix+"backend_clock_jumps_total",
		"Clock jumps of the backend seen by the clock watch since the proxy started; each quarantines it.",
		[]string{"backend"}, nil)
	descVoting = prometheus.NewDesc(metricPrefix+"backends_voting",
		"Backends whose answers count towards a quorum now.", nil, nil)
	descQuorum = prometheus.NewDesc(metricPrefix+"backends_quorum",
		"Backends that must agree for a lock operation to succeed (N/2+1).", nil, nil)
)

// backendCollector reads backend health when scraped, so the gauges are
// never stale and nothing runs between scrapes.
type backendCollector struct{ b Backends }

func (c backendCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBackendState, descBackendVoting, descBackendQuarantine,
		descBackendFailures, descBackendClockJumps, descBackendRefilling, descBackendRefill, descVoting, descQuorum} {
		ch <- d
	}
}

func (c backendCollector) Collect(ch chan<- prometheus.Metric) {
	if c.b == nil {
		return
	}
	now := time.Now()
	voting := 0
	for _, s := range c.b.Status() {
		for _, st := range backendStates {
			ch <- prometheus.MustNewConstMetric(descBackendState, prometheus.GaugeValue, boolFloat(s.State == st), s.Addr, st)
		}
		up := s.State == redlock.StateUp
		if up {
			voting++
		}
		ch <- prometheus.MustNewConstMetric(descBackendVoting, prometheus.GaugeValue, boolFloat(up), s.Addr)
		left := 0.0
		if !s.QuarantinedUntil.IsZero() {
			left = max(0, s.QuarantinedUntil.Sub(now).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(descBackendQuarantine, prometheus.GaugeValue, left, s.Addr)
		ch <- prometheus.MustNewConstMetric(descBackendFailures, prometheus.GaugeValue, float64(s.Failures), s.Addr)
		ch <- prometheus.MustNewConstMetric(descBackendClockJumps, prometheus.CounterValue, float64(s.ClockJumps), s.Addr)
		ch <- prometheus.MustNewConstMetric(descBackendRefilling, prometheus.GaugeValue, boolFloat(s.Refilling), s.Addr)
		if s.Refilling {
			f := s.Refill
			for _, o := range []struct {
				name string
				n    int64
			}{{"scanned", f.Scanned}, {"copied", f.Copied}, {"deleted", f.Deleted}, {"unsolved", f.Unsolved}} {
				ch <- prometheus.MustNewConstMetric(descBackendRefill, prometheus.GaugeValue, float64(o.n), s.Addr, o.name)
			}
		}
	}
	// Counted from the same snapshot as the per-backend gauges, so the
	// total always matches their sum.
	ch <- prometheus.MustNewConstMetric(descVoting, prometheus.GaugeValue, float64(voting))
	ch <- prometheus.MustNewConstMetric(descQuorum, prometheus.GaugeValue, float64(c.b.Quorum()))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
