package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// promText is a trimmed /metrics reply of the proxy.
const promText = `# HELP go_memstats_alloc_bytes Number of bytes allocated in heap and currently in use.
# TYPE go_memstats_alloc_bytes gauge
go_memstats_alloc_bytes 2.1236e+06
# HELP go_memstats_alloc_bytes_total Total number of bytes allocated in heap until now, even if released already.
# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 1.234e+06
# HELP go_memstats_mallocs_total Total number of heap objects allocated, both live and gc-ed.
# TYPE go_memstats_mallocs_total counter
go_memstats_mallocs_total	15209 1700000000000

# HELP redlock_lock_operations_total Lock operations.
# TYPE redlock_lock_operations_total counter
redlock_lock_operations_total{command="lock",dialect="native",result="ok"} 9
process_cpu_seconds_total{note="a labelled copy is not the sample"} 99
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 0.57
`

func TestParseMetrics(t *testing.T) {
	got, err := parseMetrics(strings.NewReader(promText), metricAllocBytes, metricMallocs, metricCPUSeconds)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{metricAllocBytes: 1.234e6, metricMallocs: 15209, metricCPUSeconds: 0.57}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}

	for _, tt := range []struct{ name, text, err string }{
		{"missing sample", "# TYPE go_memstats_mallocs_total counter\ngo_memstats_mallocs_total 3\n", "no go_memstats_alloc_bytes_total sample"},
		{"only labelled", "go_memstats_alloc_bytes_total{a=\"b\"} 3\n", "no go_memstats_alloc_bytes_total sample"},
		{"bad value", "go_memstats_alloc_bytes_total lots\n", "go_memstats_alloc_bytes_total: strconv.ParseFloat"},
	} {
		if _, err := parseMetrics(strings.NewReader(tt.text), metricAllocBytes); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
		}
	}
}

func TestProxyCost(t *testing.T) {
	before := proxyCounters{allocBytes: 1e6, mallocs: 1000, cpuSeconds: 0.5}
	after := proxyCounters{allocBytes: 5e6, mallocs: 73000, cpuSeconds: 0.54}
	c, ok := after.perCycle(before, 1000)
	if !ok || c.allocBytes != 4000 || c.allocs != 72 || c.cpuUS < 39.999 || c.cpuUS > 40.001 {
		t.Fatalf("perCycle = %+v, %v; want 4000 B, 72 allocs, 40µs", c, ok)
	}
	if _, ok := after.perCycle(before, 0); ok {
		t.Error("no cycles: want no figures")
	}
	if _, ok := before.perCycle(after, 10); ok {
		t.Error("counters went backwards: want no figures")
	}

	var r result
	r.setProxyCost(before, after)
	if r.ProxyAllocBytesPerCycle != nil {
		t.Error("a row without cycles got proxy figures")
	}
	r.Cycles = 1000
	r.setProxyCost(before, after)
	if r.ProxyAllocBytesPerCycle == nil || *r.ProxyAllocBytesPerCycle != 4000 || *r.ProxyAllocsPerCycle != 72 || fmtCPU(r.ProxyCPUUSPerCycle) != "40µs" {
		t.Errorf("setProxyCost: %v %v %v", r.ProxyAllocBytesPerCycle, r.ProxyAllocsPerCycle, r.ProxyCPUUSPerCycle)
	}
}

// TestScrapeProxy reads the counters over HTTP from a stand-in for the
// proxy's metrics server (loopback only).
func TestScrapeProxy(t *testing.T) {
	var gone atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || gone.Load() {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, promText)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	got, err := scrapeProxy(context.Background(), addr)
	if err != nil || got != (proxyCounters{allocBytes: 1.234e6, mallocs: 15209, cpuSeconds: 0.57}) {
		t.Fatalf("scrapeProxy = %+v, %v", got, err)
	}
	gone.Store(true)
	if _, err := scrapeProxy(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404 must be an error: %v", err)
	}
}
