package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// What explains a figure: with -spawn the tool knows the process ids of
// the proxy and the redis-servers, and reads, just before and just after
// each measured window, the proxy's CPU time (/proc/PID/stat: utime and
// stime), the read and write system calls of the proxy and of every
// backend (/proc/PID/io: syscr and syscw) and the commands each backend
// executed (INFO stats: total_commands_processed). The differences give
// the cpu/cycle, syscall and commands-per-write columns (docs/benchmarks.md).

// clockTicks is USER_HZ, the unit of utime and stime: 100 on every Linux
// this runs on (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// procSample is one reading of a process's counters.
type procSample struct {
	cpuTicks     uint64 // utime + stime
	reads, write uint64 // syscr, syscw
}

// readProc reads /proc/PID/stat and /proc/PID/io.
func readProc(pid int) (procSample, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		return procSample{}, err
	}
	io, err := os.ReadFile(dir + "io")
	if err != nil {
		return procSample{}, err
	}
	var s procSample
	if s.cpuTicks, err = parseStatCPU(stat); err != nil {
		return procSample{}, fmt.Errorf("%sstat: %w", dir, err)
	}
	if s.reads, s.write, err = parseIOSyscalls(io); err != nil {
		return procSample{}, fmt.Errorf("%sio: %w", dir, err)
	}
	return s, nil
}

// parseStatCPU returns utime+stime from the text of /proc/PID/stat. The
// second field, the command name in parentheses, may itself hold spaces
// and parentheses, so the fields are counted from the last ')': utime
// and stime are the 14th and 15th fields, the 12th and 13th after it.
func parseStatCPU(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
}

// parseIOSyscalls returns syscr and syscw from the text of /proc/PID/io
// ("name: value" lines).
func parseIOSyscalls(b []byte) (reads, writes uint64, err error) {
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok || (name != "syscr" && name != "syscw") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		if name == "syscr" {
			reads = n
		} else {
			writes = n
		}
		seen++
	}
	if seen != 2 {
		return 0, 0, errors.New("no syscr and syscw lines")
	}
	return reads, writes, nil
}

// machineSample is one reading of every spawned process and backend.
type machineSample struct {
	proxy    procSample
	backends procSample // summed over the redis-servers
	commands uint64     // summed total_commands_processed
}

// sampleMachine reads the spawned processes' counters; an error when t
// knows no process ids (nothing was spawned) or one cannot be read.
func sampleMachine(ctx context.Context, t targets) (machineSample, error) {
	var m machineSample
	if t.proxyPID == 0 {
		return m, errors.New("no spawned processes")
	}
	var err error
	if m.proxy, err = readProc(t.proxyPID); err != nil {
		return m, err
	}
	for _, pid := range t.backendPIDs {
		s, err := readProc(pid)
		if err != nil {
			return m, err
		}
		m.backends.cpuTicks += s.cpuTicks
		m.backends.reads += s.reads
		m.backends.write += s.write
	}
	for _, addr := range t.backends {
		n, err := commandsProcessed(ctx, addr)
		if err != nil {
			return m, err
		}
		m.commands += n
	}
	return m, nil
}

// commandsProcessed is a backend's total_commands_processed.
func commandsProcessed(ctx context.Context, addr string) (uint64, error) {
	c := newClient(addr)
	defer c.Close()
	info, err := c.Info(ctx, "stats").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO stats on %s: %w", addr, err)
	}
	return parseInfoField(info, "total_commands_processed")
}

// parseInfoField reads one "name:value" integer field of an INFO reply.
func parseInfoField(info, name string) (uint64, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in INFO", name)
}

// explain fills the columns that explain r's figure from two readings;
// per is what they are divided by (successful cycles, or refused
// attempts with -keys contended). Proxy columns only for modes through
// the proxy.
func (r *result) explain(before, after machineSample, per int64, viaProxy bool) {
	if per <= 0 {
		return
	}
	n := float64(per)
	div := func(a, b uint64) *float64 {
		v := float64(a-b) / n
		return &v
	}
	r.BackendReadsPerCycle = div(after.backends.reads, before.backends.reads)
	r.BackendWritesPerCycle = div(after.backends.write, before.backends.write)
	if !viaProxy {
		return
	}
	cpu := float64(after.proxy.cpuTicks-before.proxy.cpuTicks) * 1e6 / clockTicks / n
	r.ProxyCPUUSPerCycle = &cpu
	r.ProxyReadsPerCycle = div(after.proxy.reads, before.proxy.reads)
	r.ProxyWritesPerCycle = div(after.proxy.write, before.proxy.write)
	if w := after.proxy.write - before.proxy.write; w > 0 {
		// Besides the proxy's commands this counts the backends' own
		// share of the readings (an INFO, a handshake): a handful.
		v := float64(after.commands-before.commands) / float64(w)
		r.CommandsPerWrite = &v
	}
}
