package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The proxy's cost per lock cycle: with -spawn the proxy and proxy-setnx
// runs read three of the proxy's counters from its metrics_listen just
// before and just after the measured window; the differences per
// successful cycle are the B/cycle, allocs and cpu/cycle columns. They
// cover the whole process (docs/benchmarks.md says what else they count);
// cpu/cycle comes from /proc/PID/stat instead when the tool can read it
// (procstat.go).

// Counters read from the proxy's /metrics.
const (
	metricAllocBytes = "go_memstats_alloc_bytes_total"
	metricMallocs    = "go_memstats_mallocs_total"
	metricCPUSeconds = "process_cpu_seconds_total"
)

// scrapeTimeout bounds one scrape of the proxy's metrics.
const scrapeTimeout = 2 * time.Second

// proxyCounters is one reading of the proxy's counters.
type proxyCounters struct {
	allocBytes float64 // bytes allocated on the heap since the start
	mallocs    float64 // heap objects allocated since the start
	cpuSeconds float64 // user and system CPU time since the start
}

// proxyCost is what the proxy spent per successful cycle between two
// readings.
type proxyCost struct {
	allocBytes, allocs, cpuUS float64
}

// perCycle divides the growth from before to after by cycles; ok is false
// when there were no cycles or a counter went backwards (a restarted
// proxy).
func (after proxyCounters) perCycle(before proxyCounters, cycles int64) (c proxyCost, ok bool) {
	dBytes := after.allocBytes - before.allocBytes
	dMallocs := after.mallocs - before.mallocs
	dCPU := after.cpuSeconds - before.cpuSeconds
	if cycles <= 0 || dBytes < 0 || dMallocs < 0 || dCPU < 0 {
		return proxyCost{}, false
	}
	n := float64(cycles)
	return proxyCost{allocBytes: dBytes / n, allocs: dMallocs / n, cpuUS: dCPU * 1e6 / n}, true
}

// scrapeProxy GETs http://addr/metrics and reads the proxy's counters.
func scrapeProxy(ctx context.Context, addr string) (proxyCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	url := "http://" + addr + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return proxyCounters{}, fmt.Errorf("proxy metrics: %w", err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	// Uncompressed: a gzip writer would cost the proxy about 1 MB per
	// scrape, counted in the window.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return proxyCounters{}, fmt.Errorf("proxy metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return proxyCounters{}, fmt.Errorf("proxy metrics: GET %s: %s", url, resp.Status)
	}
	v, err := parseMetrics(resp.Body, metricAllocBytes, metricMallocs, metricCPUSeconds)
	if err != nil {
		return proxyCounters{}, fmt.Errorf("proxy metrics: GET %s: %w", url, err)
	}
	return proxyCounters{allocBytes: v[metricAllocBytes], mallocs: v[metricMallocs], cpuSeconds: v[metricCPUSeconds]}, nil
}

// parseMetrics reads the Prometheus text format and returns the values of
// the named unlabelled samples (lines like "name 1.234e+06", optionally
// followed by a timestamp). Comment lines and other samples are skipped;
// a name that does not appear is an error.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	got := make(map[string]float64, len(names))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// A labelled sample's first word includes its labels, so it
		// never matches a wanted name.
		i := strings.IndexAny(line, " \t")
		if i < 0 || !want[line[:i]] {
			continue
		}
		name, fields := line[:i], strings.Fields(line[i:])
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		got[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			return nil, fmt.Errorf("no %s sample", n)
		}
	}
	return got, nil
}
