package redlock

import (
	"sync"
	"time"
)

// Event kinds: what an operator wants to see happened, on the status page
// (docs/operations.md, "Status page").
const (
	EventBackendDown      = "backend-down"
	EventBackendUp        = "backend-up"
	EventQuarantined      = "quarantined"
	EventClockJump        = "clock-jump"
	EventScriptKilled     = "script-killed"
	EventHoldsRenewedHere = "holds-renewed-here" // holds made through a silent proxy, renewed by this one
	EventForceReleased    = "force-released"
)

// eventsKept is how many events an Events keeps: the latest.
const eventsKept = 64

// Event is one notable thing that happened to the proxy or a backend.
type Event struct {
	Time    time.Time // wall clock
	Kind    string    // one of the Event* constants
	Subject string    // the backend's host:port, or the proxy member, or the key
	Detail  string    // a short sentence
}

// Events keeps the latest notable events in a bounded ring. The zero
// value is ready; a nil *Events drops what it is given, so every hook is
// one call without a check.
type Events struct {
	mu   sync.Mutex
	ring [eventsKept]Event
	next int // where the next event goes
	n    int // events held, at most eventsKept
}

// Add records an event now.
func (e *Events) Add(kind, subject, detail string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ring[e.next] = Event{Time: time.Now(), Kind: kind, Subject: subject, Detail: detail}
	e.next = (e.next + 1) % eventsKept
	e.n = min(e.n+1, eventsKept)
}

// Last returns up to n events, newest first.
func (e *Events) Last(n int) []Event {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n = min(n, e.n)
	out := make([]Event, n)
	for i := range n {
		out[i] = e.ring[(e.next-1-i+eventsKept)%eventsKept]
	}
	return out
}
