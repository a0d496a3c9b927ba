package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// fakeBackends reports a fixed health.
type fakeBackends struct {
	status []redlock.NodeStatus
	quorum int
}

func (f *fakeBackends) Status() []redlock.NodeStatus { return f.status }
func (f *fakeBackends) Quorum() int                  { return f.quorum }
func (f *fakeBackends) Voting() int {
	n := 0
	for _, s := range f.status {
		if s.State == redlock.StateUp {
			n++
		}
	}
	return n
}

// fiveBackends returns five backends of which the first `up` are up, the
// next one quarantined for a minute and the rest down.
func fiveBackends(up int) *fakeBackends {
	f := &fakeBackends{quorum: 3}
	for i := range 5 {
		s := redlock.NodeStatus{Addr: "10.0.0." + string(rune('1'+i)) + ":6379", State: redlock.StateUp}
		switch {
		case i == up:
			s.State, s.QuarantinedUntil = redlock.StateQuarantined, time.Now().Add(time.Minute)
		case i > up:
			s.State, s.Failures = redlock.StateDown, 4
		}
		f.status = append(f.status, s)
	}
	return f
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestReadyHandler(t *testing.T) {
	draining := false
	for _, tc := range []struct {
		up       int
		draining bool
		code     int
		body     string
	}{
		{5, false, 200, "ready: 5 of 5 backends voting, quorum 3\n"},
		{3, false, 200, "ready: 3 of 5 backends voting, quorum 3\n"},
		{2, false, 503, "not ready: 2 of 5 backends voting, quorum 3\n"},
		{0, false, 503, "not ready: 0 of 5 backends voting, quorum 3\n"},
		{5, true, 503, "not ready: shutting down\n"},
	} {
		draining = tc.draining
		code, body := get(t, ReadyHandler(fiveBackends(tc.up), func() bool { return draining }), "/readyz")
		if code != tc.code || body != tc.body {
			t.Errorf("%d up, draining %v: %d %q, want %d %q", tc.up, tc.draining, code, body, tc.code, tc.body)
		}
	}
	if code, body := get(t, HealthHandler(), "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
}

func TestMetricsExposition(t *testing.T) {
	m := NewMetrics("1.2.3")
	m.Watch(MetricsSources{
		Backends:    fiveBackends(3),
		Clients:     func() int { return 7 },
		Waiters:     func() int { return 2 },
		Holds:       func() int { return 5 },
		TierMembers: func() int { return 3 },
	})
	m.Observe("lock", "native", commands.ResultOK, time.Millisecond)
	m.Observe("lock", "native", commands.ResultOK, 3*time.Millisecond)
	m.Observe("lock", "native", commands.ResultHeld, time.Millisecond)
	m.Observe("set", "legacy", commands.ResultNoQuorum, time.Millisecond)
	m.Observe("ping", "", commands.ResultOK, time.Millisecond) // no lock dialect: not counted
	m.ObserveBackend("10.0.0.1:6379", time.Millisecond, nil)
	m.ObserveBackend("10.0.0.1:6379", time.Millisecond, errors.New("i/o timeout"))
	_, body := get(t, m.Handler(), "/metrics")
	for _, want := range []string{
		`redlock_proxy_lock_operations_total{command="lock",dialect="native",result="ok"} 2`,
		`redlock_proxy_lock_operations_total{command="lock",dialect="native",result="held"} 1`,
		`redlock_proxy_lock_operations_total{command="set",dialect="legacy",result="noquorum"} 1`,
		`redlock_proxy_lock_operation_duration_seconds_count{command="lock"} 3`,
		`redlock_proxy_lock_operation_duration_seconds_bucket{command="lock",le="0.0025"} 2`,
		`redlock_proxy_backend_call_duration_seconds_count{backend="10.0.0.1:6379"} 2`,
		`redlock_proxy_backend_call_errors_total{backend="10.0.0.1:6379"} 1`,
		`redlock_proxy_backend_state{backend="10.0.0.1:6379",state="up"} 1`,
		`redlock_proxy_backend_state{backend="10.0.0.1:6379",state="down"} 0`,
		`redlock_proxy_backend_state{backend="10.0.0.4:6379",state="quarantined"} 1`,
		`redlock_proxy_backend_state{backend="10.0.0.5:6379",state="down"} 1`,
		`redlock_proxy_backend_voting{backend="10.0.0.3:6379"} 1`,
		`redlock_proxy_backend_voting{backend="10.0.0.4:6379"} 0`,
		`redlock_proxy_backend_quarantine_seconds{backend="10.0.0.1:6379"} 0`,
		`redlock_proxy_backend_consecutive_failures{backend="10.0.0.5:6379"} 4`,
		"redlock_proxy_backends_voting 3",
		"redlock_proxy_backends_quorum 3",
		"redlock_proxy_clients_connected 7",
		"redlock_proxy_session_locks 0",
		"redlock_proxy_lock_waiters 2",
		"redlock_proxy_holds 5",
		"redlock_proxy_tier_members 3",
		`redlock_proxy_backend_clock_jumps_total{backend="10.0.0.1:6379"} 0`,
		`redlock_proxy_build_info{version="1.2.3"} 1`,
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if strings.Contains(body, `command="ping"`) {
		t.Errorf("PING was counted as a lock operation")
	}
	// The quarantine gauge counts down from about a minute.
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, `redlock_proxy_backend_quarantine_seconds{backend="10.0.0.4:6379"} `); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || f <= 30 || f > 60 {
				t.Errorf("quarantine seconds = %q, want at most 60 and counting down", v)
			}
		}
	}
}

// The migrate_from counters are read at scrape time, only when given.
func TestMetricsMigrate(t *testing.T) {
	m := NewMetrics("1.2.3")
	m.Watch(MetricsSources{
		Backends: fiveBackends(3),
		Migrate: func() redlock.MigrateStats {
			return redlock.MigrateStats{Addr: "10.0.0.9:6379", HeldAcquires: 5, LegacyHolds: 2}
		},
	})
	_, body := get(t, m.Handler(), "/metrics")
	for _, want := range []string{
		"redlock_proxy_migrate_from_active 1",
		"redlock_proxy_migrate_held_acquires_total 5",
		"redlock_proxy_migrate_legacy_holds_total 2",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	m = NewMetrics("1.2.3")
	m.Watch(MetricsSources{Backends: fiveBackends(3)})
	if _, body := get(t, m.Handler(), "/metrics"); strings.Contains(body, "migrate") {
		t.Error("migrate_* metrics without a Migrate source")
	}
}

func TestMetricsObserveAllocs(t *testing.T) {
	m := NewMetrics("test")
	m.Watch(MetricsSources{Backends: fiveBackends(5)})
	m.Observe("unlock", "native", commands.ResultOK, time.Millisecond)
	if n := testing.AllocsPerRun(200, func() { m.Observe("unlock", "native", commands.ResultOK, time.Millisecond) }); n != 0 {
		t.Fatalf("Observe allocates %v times per call", n)
	}
	m.ObserveBackend("10.0.0.1:6379", time.Millisecond, nil)
	if n := testing.AllocsPerRun(200, func() { m.ObserveBackend("10.0.0.1:6379", time.Millisecond, nil) }); n != 0 {
		t.Fatalf("ObserveBackend allocates %v times per call", n)
	}
}

// TestMetricsObserveConcurrentFirstSight: backends and commands seen for
// the first time by many goroutines at once are each counted once per
// call (a child made twice would lose counts).
func TestMetricsObserveConcurrentFirstSight(t *testing.T) {
	m := NewMetrics("test")
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 80 {
				m.ObserveBackend("10.0.0."+strconv.Itoa(i%8)+":6379", time.Millisecond, errors.New("x"))
				m.Observe("cmd"+strconv.Itoa((g+i)%4), "native", commands.ResultOK, time.Millisecond)
			}
		}()
	}
	wg.Wait()
	_, body := get(t, m.Handler(), "/metrics")
	for i := range 8 {
		want := `redlock_proxy_backend_call_errors_total{backend="10.0.0.` + strconv.Itoa(i) + `:6379"} 160`
		if !strings.Contains(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	for i := range 4 {
		want := `redlock_proxy_lock_operations_total{command="cmd` + strconv.Itoa(i) + `",dialect="native",result="ok"} 320`
		if !strings.Contains(body, want) {
			t.Errorf("missing %s", want)
		}
	}
}

func TestOpsServer(t *testing.T) {
	b := fiveBackends(2)
	m := NewMetrics("test")
	m.Watch(MetricsSources{Backends: b})
	o := NewOpsServer("127.0.0.1:0", m, b, nil, nil)
	if err := o.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- o.Serve() }()
	base := "http://" + o.Addr().String()
	fetch := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := fetch("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, _ := fetch("/readyz"); code != 503 {
		t.Fatalf("/readyz with 2 of 5 voting = %d", code)
	}
	if code, body := fetch("/metrics"); code != 200 || !strings.Contains(body, "redlock_proxy_backends_voting 2") {
		t.Fatalf("/metrics = %d, %d bytes", code, len(body))
	}
	if code, _ := fetch("/nothing"); code != 404 {
		t.Fatalf("/nothing = %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve after Shutdown = %v", err)
	}
	if err := o.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
}
