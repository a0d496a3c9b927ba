package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the backends do per second over a window, from INFO commandstats
// read on every backend before and after it (the fill's readings at rest
// and per row: fill.go). commandstats counts the commands a script runs
// (redis.call) as well as the EVALSHA that runs it, and the time spent.

// backendLoad is what the backends did per second over a window, summed
// over all of them, from INFO commandstats.
type backendLoad struct {
	CommandsPerSec  float64 `json:"commands_per_sec"`
	BusyMSPerSec    float64 `json:"busy_ms_per_sec"` // time in commands
	EvalshaPerSec   float64 `json:"evalsha_per_sec"`
	EvalshaMSPerSec float64 `json:"evalsha_ms_per_sec"`
	// Top are the most called commands, most first (at most 3).
	Top []commandRate `json:"top"`
}

// commandRate is one command's calls per second.
type commandRate struct {
	Command string  `json:"command"`
	PerSec  float64 `json:"per_sec"`
}

func (l *backendLoad) String() string {
	top := make([]string, len(l.Top))
	for i, c := range l.Top {
		top[i] = c.Command + " " + fmtRate(c.PerSec)
	}
	return fmt.Sprintf("%s cmd/s (%s), %.0f ms/s in commands, evalsha %s/s taking %.0f ms/s",
		fmtRate(l.CommandsPerSec), strings.Join(top, ", "), l.BusyMSPerSec, fmtRate(l.EvalshaPerSec), l.EvalshaMSPerSec)
}

// cmdStat is one command's calls and time (µs) in INFO commandstats.
type cmdStat struct{ calls, usec uint64 }

// parseCommandStats reads INFO commandstats:
// "cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,…".
func parseCommandStats(info string) (map[string]cmdStat, error) {
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var s cmdStat
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			var err error
			switch k {
			case "calls":
				s.calls, err = strconv.ParseUint(v, 10, 64)
			case "usec":
				s.usec, err = strconv.ParseUint(v, 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("commandstats %s: %s: %w", name, k, err)
			}
		}
		out[name] = s
	}
	return out, nil
}

// commandSample is the commandstats of every backend, summed, and when.
type commandSample struct {
	at    time.Time
	stats map[string]cmdStat
}

func sampleCommands(ctx context.Context, backends []string) (commandSample, error) {
	s := commandSample{stats: map[string]cmdStat{}}
	for _, addr := range backends {
		c := newClient(addr)
		info, err := c.Info(ctx, "commandstats").Result()
		_ = c.Close()
		if err != nil {
			return s, fmt.Errorf("INFO commandstats on %s: %w", addr, err)
		}
		m, err := parseCommandStats(info)
		if err != nil {
			return s, fmt.Errorf("%s: %w", addr, err)
		}
		for k, v := range m {
			t := s.stats[k]
			s.stats[k] = cmdStat{t.calls + v.calls, t.usec + v.usec}
		}
	}
	s.at = time.Now()
	return s, nil
}

// loadSince is the load from before to after, per second.
func (after commandSample) loadSince(before commandSample) *backendLoad {
	secs := after.at.Sub(before.at).Seconds()
	if secs <= 0 {
		return nil
	}
	var calls, usec uint64
	var rates []commandRate
	for k, a := range after.stats {
		b := before.stats[k] // a command first seen in the window: zero
		calls += a.calls - b.calls
		usec += a.usec - b.usec
		if a.calls > b.calls {
			rates = append(rates, commandRate{k, float64(a.calls-b.calls) / secs})
		}
	}
	slices.SortFunc(rates, func(x, y commandRate) int {
		return cmp.Or(cmp.Compare(y.PerSec, x.PerSec), cmp.Compare(x.Command, y.Command))
	})
	ev, evb := after.stats["evalsha"], before.stats["evalsha"]
	return &backendLoad{
		CommandsPerSec:  float64(calls) / secs,
		BusyMSPerSec:    float64(usec) / 1000 / secs,
		EvalshaPerSec:   float64(ev.calls-evb.calls) / secs,
		EvalshaMSPerSec: float64(ev.usec-evb.usec) / 1000 / secs,
		Top:             rates[:min(3, len(rates))],
	}
}

// measureQuiet reads the backends' load over d with nothing else running.
func measureQuiet(ctx context.Context, backends []string, d time.Duration) (*backendLoad, error) {
	before, err := sampleCommands(ctx, backends)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	after, err := sampleCommands(ctx, backends)
	if err != nil {
		return nil, err
	}
	return after.loadSince(before), nil
}
