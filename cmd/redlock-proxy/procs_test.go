package main

import (
	"runtime"
	"testing"
)

// TestSetProcs: a positive procs is the thread count; 0 is what the
// process would start with, which honours GOMAXPROCS in the environment
// (runtime.SetDefaultGOMAXPROCS alone would not).
func TestSetProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	t.Setenv("GOMAXPROCS", "1")
	setProcs(3)
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Fatalf("procs = 3: %d threads", n)
	}
	setProcs(0)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("procs = 0 with GOMAXPROCS=1 in the environment: %d threads, want 1", n)
	}
}
