package main

import (
	"os"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses: the fields are counted
	// from the last ')'. utime 1234, stime 56.
	stat := "4242 (redis (x) y) S 1 4242 4242 0 -1 4194560 813 0 0 0 1234 56 0 0 20 0 5 0 1000 123456 789 18446744073709551615\n"
	got, err := parseStatCPU([]byte(stat))
	if err != nil || got != 1290 {
		t.Fatalf("parseStatCPU = %d, %v; want 1290", got, err)
	}
	for _, bad := range []string{"", "4242 redis S 1", "4242 (redis) S 1 2 3", "4242 (r) S 1 2 3 4 5 6 7 8 9 10 x 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) accepted", bad)
		}
	}
}

func TestParseIOSyscalls(t *testing.T) {
	io := "rchar: 100\nwchar: 200\nsyscr: 31\nsyscw: 17\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"
	r, w, err := parseIOSyscalls([]byte(io))
	if err != nil || r != 31 || w != 17 {
		t.Fatalf("parseIOSyscalls = %d, %d, %v; want 31, 17", r, w, err)
	}
	for _, bad := range []string{"", "syscr: 1\n", "syscr: x\nsyscw: 2\n"} {
		if _, _, err := parseIOSyscalls([]byte(bad)); err == nil {
			t.Errorf("parseIOSyscalls(%q) accepted", bad)
		}
	}
}

// TestReadProcSelf reads this process's own counters: it has used some
// CPU and made some system calls.
func TestReadProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("no /proc/self/io:", err)
	}
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.reads == 0 && s.write == 0 {
		t.Fatalf("readProc(self) = %+v: no system calls", s)
	}
}

func TestExplain(t *testing.T) {
	before := machineSample{proxy: procSample{cpuTicks: 100, reads: 1000, write: 500}, backends: procSample{reads: 10, write: 20}, commands: 1000}
	after := machineSample{proxy: procSample{cpuTicks: 110, reads: 1460, write: 784}, backends: procSample{reads: 50, write: 60}, commands: 3000}
	var r result
	r.explain(before, after, 100, true)
	want := map[string]struct {
		got  *float64
		want float64
	}{
		"cpu µs":       {r.ProxyCPUUSPerCycle, 1000}, // 10 ticks = 100 ms over 100 cycles
		"proxy reads":  {r.ProxyReadsPerCycle, 4.6},
		"proxy writes": {r.ProxyWritesPerCycle, 2.84},
		"b reads":      {r.BackendReadsPerCycle, 0.4},
		"b writes":     {r.BackendWritesPerCycle, 0.4},
		"cmd/write":    {r.CommandsPerWrite, 2000.0 / 284},
	}
	for name, c := range want {
		if c.got == nil || *c.got < c.want-1e-9 || *c.got > c.want+1e-9 {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	var direct result
	direct.explain(before, after, 100, false)
	if direct.ProxyCPUUSPerCycle != nil || direct.CommandsPerWrite != nil || direct.BackendWritesPerCycle == nil {
		t.Errorf("a mode without the proxy: %+v", direct)
	}
	var none result
	none.explain(before, after, 0, true)
	if none.BackendWritesPerCycle != nil {
		t.Error("explained with no cycles")
	}
}
