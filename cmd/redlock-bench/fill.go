package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/redlock/record"
)

// The fill (-fill-data N -fill-holds M, with -spawn): what data and holds
// written through a second proxy (proxy2) over the same backends cost the
// lock cycles run through the first. The steps and what each reading
// means are in docs/benchmarks.md; -fill-data 0 -fill-holds 0 is the
// baseline: the same second proxy, the same readings, nothing written.

// fillPlan is what the -fill-… flags ask for; nil without them.
type fillPlan struct {
	data, holds int
	conns       int           // -fill-c
	pipeline    int           // -fill-pipeline: commands per round trip
	quiet       time.Duration // -fill-quiet
	during      bool          // -fill-during
}

const (
	fillWatchEvery = 250 * time.Millisecond // INFO backends poll
	fillSample     = 1000                   // keys of each kind read back
	minSuccess     = 0.999                  // lock cycles that must succeed
)

// fillItem says what the i-th of total writes is: the idx-th hold or the
// idx-th data key. Holds are spread evenly among the data keys.
func fillItem(i, total, holds int) (hold bool, idx int) {
	before := i * holds / total
	if (i+1)*holds/total > before {
		return true, before
	}
	return false, i - before
}

func fillHoldKey(j int) string   { return "fill:hold:" + strconv.Itoa(j) }
func fillHoldValue(j int) string { return "hold-" + strconv.Itoa(j) }

// fillIsHash: every tenth data key is a hash.
func fillIsHash(j int) bool { return j%10 == 9 }

func fillDataKey(j int) string {
	if fillIsHash(j) {
		return "fill:hash:" + strconv.Itoa(j)
	}
	return "fill:data:" + strconv.Itoa(j)
}

// fillResult is the fill's part of the report.
type fillResult struct {
	Data        int          `json:"data"`
	Holds       int          `json:"holds"`
	Conns       int          `json:"conns"`
	Pipeline    int          `json:"pipeline"`
	Written     int64        `json:"written"` // data writes acknowledged
	Held        int64        `json:"held"`    // SETNX answered 1
	FillMS      float64      `json:"fill_ms"`
	Errors      int64        `json:"errors"`
	ErrorKinds  []errorCount `json:"error_kinds,omitempty"`
	RecordMin   int64        `json:"holds_record_min"` // HLEN of the holds record, fewest and most over the backends
	RecordMax   int64        `json:"holds_record_max"`
	QuietBefore *backendLoad `json:"quiet_before,omitempty"`
	QuietAfter  *backendLoad `json:"quiet_after,omitempty"`
	// During the runs, with -fill-during.
	During       bool  `json:"during"`
	DuringWrites int64 `json:"during_writes,omitempty"`
	DuringErrors int64 `json:"during_errors,omitempty"`
	// From the fill's start to the runs' end, on both proxies.
	Quorum    int      `json:"quorum"`
	MinVoting int      `json:"min_voting"`
	NotVoting []string `json:"not_voting,omitempty"` // first sightings, "proxy2 backend1:addr=…,state=down,…"
	NoQuorum  int64    `json:"lock_noquorum"`        // INFO locks lock_noquorum, both proxies
	// Read back through the first proxy after the runs.
	// A sampled hold reads its value (kept), nothing (gone) or another
	// value (other); a data key reads (kept) or not (gone); a read that
	// failed three times is a read error, of either kind.
	HoldsSampled int `json:"holds_sampled"`
	HoldsKept    int `json:"holds_kept"`
	HoldsGone    int `json:"holds_gone"`
	HoldsOther   int `json:"holds_other"`
	DataSampled  int `json:"data_sampled"`
	DataKept     int `json:"data_kept"`
	DataGone     int `json:"data_gone"`
	ReadErrors   int `json:"read_errors"`
}

// parseBackendsInfo reads a proxy's INFO backends: voting, quorum, and
// the backend lines whose state is not "up".
func parseBackendsInfo(info string) (voting, quorum int, notUp []string, err error) {
	seen := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		switch {
		case !ok:
		case k == "voting" || k == "quorum":
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, 0, nil, fmt.Errorf("INFO backends %s: %w", k, err)
			}
			if k == "voting" {
				voting = n
			} else {
				quorum = n
			}
			seen++
		case strings.HasPrefix(k, "backend") && k != "backends" && !strings.Contains(v, ",state=up"):
			notUp = append(notUp, strings.TrimSpace(line))
		}
	}
	if seen != 2 {
		return 0, 0, nil, errors.New("INFO backends: no voting and quorum lines")
	}
	return voting, quorum, notUp, nil
}

// fill is a fill in progress: the watcher and, with -fill-during, the
// writers run until finish.
type fill struct {
	plan    fillPlan
	t       targets
	res     *fillResult
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex // res.MinVoting, res.NotVoting
	noq0    int64
	writes  atomic.Int64
	writeEr atomic.Int64
	// unacked marks the data keys and holds whose fill write failed: the
	// read-back skips them. Each index is written by one goroutine.
	unackedData, unackedHold []bool
}

// startFill measures the tier at rest, writes the fill through t.proxy2,
// measures again, and leaves the watcher (and the -fill-during writers)
// running for the runs.
func startFill(ctx context.Context, plan fillPlan, t targets, stderr io.Writer) (*fill, error) {
	f := &fill{plan: plan, t: t, stop: make(chan struct{}),
		res: &fillResult{Data: plan.data, Holds: plan.holds, Conns: plan.conns, Pipeline: plan.pipeline, During: plan.during, MinVoting: len(t.backends)}}
	var err error
	if f.res.QuietBefore, err = measureQuiet(ctx, t.backends, plan.quiet); err != nil {
		return nil, err
	}
	if f.noq0, err = f.noQuorum(ctx); err != nil {
		return nil, err
	}
	f.wg.Add(1)
	go f.watch(ctx)
	if err := f.write(ctx); err != nil {
		f.finish(ctx)
		return nil, err
	}
	fmt.Fprintf(stderr, "redlock-bench: fill: %d written, %d held, %d errors in %.1fs\n", f.res.Written, f.res.Held, f.res.Errors, f.res.FillMS/1000)
	for i, addr := range t.backends {
		c := newClient(addr)
		n, err := c.HLen(ctx, record.Key("redlock")).Result()
		_ = c.Close()
		if err != nil {
			f.finish(ctx)
			return nil, fmt.Errorf("HLEN of the holds record on %s: %w", addr, err)
		}
		if i == 0 || n < f.res.RecordMin {
			f.res.RecordMin = n
		}
		f.res.RecordMax = max(f.res.RecordMax, n)
	}
	if f.res.QuietAfter, err = measureQuiet(ctx, t.backends, plan.quiet); err != nil {
		f.finish(ctx)
		return nil, err
	}
	if plan.during && plan.data > 0 {
		for c := range plan.conns {
			f.wg.Add(1)
			go f.rewrite(ctx, c)
		}
	}
	return f, nil
}

// write sends the plan's writes through proxy2 over plan.conns
// connections, plan.pipeline commands per round trip.
func (f *fill) write(ctx context.Context) error {
	total := f.plan.data + f.plan.holds
	f.unackedData, f.unackedHold = make([]bool, f.plan.data), make([]bool, f.plan.holds)
	var next atomic.Int64
	var written, held atomic.Int64
	tallies := make([]errorTally, f.plan.conns)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range f.plan.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(f.t.proxy2)
			defer c.Close()
			for ctx.Err() == nil {
				from := int(next.Add(int64(f.plan.pipeline))) - f.plan.pipeline
				if from >= total {
					return
				}
				pipe := c.Pipeline()
				holds := make([]bool, 0, f.plan.pipeline)
				idx := make([]int, 0, f.plan.pipeline)
				for i := from; i < min(from+f.plan.pipeline, total); i++ {
					hold, j := fillItem(i, total, f.plan.holds)
					holds, idx = append(holds, hold), append(idx, j)
					switch {
					case hold:
						pipe.Do(ctx, "SETNX", fillHoldKey(j), fillHoldValue(j))
					case fillIsHash(j):
						pipe.Do(ctx, "HSET", fillDataKey(j), "f1", "v"+strconv.Itoa(j), "f2", "w")
					default:
						pipe.Do(ctx, "SET", fillDataKey(j), "v"+strconv.Itoa(j))
					}
				}
				cmds, _ := pipe.Exec(ctx)
				for i, cmd := range cmds {
					v, err := cmd.(*redis.Cmd).Result()
					switch {
					case err != nil:
						tallies[w].add(err.Error(), 1)
					case holds[i] && v == int64(1):
						held.Add(1)
						continue
					case holds[i]:
						tallies[w].add(fmt.Sprintf("SETNX replied %v", v), 1)
					default:
						written.Add(1)
						continue
					}
					if holds[i] {
						f.unackedHold[idx[i]] = true
					} else {
						f.unackedData[idx[i]] = true
					}
				}
			}
		}()
	}
	wg.Wait()
	f.res.FillMS = float64(time.Since(t0).Microseconds()) / 1000
	var errs errorTally
	for _, t := range tallies {
		errs.merge(t)
	}
	f.res.Written, f.res.Held = written.Load(), held.Load()
	f.res.Errors, f.res.ErrorKinds = errs.total, errs.sorted()
	return ctx.Err()
}

// rewrite keeps overwriting the string data keys through proxy2 until
// finish (-fill-during); connection c starts at its own offset.
func (f *fill) rewrite(ctx context.Context, c int) {
	defer f.wg.Done()
	cl := newClient(f.t.proxy2)
	defer cl.Close()
	j := c * f.plan.data / f.plan.conns
	for round := 1; ; round++ {
		select {
		case <-f.stop:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
		pipe := cl.Pipeline()
		for range f.plan.pipeline {
			j = (j + 1) % f.plan.data
			if !fillIsHash(j) {
				pipe.Set(ctx, fillDataKey(j), "v"+strconv.Itoa(j)+"."+strconv.Itoa(round), 0)
			}
		}
		cmds, _ := pipe.Exec(ctx)
		for _, cmd := range cmds {
			if cmd.Err() != nil {
				f.writeEr.Add(1)
			} else {
				f.writes.Add(1)
			}
		}
	}
}

// watch polls INFO backends of both proxies until finish.
func (f *fill) watch(ctx context.Context) {
	defer f.wg.Done()
	proxies := [][2]string{{"proxy", f.t.proxy}, {"proxy2", f.t.proxy2}}
	clients := make([]*redis.Client, len(proxies))
	for i, p := range proxies {
		clients[i] = newClient(p[1])
		defer clients[i].Close()
	}
	seen := map[string]bool{}
	tick := time.NewTicker(fillWatchEvery)
	defer tick.Stop()
	for {
		for i, c := range clients {
			info, err := c.Info(ctx, "backends").Result()
			if err != nil {
				continue // the runs count what fails; this only watches
			}
			voting, quorum, notUp, err := parseBackendsInfo(info)
			if err != nil {
				continue
			}
			f.mu.Lock()
			f.res.Quorum = quorum
			f.res.MinVoting = min(f.res.MinVoting, voting)
			for _, line := range notUp {
				// One sighting per backend and state, reasons aside.
				key := proxies[i][0] + " " + line
				if k, _, ok := strings.Cut(key, ",reason="); ok {
					key = k
				}
				if !seen[key] && len(f.res.NotVoting) < 20 {
					seen[key] = true
					f.res.NotVoting = append(f.res.NotVoting, time.Now().Format("15:04:05.000")+" "+proxies[i][0]+" "+line)
				}
			}
			f.mu.Unlock()
		}
		select {
		case <-f.stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// noQuorum sums lock_noquorum of INFO locks over both proxies.
func (f *fill) noQuorum(ctx context.Context) (int64, error) {
	var sum int64
	for _, addr := range []string{f.t.proxy, f.t.proxy2} {
		c := newClient(addr)
		info, err := c.Info(ctx, "locks").Result()
		_ = c.Close()
		if err != nil {
			return 0, fmt.Errorf("INFO locks on %s: %w", addr, err)
		}
		n, err := parseInfoField(info, "lock_noquorum")
		if err != nil {
			return 0, fmt.Errorf("INFO locks on %s: %w", addr, err)
		}
		sum += int64(n)
	}
	return sum, nil
}

// finish stops the watcher and writers, and reads back through the first
// proxy an evenly spread sample of the holds and data keys whose write
// was acknowledged.
func (f *fill) finish(ctx context.Context) *fillResult {
	close(f.stop)
	f.wg.Wait()
	f.res.DuringWrites, f.res.DuringErrors = f.writes.Load(), f.writeEr.Load()
	if n, err := f.noQuorum(ctx); err == nil {
		f.res.NoQuorum = n - f.noq0
	}
	if f.unackedData == nil {
		return f.res // the fill did not run
	}
	c := newClient(f.t.proxy)
	defer c.Close()
	for k := range min(fillSample, f.plan.holds) {
		j := k * f.plan.holds / min(fillSample, f.plan.holds)
		if f.unackedHold[j] {
			continue
		}
		f.res.HoldsSampled++
		v, err := readBack(ctx, func() (string, error) { return c.Get(ctx, fillHoldKey(j)).Result() })
		switch {
		case err == nil && v == fillHoldValue(j):
			f.res.HoldsKept++
		case errors.Is(err, redis.Nil):
			f.res.HoldsGone++
		case err == nil:
			f.res.HoldsOther++
		default:
			f.res.ReadErrors++
		}
	}
	for k := range min(fillSample, f.plan.data) {
		j := k * f.plan.data / min(fillSample, f.plan.data)
		if f.unackedData[j] {
			continue
		}
		f.res.DataSampled++
		_, err := readBack(ctx, func() (string, error) {
			if fillIsHash(j) {
				return c.HGet(ctx, fillDataKey(j), "f1").Result()
			}
			return c.Get(ctx, fillDataKey(j)).Result()
		})
		switch {
		case err == nil:
			f.res.DataKept++
		case errors.Is(err, redis.Nil):
			f.res.DataGone++
		default:
			f.res.ReadErrors++
		}
	}
	return f.res
}

// readBack runs read, again up to twice after a pause when it fails
// (NOQUORUM while the tier is loaded), not when the key is missing.
func readBack(ctx context.Context, read func() (string, error)) (string, error) {
	v, err := read()
	for try := 0; try < 2 && err != nil && !errors.Is(err, redis.Nil) && ctx.Err() == nil; try++ {
		time.Sleep(200 * time.Millisecond)
		v, err = read()
	}
	return v, err
}

// failed says what of the fill failed, "" when nothing did.
func (r *fillResult) failed() string {
	var why []string
	if r.Errors > 0 {
		why = append(why, fmt.Sprintf("%d fill writes failed", r.Errors))
	}
	if r.DuringErrors > 0 {
		why = append(why, fmt.Sprintf("%d rewrites during the runs failed", r.DuringErrors))
	}
	if r.Quorum > 0 && r.MinVoting < r.Quorum {
		why = append(why, fmt.Sprintf("only %d backends voted at one point, quorum %d", r.MinVoting, r.Quorum))
	}
	if r.HoldsKept < r.HoldsSampled || r.DataKept < r.DataSampled {
		why = append(why, fmt.Sprintf("of the acknowledged writes read back %d/%d holds still held (%d gone, %d another value) and %d/%d data keys (%d gone), %d reads failed",
			r.HoldsKept, r.HoldsSampled, r.HoldsGone, r.HoldsOther, r.DataKept, r.DataSampled, r.DataGone, r.ReadErrors))
	}
	return strings.Join(why, "; ")
}

// lines are the fill's lines below the table.
func (r *fillResult) lines() []string {
	var out []string
	if r.Data+r.Holds == 0 {
		out = append(out, "fill: none (baseline); a second proxy runs over the same backends")
	} else {
		secs := r.FillMS / 1000
		out = append(out, fmt.Sprintf("fill: %d data keys (%d hashes) and %d holds (SETNX) through proxy2 on %d connections, %d per round trip, in %.1fs (%s writes/s): %d written, %d held, %d errors; holds record %d–%d fields per backend",
			r.Data, r.Data/10, r.Holds, r.Conns, r.Pipeline, secs, fmtRate(float64(r.Data+r.Holds)/secs), r.Written, r.Held, r.Errors, r.RecordMin, r.RecordMax))
		for _, e := range r.ErrorKinds {
			out = append(out, fmt.Sprintf("  %8d  %s", e.Count, e.Error))
		}
	}
	if r.QuietBefore != nil && r.QuietAfter != nil {
		out = append(out, "fill: backends at rest (all together): before the fill "+r.QuietBefore.String()+"; after it "+r.QuietAfter.String())
	}
	if r.During {
		out = append(out, fmt.Sprintf("fill: during the runs proxy2 rewrote data keys: %d writes, %d errors", r.DuringWrites, r.DuringErrors))
	}
	out = append(out, fmt.Sprintf("fill: from the fill to the end of the runs: fewest backends voting %d (quorum %d), lock_noquorum +%d; read back through proxy, of the acknowledged: %d/%d holds still held (%d gone, %d another value), %d/%d data keys (%d gone), %d reads failed",
		r.MinVoting, r.Quorum, r.NoQuorum, r.HoldsKept, r.HoldsSampled, r.HoldsGone, r.HoldsOther, r.DataKept, r.DataSampled, r.DataGone, r.ReadErrors))
	for _, s := range r.NotVoting {
		out = append(out, "  not voting: "+s)
	}
	return out
}

// loadLine is a row's line in a fill report: the cycles' success and
// the backends' load over its window.
func (r *result) loadLine() string {
	s := fmt.Sprintf("load %s c=%d: %s success (%d errors in %d cycles tried)",
		r.Mode, r.Clients, fmtSuccess(r.success()), r.Errors, r.Cycles+r.Errors)
	if r.BackendLoad != nil {
		s += ", backends " + r.BackendLoad.String()
	}
	return s
}

// success is the share of tried cycles (refused acquires aside) that
// succeeded; 1 when none were tried.
func (r *result) success() float64 {
	if n := r.Cycles + r.Errors; n > 0 {
		return float64(r.Cycles) / float64(n)
	}
	return 1
}

func fmtSuccess(s float64) string {
	v := strconv.FormatFloat(100*s, 'f', 3, 64) + "%"
	if s < minSuccess {
		v += " (BELOW 99.9%)"
	}
	return v
}
