package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample", ms(7), 99.9, 7 * time.Millisecond},
		{"p50 of 1..4 is the 2nd", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p50 of 1..5 is the 3rd", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"p0 is the minimum", ms(1, 2, 3), 0, time.Millisecond},
		{"p100 is the maximum", ms(1, 2, 3), 100, 3 * time.Millisecond},
		{"p99 of 1..100", seq(100), 99, 99 * time.Millisecond},
		{"p99 of 1..101 rounds up", seq(101), 99, 100 * time.Millisecond},
		{"p99.9 of 1..1000 is not pushed up by float error", seq(1000), 99.9, 999 * time.Millisecond},
		{"p99.9 of 1..10000", seq(10000), 99.9, 9990 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.samples, tt.p); got != tt.want {
				t.Fatalf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

// seq is 1ms … n ms.
func seq(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * time.Millisecond
	}
	return out
}

// TestMergeSortedSummarize: shuffled per-client parts merge into the same
// percentiles as the whole sorted set.
func TestMergeSortedSummarize(t *testing.T) {
	all := seq(1000)
	shuffled := slices.Clone(all)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	merged := mergeSorted([][]time.Duration{shuffled[:10], shuffled[10:600], nil, shuffled[600:]})
	if !slices.Equal(merged, all) {
		t.Fatal("mergeSorted did not return every sample in order")
	}
	l := summarize(merged)
	if l.p50 != 500*time.Millisecond || l.p99 != 990*time.Millisecond || l.p999 != 999*time.Millisecond || l.max != time.Second {
		t.Fatalf("summarize = %+v", l)
	}
	if l.mean != 500500*time.Microsecond {
		t.Fatalf("mean = %v, want 500.5ms", l.mean)
	}
}

func TestErrorTally(t *testing.T) {
	var a, b errorTally
	a.add("NOQUORUM", 3)
	b.add("connection refused", 5)
	b.add("NOQUORUM", 1)
	a.merge(b)
	want := []errorCount{{"connection refused", 5}, {"NOQUORUM", 4}}
	if got := a.sorted(); !slices.Equal(got, want) || a.total != 9 {
		t.Fatalf("sorted = %v total %d, want %v total 9", got, a.total, want)
	}
	var c errorTally
	for i := range maxErrorKinds + 5 {
		c.add(strings.Repeat("x", i+1), 1)
	}
	if len(c.kinds) != maxErrorKinds+1 || c.kinds["(other errors)"] != 5 {
		t.Fatalf("overflow: %d kinds, other = %d", len(c.kinds), c.kinds["(other errors)"])
	}
}

func TestKeySpace(t *testing.T) {
	tests := []struct {
		spec          string
		client, cycle int
		want          string
	}{
		{"distinct", 3, 9, "bench:proxy:3"},
		{"contended", 3, 9, "bench:proxy:contended"},
		{"1", 3, 9, "bench:proxy:k0"},
		{"4", 1, 0, "bench:proxy:k1"},
		{"4", 1, 5, "bench:proxy:k2"},
	}
	for _, tt := range tests {
		k, err := parseKeys(tt.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.key("proxy", tt.client, tt.cycle); got != tt.want {
			t.Errorf("-keys %s client %d cycle %d: %q, want %q", tt.spec, tt.client, tt.cycle, got, tt.want)
		}
		if k.String() != tt.spec {
			t.Errorf("-keys %s prints as %q", tt.spec, k.String())
		}
	}
	for _, bad := range []string{"", "0", "-1", "many"} {
		if _, err := parseKeys(bad); err == nil {
			t.Errorf("-keys %q accepted", bad)
		}
	}
}

func TestParseFlags(t *testing.T) {
	if got, err := parseClients("1, 16,64"); err != nil || !slices.Equal(got, []int{1, 16, 64}) {
		t.Fatalf("parseClients = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,,2", "x"} {
		if _, err := parseClients(bad); err == nil {
			t.Errorf("-c %q accepted", bad)
		}
	}
	ms, err := parseModes("single,proxy,single")
	if err != nil || len(ms) != 2 || ms[0].name != "single" || ms[1].name != "proxy" {
		t.Fatalf("parseModes = %v, %v", ms, err)
	}
	if _, err := parseModes("proxy,etcd"); err == nil || !strings.Contains(err.Error(), `"etcd"`) {
		t.Fatalf("unknown mode: %v", err)
	}
	var errOut bytes.Buffer
	if code := run([]string{"-modes", "redsync"}, &bytes.Buffer{}, &errOut); code != 2 || !strings.Contains(errOut.String(), "needs -backend") {
		t.Fatalf("redsync without backends: exit %d, %q", code, errOut.String())
	}
	// -keys contended refuses every attempt: -n would never end, and the
	// holder's ttl must outlast the run.
	for _, args := range [][]string{
		{"-keys", "contended", "-n", "100", "-modes", "proxy"},
		{"-keys", "contended", "-d", "5s", "-ttl", "5s", "-modes", "proxy"},
	} {
		errOut.Reset()
		if code := run(args, &bytes.Buffer{}, &errOut); code != 2 || !strings.Contains(errOut.String(), "-keys contended") {
			t.Errorf("%v: exit %d, %q", args, code, errOut.String())
		}
	}
}

// sampleReport has two client counts; the second has no redsync row.
func sampleReport() *report {
	return &report{
		Command: commandLine([]string{"-c", "1,2", "-modes", "proxy, single"}), Go: "go1.26 linux/amd64", GOMAXPROCS: 2,
		Proxy: "127.0.0.1:1", Backends: []string{"127.0.0.1:2", "127.0.0.1:3"}, Keys: "distinct", TTLMS: 10000, DurationMS: 5000,
		Results: []result{
			{Mode: "proxy", Clients: 1, Cycles: 10, Attempts: 10, CyclesPerSec: 3000, P50US: 300, P99US: 1500, P999US: 12000, AcquireP50US: 150,
				ProxyAllocBytesPerCycle: ptr(4335.4), ProxyAllocsPerCycle: ptr(71.96), ProxyCPUUSPerCycle: ptr(41.2),
				ProxyWritesPerCycle: ptr(2.844), ProxyReadsPerCycle: ptr(4.6), BackendWritesPerCycle: ptr(0.4),
				BackendReadsPerCycle: ptr(0.42), CommandsPerWrite: ptr(7.08)},
			{Mode: "redsync", Clients: 1, Cycles: 10, Attempts: 10, CyclesPerSec: 1500, P50US: 600, P99US: 2000, P999US: 250000},
			{Mode: "single", Clients: 1, Cycles: 10, Attempts: 10, CyclesPerSec: 12000, P50US: 80, P99US: 200, P999US: 900},
			{Mode: "proxy-setnx", Clients: 2, Cycles: 0, Busy: 50, Attempts: 50, BusyPerSec: 7.5},
			{Mode: "single", Clients: 2, Cycles: 10, Busy: 2, Errors: 1, Attempts: 13, CyclesPerSec: 20000, P50US: 90,
				ErrorKinds: []errorCount{{"connection refused", 1}}},
		},
	}
}

func ptr(v float64) *float64 { return &v }

func TestRatios(t *testing.T) {
	rep := sampleReport()
	rep.computeRatios()
	want := []struct{ vsRedsync, vsSingle, p50 string }{
		{"2.00x", "0.25x", "0.50x"},
		{"1.00x", "0.12x", "1.00x"},
		{"8.00x", "1.00x", "0.13x"},
		{"-", "0.00x", "-"},
		{"-", "1.00x", "-"},
	}
	for i, w := range want {
		r := rep.Results[i]
		got := []string{fmtRatio(r.VsRedsync), fmtRatio(r.VsSingle), fmtRatio(r.P50VsRedsync)}
		if !slices.Equal(got, []string{w.vsRedsync, w.vsSingle, w.p50}) {
			t.Errorf("%s c=%d: ratios %v, want %v", r.Mode, r.Clients, got, w)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		us   float64
		want string
	}{{0.4, "0µs"}, {237.4, "237µs"}, {999.4, "999µs"}, {3260, "3.26ms"}, {11040, "11.0ms"}, {250000, "250ms"}} {
		if got := fmtMicros(tt.us, 1); got != tt.want {
			t.Errorf("fmtMicros(%v) = %q, want %q", tt.us, got, tt.want)
		}
	}
	if got := fmtMicros(5, 0); got != "-" {
		t.Errorf("no samples: %q", got)
	}
	for _, tt := range []struct {
		v    float64
		want string
	}{{0, "0"}, {7.5, "7.50"}, {42.25, "42.2"}, {29024.4, "29024"}} {
		if got := fmtRate(tt.v); got != tt.want {
			t.Errorf("fmtRate(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
	if got := commandLine([]string{"-modes", "proxy, single", "-d", "2s", "it's"}); got != `redlock-bench -modes 'proxy, single' -d 2s 'it'\''s'` {
		t.Errorf("commandLine = %s", got)
	}
}

func TestTable(t *testing.T) {
	rep := sampleReport()
	rep.computeRatios()
	var out bytes.Buffer
	if err := rep.writeTable(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("want header, column names and 5 rows, got:\n%s", out.String())
	}
	for _, s := range []string{"# redlock-bench -c 1,2 -modes 'proxy, single'", "GOMAXPROCS=2", "backends: 2× redis (given) 127.0.0.1:2,127.0.0.1:3", "proxy 127.0.0.1:1", "5s per run"} {
		if !strings.Contains(lines[0], s) {
			t.Errorf("header lacks %q: %s", s, lines[0])
		}
	}
	if got := strings.Fields(lines[1]); !slices.Equal(got, tableColumns) {
		t.Errorf("columns %v", got)
	}
	wantRows := [][]string{
		{"proxy", "1", "3000", "0", "300µs", "1.50ms", "12.0ms", "150µs", "2.00x", "0.25x", "0.50x", "4335", "72.0", "41µs", "2.84", "4.60", "0.40", "0.42", "7.08"},
		{"redsync", "1", "1500", "0", "600µs", "2.00ms", "250ms", "0µs", "1.00x", "0.12x", "1.00x", "-", "-", "-", "-", "-", "-", "-", "-"},
		{"single", "1", "12000", "0", "80µs", "200µs", "900µs", "0µs", "8.00x", "1.00x", "0.13x", "-", "-", "-", "-", "-", "-", "-", "-"},
		{"proxy-setnx", "2", "0", "7.50", "-", "-", "-", "-", "-", "0.00x", "-", "-", "-", "-", "-", "-", "-", "-", "-"},
		{"single", "2", "20000", "0", "90µs", "0µs", "0µs", "0µs", "-", "1.00x", "-", "-", "-", "-", "-", "-", "-", "-", "-"},
	}
	for i, want := range wantRows {
		if got := strings.Fields(lines[i+2]); !slices.Equal(got, want) {
			t.Errorf("row %d: %v, want %v", i, got, want)
		}
	}
	// Every line is equally long: the columns line up.
	n := len([]rune(lines[1]))
	for _, l := range lines[2:] {
		if len([]rune(l)) != n {
			t.Errorf("ragged table:\n%s", out.String())
			break
		}
	}

	var errs bytes.Buffer
	if !rep.writeErrors(&errs) || !strings.Contains(errs.String(), "single c=2: 1 errors in 13 attempts (7.69%, FAILED") ||
		!strings.Contains(errs.String(), "connection refused") {
		t.Errorf("writeErrors: %s", errs.String())
	}
}

func TestJSON(t *testing.T) {
	rep := sampleReport()
	rep.computeRatios()
	var out bytes.Buffer
	if err := rep.writeJSON(&out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		GOMAXPROCS int `json:"gomaxprocs"`
		Results    []map[string]any
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if doc.GOMAXPROCS != 2 || len(doc.Results) != 5 {
		t.Fatalf("doc: %s", out.String())
	}
	r := doc.Results[0]
	if r["p99_us"] != 1500.0 || r["vs_redsync"] != 2.0 || r["vs_single"] != 0.25 || r["p50_vs_redsync"] != 0.5 {
		t.Errorf("row 0: %v", r)
	}
	if doc.Results[3]["vs_redsync"] != nil {
		t.Errorf("a missing reference row must be null: %v", doc.Results[3])
	}
	if r["proxy_alloc_bytes_per_cycle"] != 4335.4 || r["proxy_allocs_per_cycle"] != 71.96 || r["proxy_cpu_us_per_cycle"] != 41.2 {
		t.Errorf("row 0 proxy cost: %v", r)
	}
	for _, f := range []string{"proxy_alloc_bytes_per_cycle", "proxy_allocs_per_cycle", "proxy_cpu_us_per_cycle"} {
		if _, ok := doc.Results[1][f]; ok {
			t.Errorf("row 1 has %s; absent figures must be left out: %v", f, doc.Results[1])
		}
	}
}

// TestSmoke runs the whole command: spawned backends and proxy, two modes
// at two client counts.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns redis-server and builds the proxy")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not on PATH; run `make test`, which installs it")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"-spawn", "3", "-n", "40", "-warmup", "100ms", "-c", "1,2", "-modes", "proxy,single"}, &out, &errOut)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "# redlock-bench -spawn 3") {
		t.Fatalf("want header, column names and 4 rows")
	}
	for i, want := range [][2]string{{"proxy", "1"}, {"single", "1"}, {"proxy", "2"}, {"single", "2"}} {
		f := strings.Fields(lines[i+2])
		if len(f) != len(tableColumns) || f[0] != want[0] || f[1] != want[1] {
			t.Fatalf("row %d = %v, want %s c=%s", i, f, want[0], want[1])
		}
		if f[2] == "0" || f[4] == "-" {
			t.Errorf("%s c=%s measured no cycles", want[0], want[1])
		}
		if f[9] == "-" || f[8] != "-" {
			t.Errorf("%s c=%s: vs-single %s (want a ratio), vs-redsync %s (want -)", want[0], want[1], f[9], f[8])
		}
		// The spawned proxy's cost per cycle is read from its metrics.
		if cost := f[11:14]; (want[0] == "proxy") == slices.Contains(cost, "-") {
			t.Errorf("%s c=%s: B/cycle, allocs, cpu/cycle = %v", want[0], want[1], cost)
		}
	}
	if n := strings.Count(errOut.String(), " cycles, "); n != 4 {
		t.Errorf("want one plain progress line per run on a non-terminal stderr, got %d", n)
	}
}

// TestIdle runs -idle with a few hundred connections: the proxy's RSS is
// read before and after, and the line is in the table and in the JSON.
func TestIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns redis-server and builds the proxy")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not on PATH; run `make test`, which installs it")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"-spawn", "1", "-idle", "200", "-d", "100ms", "-warmup", "10ms", "-c", "1", "-modes", "proxy", "-json"}, &out, &errOut)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Idle *idleResult `json:"idle"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Idle == nil || doc.Idle.Connections != 200 || doc.Idle.RSSBeforeBytes <= 0 || doc.Idle.RSSAfterBytes <= 0 {
		t.Fatalf("idle = %+v", doc.Idle)
	}
	if s := doc.Idle.String(); !strings.HasPrefix(s, "idle: 200 connections, proxy RSS ") || !strings.Contains(s, " KiB per connection)") {
		t.Errorf("idle line %q", s)
	}

	var errs bytes.Buffer
	if code := run([]string{"-idle", "10", "-modes", "proxy"}, &bytes.Buffer{}, &errs); code != 2 || !strings.Contains(errs.String(), "needs -spawn") {
		t.Errorf("-idle without -spawn: exit %d, %q", code, errs.String())
	}
}

// TestBatch runs -batch through a spawned proxy: both the proxy and the
// single backend get a line, with positive medians, in the table and in
// the JSON; a negative -batch is a usage error.
func TestBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns redis-server and builds the proxy")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not on PATH; run `make test`, which installs it")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"-spawn", "3", "-batch", "8", "-d", "100ms", "-warmup", "10ms", "-c", "1", "-modes", "proxy", "-json"}, &out, &errOut)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Batch []*batchResult `json:"batch"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Batch) != 2 || doc.Batch[0].Target != "proxy" || doc.Batch[1].Target != "single" {
		t.Fatalf("batch = %+v", doc.Batch)
	}
	for _, r := range doc.Batch {
		if r.N != 8 || r.Rounds != batchRounds || r.OneByOneMS <= 0 || r.PipelinedMS <= 0 || r.Speedup <= 0 {
			t.Errorf("batch line %+v", r)
		}
		if s := r.String(); !strings.HasPrefix(s, "batch ("+r.Target+"): 8 SET NX PX on one connection") {
			t.Errorf("batch line %q", s)
		}
	}

	var errs bytes.Buffer
	if code := run([]string{"-batch", "-1", "-modes", "proxy"}, &bytes.Buffer{}, &errs); code != 2 || !strings.Contains(errs.String(), "-batch must not be negative") {
		t.Errorf("-batch -1: exit %d, %q", code, errs.String())
	}
}

// TestProxySetUsage: -proxy-set takes key=value, and configures only a
// proxy that -spawn starts.
func TestProxySetUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-proxy-set", "procs=1", "-modes", "proxy"}, "needs -spawn"},
		{[]string{"-spawn", "3", "-proxy-set", "procs", "-modes", "proxy"}, "want key=value"},
		{[]string{"-spawn", "3", "-proxy-set", "=1", "-modes", "proxy"}, "want key=value"},
	} {
		var errs bytes.Buffer
		if code := run(tc.args, &bytes.Buffer{}, &errs); code != 2 || !strings.Contains(errs.String(), tc.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tc.args, code, errs.String(), tc.want)
		}
	}
}

// TestRatiosLegacy: a legacy-… row is compared with its own cycle on one
// backend (single-…), or with nothing when that did not run.
func TestRatiosLegacy(t *testing.T) {
	rep := &report{Keys: "distinct", Results: []result{
		{Mode: "single", Clients: 1, CyclesPerSec: 1000},
		{Mode: "legacy-set-get", Clients: 1, CyclesPerSec: 300},
		{Mode: "single-set-get", Clients: 1, CyclesPerSec: 3000},
		{Mode: "legacy-setnx-del", Clients: 1, CyclesPerSec: 300},
	}}
	rep.computeRatios()
	for i, want := range []string{"1.00x", "0.10x", "3.00x", "-"} {
		if got := fmtRatio(rep.Results[i].VsSingle); got != want {
			t.Errorf("%s: vs-single %s, want %s", rep.Results[i].Mode, got, want)
		}
	}
}
