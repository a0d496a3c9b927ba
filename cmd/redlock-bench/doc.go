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
// With -spawn the proxy also serves its Prometheus metrics on a free
// loopback port (metrics_listen), and the proxy and proxy-setnx rows get
// three more columns: what the proxy process spent per successful cycle
// in the measured window, from its counters read just before the window
// and just after it. B/cycle is heap bytes allocated
// (go_memstats_alloc_bytes_total), allocs heap objects allocated
// (go_memstats_mallocs_total), cpu/cycle user plus system CPU time
// (utime+stime of /proc/PID/stat, in 10 ms ticks; the metrics'
// process_cpu_seconds_total when /proc cannot be read). The counters cover the
// whole process, so they also include its backend health checks (tiny),
// the metrics bookkeeping that metrics_listen turns on, and part of the
// scrapes themselves (0.1–0.3 MB per run: tens of bytes per cycle in a 2 s
// run, much more with a small -n). Other rows, runs without -spawn, and
// runs whose scrape failed (a warning on stderr) show "-"; in -json the
// fields proxy_alloc_bytes_per_cycle, proxy_allocs_per_cycle and
// proxy_cpu_us_per_cycle are then left out.
//
// With -spawn, every row also reads /proc/PID/io of the proxy and of the
// redis-servers and INFO stats of the backends just before and after its
// window: p-wr and p-rd are the proxy's write and read system calls per
// cycle (syscw, syscr: to clients and backends together), b-wr and b-rd
// those of all the backends together, cmd/wr the backends' commands
// (total_commands_processed) per proxy write system call. With -keys
// contended every per-cycle column is per refused attempt instead. In
// -json: proxy_write_syscalls_per_cycle, proxy_read_syscalls_per_cycle,
// backend_write_syscalls_per_cycle, backend_read_syscalls_per_cycle,
// backend_commands_per_proxy_write.
//
// With -idle N (and -spawn) it first measures what an idle connection
// costs the proxy: it raises its own open-files limit to the hard limit
// before spawning (the proxy inherits it), starts the proxy with
// max_clients = N+100, opens N connections that each send one PING and
// then stay idle, waits 2 s, and reports the proxy's VmRSS (from /proc,
// so Linux only) before and after, and the difference per connection; the
// connections are closed before the timed runs. The line is printed below
// the table, and as "idle" in -json.
//
// With -handoff N it first measures N lock hand-offs: a holder UNLOCKs
// while a client waits with LOCK … WAIT, timed from sending the UNLOCK to
// the waiter's grant; once with both on one proxy, and once with the
// holder on the proxy and the waiter on a second proxy over the same
// backends (-proxy2, or one more proxy that -spawn starts), the release
// notice's path. The lines are printed below the table, and as "handoff"
// in -json.
//
// With -batch N it first measures pipelining on one connection: N SET NX
// PX on fresh keys, written one at a time (each after the previous reply)
// and all at once (one write, then the N replies), alternately over 30
// rounds each, on a raw connection to the proxy and to the first backend;
// it reports the medians and their ratio. The lines are printed below the
// table, and as "batch" in -json.
//
// With -fill-data N and/or -fill-holds M (and -spawn) it measures what
// data and holds written through one proxy cost lock cycles run through
// another (issue 33): it starts a second proxy over the same backends,
// reads the backends' INFO commandstats over -fill-quiet with nothing
// running, writes through the second proxy N data keys (SET; every tenth
// an HSET) and M holds (SETNX, renewed by the tier) on -fill-c
// connections, -fill-pipeline commands per round trip, and reads the
// commandstats over -fill-quiet again: the difference is what renewing
// the holds and the tier's renewal rounds cost the backends at rest. With
// -fill-during it keeps rewriting the data keys through the second proxy
// while the runs go on. INFO backends of both proxies is polled from the
// fill to the end of the runs (any backend not voting is listed, with the
// fewest voting), and afterwards a sample of the acknowledged holds and
// data keys is read back through the first proxy. The lines below the
// table give all that, and per row the cycles' success (cycles over
// cycles plus errors) and the backends' commands per second over its
// window (commandstats, which also counts the commands scripts run).
// The run fails (exit 1) when a row's success is below 99.9%, a fill
// write failed, fewer than a quorum voted, or an acknowledged key did not
// read back. -fill-data 0 -fill-holds 0 is the baseline: the same second
// proxy and readings, nothing written. In -json: "fill", and per row
// "backend_load".
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
