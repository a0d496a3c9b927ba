package redlock

import (
	"strconv"
	"testing"
)

func TestEventsRingKeepsTheLatest(t *testing.T) {
	var e Events
	if got := e.Last(5); len(got) != 0 {
		t.Fatalf("empty ring: %v", got)
	}
	for i := range eventsKept + 10 {
		e.Add(EventBackendDown, strconv.Itoa(i), "")
	}
	got := e.Last(1000)
	if len(got) != eventsKept {
		t.Fatalf("kept %d, want %d", len(got), eventsKept)
	}
	if got[0].Subject != strconv.Itoa(eventsKept+9) || got[eventsKept-1].Subject != "10" {
		t.Fatalf("order: newest %s, oldest %s", got[0].Subject, got[eventsKept-1].Subject)
	}
	var none *Events
	none.Add(EventBackendUp, "x", "")
	if none.Last(3) != nil {
		t.Fatal("nil Events holds events")
	}
}
