package proxy

import (
	"context"
	"testing"
	"time"
)

// TestWorkersReuseAndClose: a worker that finished its command takes the
// next one; close makes idle workers exit.
func TestWorkersReuseAndClose(t *testing.T) {
	w := newWorkers()
	ran := make(chan int, 2)
	w.Go(func() { ran <- 1 })
	if got := <-ran; got != 1 {
		t.Fatalf("first task: %d", got)
	}
	// The worker is now idle (or about to be): it takes a task handed
	// to it directly, which only an idle worker can receive.
	select {
	case w.tasks <- func() { ran <- 2 }:
	case <-time.After(10 * time.Second):
		t.Fatal("no idle worker took the second task")
	}
	if got := <-ran; got != 2 {
		t.Fatalf("second task: %d", got)
	}
	w.close()
	w.close() // twice is fine
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.running.Wait(ctx); err != nil {
		t.Fatalf("workers still running after close: %v", err)
	}
}
