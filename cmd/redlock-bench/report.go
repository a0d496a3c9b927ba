package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// result is one row: one mode at one client count. Latencies are in
// microseconds; the ratios are nil when the reference row was not run.
type result struct {
	Mode      string  `json:"mode"`
	Clients   int     `json:"clients"`
	Keys      string  `json:"keys"`
	ElapsedMS float64 `json:"elapsed_ms"`
	Cycles    int64   `json:"cycles"`
	Busy      int64   `json:"busy"`
	Errors    int64   `json:"errors"`
	Attempts  int64   `json:"attempts"`
	// GaveUp counts clients that stopped after maxErrorStreak errors in a
	// row; any makes the run fail, as its rate covers a shorter time.
	GaveUp       int     `json:"gave_up,omitempty"`
	CyclesPerSec float64 `json:"cycles_per_sec"`
	BusyPerSec   float64 `json:"busy_per_sec"`
	P50US        float64 `json:"p50_us"`
	P99US        float64 `json:"p99_us"`
	P999US       float64 `json:"p999_us"`
	MaxUS        float64 `json:"max_us"`
	MeanUS       float64 `json:"mean_us"`
	AcquireP50US float64 `json:"acquire_p50_us"`
	AcquireP99US float64 `json:"acquire_p99_us"`
	// cycles/s of this row over the redsync / single row at the same
	// client count, and p50 over redsync's p50.
	VsRedsync    *float64     `json:"vs_redsync"`
	VsSingle     *float64     `json:"vs_single"`
	P50VsRedsync *float64     `json:"p50_vs_redsync"`
	ErrorKinds   []errorCount `json:"error_kinds,omitempty"`
	// What the proxy process spent per successful cycle in the measured
	// window (see metrics.go); nil unless the mode goes through a proxy
	// this tool spawned and both readings of its metrics succeeded.
	ProxyAllocBytesPerCycle *float64 `json:"proxy_alloc_bytes_per_cycle,omitempty"`
	ProxyAllocsPerCycle     *float64 `json:"proxy_allocs_per_cycle,omitempty"`
	ProxyCPUUSPerCycle      *float64 `json:"proxy_cpu_us_per_cycle,omitempty"`
	// What explains the figure, from /proc and the backends' INFO (see
	// procstat.go); nil unless the processes were spawned by this tool.
	// Per successful cycle, or per refused attempt with -keys contended.
	ProxyReadsPerCycle    *float64 `json:"proxy_read_syscalls_per_cycle,omitempty"`
	ProxyWritesPerCycle   *float64 `json:"proxy_write_syscalls_per_cycle,omitempty"`
	BackendReadsPerCycle  *float64 `json:"backend_read_syscalls_per_cycle,omitempty"`
	BackendWritesPerCycle *float64 `json:"backend_write_syscalls_per_cycle,omitempty"`
	// CommandsPerWrite is the backends' commands over the proxy's write
	// system calls (which also carry its replies to clients).
	CommandsPerWrite *float64 `json:"backend_commands_per_proxy_write,omitempty"`
	// BackendLoad is what the backends did per second over the window,
	// from INFO commandstats; only with -fill-data/-fill-holds (fill.go).
	BackendLoad *backendLoad `json:"backend_load,omitempty"`
}

// setProxyCost fills the proxy cost fields from the proxy's counters read
// at the start and the end of the measured window; it leaves them nil
// when there were no cycles.
func (r *result) setProxyCost(before, after proxyCounters) {
	c, ok := after.perCycle(before, r.Cycles)
	if !ok {
		return
	}
	r.ProxyAllocBytesPerCycle, r.ProxyAllocsPerCycle, r.ProxyCPUUSPerCycle = &c.allocBytes, &c.allocs, &c.cpuUS
}

// errorRate is the share of attempts that failed for a reason other than
// the key being held.
func (r result) errorRate() float64 {
	if r.Attempts == 0 {
		return 0
	}
	return float64(r.Errors) / float64(r.Attempts)
}

// maxErrorRate is the share of errors above which the run failed.
const maxErrorRate = 0.01

// report is the whole invocation: what ran where, and the rows.
type report struct {
	Command    string   `json:"command"`
	Go         string   `json:"go"`
	GOMAXPROCS int      `json:"gomaxprocs"`
	Spawned    bool     `json:"spawned"`
	Proxy      string   `json:"proxy,omitempty"`
	Backends   []string `json:"backends"`
	Redis      string   `json:"redis_version,omitempty"`
	Keys       string   `json:"keys"`
	TTLMS      int64    `json:"ttl_ms"`
	DurationMS int64    `json:"duration_ms,omitempty"`
	Cycles     int      `json:"cycles,omitempty"`
	Results    []result `json:"results"`
	// Idle is the -idle measurement; nil without -idle.
	Idle *idleResult `json:"idle,omitempty"`
	// Handoff is the -handoff measurement: on one proxy, then across two
	// when a second proxy is known; empty without -handoff.
	Handoff []*handoffResult `json:"handoff,omitempty"`
	// Batch is the -batch measurement: through the proxy, then on one
	// backend when one is known; empty without -batch.
	Batch []*batchResult `json:"batch,omitempty"`
	// Fill is the -fill-data/-fill-holds measurement; nil without them.
	Fill *fillResult `json:"fill,omitempty"`
}

func goVersion() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }
func gomaxprocs() int   { return runtime.GOMAXPROCS(0) }

// computeRatios fills the ratio fields from the redsync and single rows of
// the same client count; a legacy-… row's single row is its own cycle's
// on one backend (single-…), when it ran.
func (rep *report) computeRatios() {
	find := func(mode string, clients int) *result {
		for i := range rep.Results {
			if r := &rep.Results[i]; r.Mode == mode && r.Clients == clients {
				return r
			}
		}
		return nil
	}
	ratio := func(a, b float64) *float64 {
		if b == 0 {
			return nil
		}
		q := a / b
		return &q
	}
	// With -keys contended every attempt is refused: the rate compared
	// is that of the refusals.
	rate := func(r *result) float64 {
		if rep.Keys == "contended" {
			return r.BusyPerSec
		}
		return r.CyclesPerSec
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		r.VsRedsync, r.VsSingle, r.P50VsRedsync = nil, nil, nil
		if rs := find("redsync", r.Clients); rs != nil {
			r.VsRedsync = ratio(rate(r), rate(rs))
			r.P50VsRedsync = ratio(r.P50US, rs.P50US)
		}
		single := find("single", r.Clients)
		if rest, ok := strings.CutPrefix(r.Mode, "legacy-"); ok {
			single = find("single-"+rest, r.Clients)
		}
		if s := single; s != nil {
			r.VsSingle = ratio(rate(r), rate(s))
		}
	}
}

// header is the line above the table: command, runtime, targets, workload.
func (rep *report) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s | %s GOMAXPROCS=%d | ", rep.Command, rep.Go, rep.GOMAXPROCS)
	origin := "given"
	if rep.Spawned {
		origin = "spawned"
	}
	redis := "redis"
	if rep.Redis != "" {
		redis = "redis " + rep.Redis
	}
	if len(rep.Backends) > 0 {
		fmt.Fprintf(&b, "backends: %d× %s (%s) %s | ", len(rep.Backends), redis, origin, strings.Join(rep.Backends, ","))
	}
	if rep.Proxy != "" {
		fmt.Fprintf(&b, "proxy %s (%s) | ", rep.Proxy, origin)
	}
	fmt.Fprintf(&b, "ttl %v, keys %s, ", time.Duration(rep.TTLMS)*time.Millisecond, rep.Keys)
	if rep.Cycles > 0 {
		fmt.Fprintf(&b, "%d cycles per run", rep.Cycles)
	} else {
		fmt.Fprintf(&b, "%v per run", time.Duration(rep.DurationMS)*time.Millisecond)
	}
	return b.String()
}

var tableColumns = []string{"mode", "clients", "cycles/s", "busy/s", "p50", "p99", "p99.9", "acq-p50", "vs-redsync", "vs-single", "p50/redsync",
	"B/cycle", "allocs", "cpu/cycle", "p-wr", "p-rd", "b-wr", "b-rd", "cmd/wr"}

// writeTable prints the header and one aligned row per result: the mode
// left-aligned, the numbers right-aligned.
func (rep *report) writeTable(w io.Writer) error {
	rows := [][]string{tableColumns}
	for _, r := range rep.Results {
		rows = append(rows, []string{
			r.Mode, strconv.Itoa(r.Clients), fmtRate(r.CyclesPerSec), fmtRate(r.BusyPerSec),
			fmtMicros(r.P50US, r.Cycles), fmtMicros(r.P99US, r.Cycles), fmtMicros(r.P999US, r.Cycles),
			fmtMicros(r.AcquireP50US, r.Cycles),
			fmtRatio(r.VsRedsync), fmtRatio(r.VsSingle), fmtRatio(r.P50VsRedsync),
			fmtCount(r.ProxyAllocBytesPerCycle), fmtCount(r.ProxyAllocsPerCycle), fmtCPU(r.ProxyCPUUSPerCycle),
			fmtPer(r.ProxyWritesPerCycle), fmtPer(r.ProxyReadsPerCycle),
			fmtPer(r.BackendWritesPerCycle), fmtPer(r.BackendReadsPerCycle), fmtPer(r.CommandsPerWrite),
		})
	}
	width := make([]int, len(tableColumns))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	b.WriteString(rep.header())
	b.WriteByte('\n')
	for _, row := range rows {
		for i, cell := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			switch i {
			case 0:
				b.WriteString(cell + pad)
			default:
				b.WriteString("  " + pad + cell)
			}
		}
		b.WriteByte('\n')
	}
	if rep.Idle != nil {
		fmt.Fprintln(&b, rep.Idle)
	}
	for _, h := range rep.Handoff {
		fmt.Fprintln(&b, h)
	}
	for _, r := range rep.Batch {
		fmt.Fprintln(&b, r)
	}
	if rep.Fill != nil {
		for _, l := range rep.Fill.lines() {
			fmt.Fprintln(&b, l)
		}
		for _, r := range rep.Results {
			fmt.Fprintln(&b, r.loadLine())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeJSON prints the report as one indented JSON document.
func (rep *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeErrors lists every row's errors; it reports whether any row failed
// (more than maxErrorRate of its attempts).
func (rep *report) writeErrors(w io.Writer) bool {
	failed := false
	for _, r := range rep.Results {
		if r.Errors == 0 && r.GaveUp == 0 {
			continue
		}
		verdict := "below the 1% limit"
		switch {
		case r.GaveUp > 0:
			verdict = fmt.Sprintf("FAILED: %d of %d clients gave up after %d errors in a row", r.GaveUp, r.Clients, maxErrorStreak)
			failed = true
		case r.errorRate() > maxErrorRate:
			verdict = "FAILED: above the 1% limit"
			failed = true
		}
		fmt.Fprintf(w, "redlock-bench: %s c=%d: %d errors in %d attempts (%.2f%%, %s):\n",
			r.Mode, r.Clients, r.Errors, r.Attempts, 100*r.errorRate(), verdict)
		for _, e := range r.ErrorKinds {
			fmt.Fprintf(w, "  %8d  %s\n", e.Count, e.Error)
		}
	}
	if rep.Fill != nil {
		for _, r := range rep.Results {
			if r.success() < minSuccess {
				fmt.Fprintf(w, "redlock-bench: %s c=%d: FAILED: %s of the lock cycles succeeded, want 99.9%%\n", r.Mode, r.Clients, fmtSuccess(r.success()))
				failed = true
			}
		}
		if why := rep.Fill.failed(); why != "" {
			fmt.Fprintln(w, "redlock-bench: fill FAILED:", why)
			failed = true
		}
	}
	return failed
}

// fmtRate prints a per-second rate with thousands kept readable.
func fmtRate(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// fmtMicros prints a latency with a unit and three significant digits; "-"
// when there were no samples.
func fmtMicros(us float64, samples int64) string {
	switch {
	case samples == 0:
		return "-"
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 0, 64) + "µs"
	case us < 10_000:
		return strconv.FormatFloat(us/1000, 'f', 2, 64) + "ms"
	case us < 100_000:
		return strconv.FormatFloat(us/1000, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(us/1000, 'f', 0, 64) + "ms"
}

// fmtRatio prints "2.31x", or "-" when there is no reference row.
func fmtRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r, 'f', 2, 64) + "x"
}

// fmtCount prints a per-cycle count (bytes or allocations): one decimal
// below 100, whole numbers above; "-" when absent.
func fmtCount(v *float64) string {
	switch {
	case v == nil:
		return "-"
	case *v < 100:
		return strconv.FormatFloat(*v, 'f', 1, 64)
	}
	return strconv.FormatFloat(*v, 'f', 0, 64)
}

// fmtPer prints a per-cycle count with two decimals; "-" when absent.
func fmtPer(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

// fmtCPU prints CPU time per cycle like a latency; "-" when absent.
func fmtCPU(us *float64) string {
	if us == nil {
		return "-"
	}
	return fmtMicros(*us, 1)
}

// commandLine is the invocation as a shell would accept it back.
func commandLine(args []string) string {
	parts := []string{"redlock-bench"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// progress shows one run's state on stderr: a line rewritten with \r once
// a second on a terminal (or with -progress), otherwise a plain line when
// the run ends, so CI logs stay readable.
type progress struct {
	live     bool
	w        io.Writer
	label    string
	duration time.Duration
	cycles   int

	mu     sync.Mutex
	name   string
	t0     *time.Time
	done   *atomic.Int64
	ticker *time.Ticker
	quit   chan struct{}
	wg     sync.WaitGroup
	width  int
}

func newProgress(live bool, w io.Writer, mode string, clients int, d time.Duration, cycles int) *progress {
	p := &progress{live: live, w: w, label: fmt.Sprintf("%s c=%d", mode, clients), duration: d, cycles: cycles}
	if live {
		p.ticker = time.NewTicker(time.Second)
		p.quit = make(chan struct{})
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case <-p.quit:
					return
				case <-p.ticker.C:
					p.draw()
				}
			}
		}()
	}
	return p
}

// phase switches to a new phase; t0 is the measured phase's start.
func (p *progress) phase(name string, t0 *time.Time, done *atomic.Int64) {
	p.mu.Lock()
	p.name, p.t0, p.done = name, t0, done
	p.mu.Unlock()
	if p.live {
		p.draw()
	}
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := p.label + " " + p.name
	if p.t0 != nil {
		total := p.duration.Round(time.Millisecond).String()
		if p.cycles > 0 {
			total = strconv.Itoa(p.cycles) + " cycles"
		}
		line += fmt.Sprintf(" %.1fs / %s: %d cycles", time.Since(*p.t0).Seconds(), total, p.done.Load())
	}
	pad := max(p.width-len(line), 0)
	p.width = len(line)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
}

// stop ends the live line, erasing it.
func (p *progress) stop() {
	if !p.live {
		return
	}
	p.ticker.Stop()
	close(p.quit)
	p.wg.Wait()
	p.mu.Lock()
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
	p.mu.Unlock()
}

// finished prints the plain one-line summary when the live line is off.
func (p *progress) finished(r result) {
	if p.live {
		return
	}
	fmt.Fprintf(p.w, "redlock-bench: %s: %d cycles, %d busy, %d errors in %.2fs\n",
		p.label, r.Cycles, r.Busy, r.Errors, r.ElapsedMS/1000)
}
