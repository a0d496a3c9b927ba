package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// run parses args, runs the benchmark and returns the exit code: 0, 1 when
// setup failed or a run had more than 1% errors, 2 for bad usage, 130 when
// interrupted.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redlock-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var backends, proxySet listFlag
	clients := fs.String("c", "1", "client counts, comma separated (`1,16,64`); each mode runs at each")
	fs.DurationVar(&cfg.duration, "d", 5*time.Second, "measured `duration` per mode and client count")
	fs.IntVar(&cfg.cycles, "n", 0, "measure this many successful cycles per mode and client count instead of -d")
	fs.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up per run")
	keys := fs.String("keys", "distinct", "distinct (a key per client), contended (one key, held for the run by one more client: every attempt is refused, busy/s is the rate) or N (N keys round-robin: 1 is one key the clients take turns on)")
	fs.DurationVar(&cfg.ttl, "ttl", 10*time.Second, "lock ttl")
	modes := fs.String("modes", strings.Join(modeNames(), ","), "modes to run, comma separated")
	fs.IntVar(&cfg.spawn, "spawn", 0, "start N redis-server backends and a proxy in front of them; proxy rows then show the proxy's B/cycle, allocs and cpu/cycle")
	fs.IntVar(&cfg.idle, "idle", 0, "with -spawn: first hold N idle connections to the proxy and report its RSS per connection")
	fs.IntVar(&cfg.handoff, "handoff", 0, "first measure N lock hand-offs through the proxy, then across two proxies (-proxy2, or a second one -spawn starts): UNLOCK sent → a WAIT-ing client's grant")
	fs.IntVar(&cfg.batch, "batch", 0, "first time N SET NX PX on fresh keys sent on one connection one at a time against all at once (pipelined), through the proxy and on the first backend")
	var fp fillPlan
	fs.IntVar(&fp.data, "fill-data", 0, "with -spawn: first write N data keys (SET; every tenth an HSET) through a second proxy, and report the backends' load and the cycles' success beside the rows (fill.go); 0 with -fill-holds 0 is the baseline")
	fs.IntVar(&fp.holds, "fill-holds", 0, "with -spawn: first take N holds (SETNX, renewed by the tier) through a second proxy, as -fill-data")
	fs.IntVar(&fp.conns, "fill-c", 16, "connections the fill writes on")
	fs.IntVar(&fp.pipeline, "fill-pipeline", 1, "commands the fill sends per round trip on each connection (pipelined)")
	fs.DurationVar(&fp.quiet, "fill-quiet", 10*time.Second, "the backends' load at rest is read over this `duration` before and after the fill")
	fs.BoolVar(&fp.during, "fill-during", false, "keep rewriting the fill's data keys through the second proxy while the runs go on")
	fs.StringVar(&cfg.proxyBin, "proxy-bin", "", "with -spawn: run this redlock-proxy `binary` instead of building ./cmd/redlock-proxy")
	fs.Var(&proxySet, "proxy-set", "with -spawn: one more `key=value` of the spawned proxy's config file, in HCL (repeatable): procs=1, log_level=\"info\"")
	fs.StringVar(&cfg.proxyAddr, "proxy", "127.0.0.1:6380", "proxy `address` (without -spawn)")
	fs.StringVar(&cfg.proxy2Addr, "proxy2", "", "a second proxy's `address` over the same backends (without -spawn): -handoff also measures hand-offs from -proxy to it")
	fs.Var(&backends, "backend", "backend `address` (repeatable, without -spawn); redsync uses all, single the first")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON document instead of the table")
	fs.BoolVar(&cfg.progress, "progress", false, "live progress line on stderr even when it is not a terminal")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.args = args
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "fill-data" || f.Name == "fill-holds" {
			cfg.fill = &fp
		}
	})
	cfg.backends = backends
	for _, kv := range proxySet {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			fmt.Fprintf(stderr, "redlock-bench: -proxy-set %q: want key=value\n", kv)
			return 2
		}
		cfg.proxySet = append(cfg.proxySet, strings.TrimSpace(k)+" = "+strings.TrimSpace(v))
	}
	var err error
	if cfg.clients, err = parseClients(*clients); err == nil {
		if cfg.keys, err = parseKeys(*keys); err == nil {
			if cfg.modes, err = parseModes(*modes); err == nil {
				err = cfg.validate()
			}
		}
	}
	if err != nil || fs.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		fmt.Fprintln(stderr, "redlock-bench:", err)
		return 2
	}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && stderr == os.Stderr {
		cfg.progress = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench(ctx, cfg, stdout, stderr)
}

// parseClients reads "1,16,64".
func parseClients(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-c: %q is not a positive client count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseKeys reads "distinct", "contended" or a positive number of keys.
func parseKeys(s string) (keySpace, error) {
	switch s {
	case "distinct":
		return keySpace{distinct: true}, nil
	case "contended":
		return keySpace{held: true}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return keySpace{}, fmt.Errorf("-keys: want distinct, contended or a positive number, got %q", s)
	}
	return keySpace{n: n}, nil
}

// parseModes reads a comma list of mode names, keeping the given order.
func parseModes(s string) ([]*mode, error) {
	var out []*mode
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		name := strings.TrimSpace(f)
		m := modeByName(name)
		if m == nil {
			return nil, fmt.Errorf("-modes: unknown mode %q (want %s)", name, strings.Join(modeNames(), ", "))
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, m)
		}
	}
	return out, nil
}
