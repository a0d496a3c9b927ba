package commands

import (
	"strings"
	"testing"
)

// A RESP2 client hears of a lost SESSION lock as the reply to its next
// command on that key, once; other keys are not affected.
func TestLockLostToldOnNextCommand(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	c.lockLost("l", "renewal found it no longer held")
	if got := do(d, c, "PING"); got != "+PONG\r\n" {
		t.Fatalf("a command on no key = %q", got)
	}
	if got := do(d, c, "UNLOCK", "other", "x"); got != ":0\r\n" {
		t.Fatalf("a command on another key = %q", got)
	}
	if got := do(d, c, "UNLOCK", "l", "x"); !strings.HasPrefix(got, "-LOCKLOST lock 'l' was lost: renewal found it no longer held") {
		t.Fatalf("next command on the key = %q", got)
	}
	if got := do(d, c, "UNLOCK", "l", "x"); got != ":0\r\n" {
		t.Fatalf("LOCKLOST is told once; then %q", got)
	}
}
