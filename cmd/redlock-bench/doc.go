// Command redlock-bench measures lock workloads, in the spirit of
// redis-benchmark: how many acquire+release cycles per second, and at what
// latency, the same workload achieves through five paths, run one after
// another in one invocation so the table compares like with like.
//
//	proxy        LOCK key ttl / UNLOCK key token through redlock-proxy
//	proxy-setnx  SET key value PX ttl NX / EVALSHA <compare-and-delete> 1 key value
//	             through the proxy (the dialect existing lock libraries speak)
//	proxy-mux    the proxy-setnx cycle from every client over ONE shared
//	             connection (rueidis, pipelined), as StackExchange.Redis,
//	             rueidis and Lettuce send a whole process's commands
//	redsync      client-side Redlock (go-redsync v4) over the same backends
//	single       SET NX PX plus the same compare-and-delete on one backend:
//	             the fast, non-fault-tolerant baseline
//	legacy-…     the cycles of lock code written for one Redis, without a
//	             script, through the proxy: setnx-del (SETNX / DEL),
//	             set-nx-del (SET NX / DEL), set-nx-px-del (SET NX PX / DEL),
//	             set-get (SET / GET)
//	single-…     the same cycles on one backend: each legacy-… row's
//	             vs-single compares it with its own single-… row
//
// A client is one goroutine. Except in proxy-mux it has its own
// connections: one go-redis client with PoolSize 1 for proxy, proxy-setnx
// and single; for redsync, a redsync instance of its own over one
// PoolSize-1 go-redis client per backend, so every goroutine holds exactly
// one connection to each server it talks to and no client waits for
// another's connection.
//
// A cycle is acquire then release; its latency is the cycle's wall time.
// Every successful cycle's latency is kept (per client, merged and sorted
// at the end), so the percentiles are exact. A refused acquire (the key is
// held: a null reply, or redsync's "taken") is counted as busy, not as a
// cycle; anything else that goes wrong is an error, and more than 1% errors
// in any run makes the command exit 1. A client that meets 50 errors in a
// row stops (a dead server would otherwise make it spin), which also fails
// the run.
//
// -keys says which key a cycle locks: distinct (a key per client), N (N
// keys the clients take round-robin; 1 is one key they take turns on), or
// contended: one key that one more client of the mode takes before the
// warm-up and holds until the run ends, so that every attempt of the
// clients is refused and busy/s is the rate of contended acquisitions
// (the vs-redsync and vs-single ratios then compare busy/s). -keys
// contended needs -d (not -n) and a -ttl longer than -warmup + -d + 1 s.
//
// With -spawn N it starts N redis-server processes on free loopback ports
// and a redlock-proxy built from this module (or -proxy-bin) in front of
// them, and kills them all on exit or interrupt. -proxy-set key=value
// (repeatable) adds a line to that proxy's config file (-proxy-set
// procs=1). Without -spawn, -proxy and -backend name running servers;
// the benchmark writes keys under "bench:".
//
// With -spawn every row also reads, just before and just after its
// window, the proxy's Prometheus metrics (metrics_listen on a free
// loopback port), /proc/PID/stat and /proc/PID/io of the proxy and the
// redis-servers, and the backends' INFO stats, and shows per cycle (per
// refused attempt with -keys contended) B/cycle, allocs and cpu/cycle for
// the proxy rows, and p-wr, p-rd, b-wr, b-rd and cmd/wr for every row;
// docs/benchmarks.md says what each column counts and its -json field.
// A column that could not be read shows "-" and is left out of -json.
//
// Before the timed runs, and printed below the table (in -json as
// "idle", "handoff" and "batch"): -idle N (with -spawn) measures what an
// idle connection costs the proxy in resident memory, over N connections
// (idle.go; the open-files limit and max_clients are raised to fit);
// -handoff N times N lock hand-offs to a waiter, on one proxy and across
// two (-proxy2, or a second proxy -spawn starts: handoff.go); -batch N
// compares N SET NX PX written one at a time and all at once, on the
// proxy and on the first backend (batch.go).
//
// With -fill-data N and/or -fill-holds M (and -spawn) it measures what
// data and holds written through a second proxy over the same backends
// cost the lock cycles run through the first (issue 33), as
// docs/benchmarks.md describes: the backends' INFO commandstats over
// -fill-quiet before and after the writes (-fill-c connections,
// -fill-pipeline commands per round trip), the writes kept going during
// the runs with -fill-during, INFO backends of both proxies polled
// throughout, and a sample of what was acknowledged read back at the end.
// The run fails (exit 1) when a row's success is below 99.9%, a fill
// write failed, fewer than a quorum voted, or an acknowledged key did not
// read back. -fill-data 0 -fill-holds 0 is the baseline. In -json: "fill",
// and per row "backend_load".
//
// Usage:
//
//	redlock-bench -spawn 5 -d 5s -c 1,16,64
//	redlock-bench -spawn 5 -idle 10000 -d 1s -c 1 -modes proxy
//	redlock-bench -spawn 5 -handoff 200 -d 1s -c 1 -modes proxy
//	redlock-bench -spawn 5 -batch 64 -d 1s -c 1 -modes proxy
//	redlock-bench -spawn 5 -d 30s -c 16 -modes proxy -fill-data 100000 -fill-holds 20000
//	redlock-bench -proxy 127.0.0.1:6380 -backend 10.0.0.1:6379 -backend … -keys contended -json
package main
