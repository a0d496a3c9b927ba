package proxy

import (
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// workerIdle is how long a worker waits for its next command before it
// exits.
const workerIdle = 5 * time.Second

// workers runs the goroutines of pipelined commands (conn.go). A worker
// that finished a command waits up to workerIdle for the next one instead
// of exiting: a command's goroutine grows its stack deep in the dispatcher
// and the quorum code, and a fresh goroutine per command paid for that
// growth every time (runtime.newstack: about an eighth of the proxy's CPU
// with 64 pipelined SET NX on one connection). Idle workers exit at close.
type workers struct {
	tasks   chan func() // unbuffered: a send succeeds only when a worker is idle
	quit    chan struct{}
	once    sync.Once
	running redlock.Tracker
}

func newWorkers() *workers {
	return &workers{tasks: make(chan func()), quit: make(chan struct{})}
}

// Go runs f on an idle worker, or on a new one.
func (w *workers) Go(f func()) {
	select {
	case w.tasks <- f:
	default:
		w.running.Go(func() { w.work(f) })
	}
}

// work runs f, then whatever it is handed until it idles out or close.
func (w *workers) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.tasks:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// close makes idle workers exit; a running one exits after its command.
func (w *workers) close() {
	w.once.Do(func() { close(w.quit) })
}
