package commands

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNewScriptsRate: one connection may have newScriptsPerSecond new
// script texts analysed per second; past that a new text is refused with
// a clear error, while a text already analysed still runs, and so does a
// new one from another connection or in the next second.
func TestNewScriptsRate(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	now := time.Now()
	d.now = func() time.Time { return now }
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	src := func(i int) string { return fmt.Sprintf("return redis.call('get', KEYS[1]) -- %d", i) }
	for i := range newScriptsPerSecond {
		if got := do(d, c, "EVAL", src(i), "1", "k"); got != "$-1\r\n" {
			t.Fatalf("new script %d = %q", i, got)
		}
	}
	if got := do(d, c, "EVAL", src(100), "1", "k"); !strings.Contains(got, "too many new scripts") {
		t.Fatalf("one new script too many = %q, want refused", got)
	}
	if got := do(d, c, "SCRIPT", "LOAD", src(101)); !strings.Contains(got, "too many new scripts") {
		t.Fatalf("SCRIPT LOAD of one new script too many = %q, want refused", got)
	}
	if got := do(d, c, "EVAL", src(0), "1", "k"); got != "$-1\r\n" {
		t.Fatalf("a script already analysed = %q, want it run", got)
	}
	other := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	if got := do(d, other, "EVAL", src(100), "1", "k"); got != "$-1\r\n" {
		t.Fatalf("the new script from another connection = %q, want it run", got)
	}
	now = now.Add(time.Second)
	if got := do(d, c, "EVAL", src(102), "1", "k"); got != "$-1\r\n" {
		t.Fatalf("a new script in the next second = %q, want it run", got)
	}
	if got := d.Refusals()[LimitNewScripts]; got != 2 {
		t.Fatalf("Refusals()[%s] = %d, want 2", LimitNewScripts, got)
	}
}

// TestAnalysesBounded: with maxAnalyses analyses running, a new text
// waits for a turn no longer than its command's deadline, then is refused
// with a clear error; a text already analysed does not wait.
func TestAnalysesBounded(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	const known = "return redis.call('get', KEYS[1])"
	if got := do(d, c, "EVAL", known, "1", "k"); got != "$-1\r\n" {
		t.Fatalf("EVAL = %q", got)
	}
	for range maxAnalyses { // every turn taken
		d.analyses <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := d.Do(ctx, c, args("EVAL", known+" -- new", "1", "k"))
	if got := string(AppendReply(nil, r, 2)); !strings.Contains(got, "busy analysing other new scripts") {
		t.Fatalf("a new script with every turn taken = %q, want refused", got)
	}
	if got := d.Refusals()[LimitAnalyses]; got != 1 {
		t.Fatalf("Refusals()[%s] = %d, want 1", LimitAnalyses, got)
	}
	if got := do(d, c, "EVAL", known, "1", "k"); got != "$-1\r\n" {
		t.Fatalf("the script already analysed = %q, want it run", got)
	}
	for range maxAnalyses {
		<-d.analyses
	}
	if got := do(d, c, "EVAL", known+" -- new", "1", "k"); got != "$-1\r\n" {
		t.Fatalf("the new script once a turn is free = %q", got)
	}
}

// TestRefusedScriptsNotCached: a text the new-script bounds refuse (the
// rate, every analysis turn taken) or that does not compile is not
// remembered: SCRIPT EXISTS answers 0 and EVALSHA NOSCRIPT, and the
// refused texts evict nothing from the cache.
func TestRefusedScriptsNotCached(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	now := time.Now()
	d.now = func() time.Time { return now }
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	src := func(i int) string { return fmt.Sprintf("return redis.call('get', KEYS[1]) -- %d", i) }
	exists := func(s string) string { return do(d, c, "SCRIPT", "EXISTS", hashScript([]byte(s))) }
	for i := range newScriptsPerSecond {
		if got := do(d, c, "SCRIPT", "LOAD", src(i)); !strings.Contains(got, hashScript([]byte(src(i)))) {
			t.Fatalf("SCRIPT LOAD %d = %q", i, got)
		}
	}
	n := len(d.scripts.bySHA)
	for i := 100; i < 110; i++ {
		if got := do(d, c, "SCRIPT", "LOAD", src(i)); !strings.Contains(got, "too many new scripts") {
			t.Fatalf("SCRIPT LOAD past the rate = %q, want refused", got)
		}
	}
	if got := do(d, c, "EVAL", src(110), "1", "k"); !strings.Contains(got, "too many new scripts") {
		t.Fatalf("EVAL past the rate = %q, want refused", got)
	}
	for _, s := range []string{src(100), src(110)} {
		if got := exists(s); got != "*1\r\n:0\r\n" {
			t.Fatalf("SCRIPT EXISTS of a refused text = %q, want 0", got)
		}
	}
	if got := do(d, c, "EVALSHA", hashScript([]byte(src(100))), "1", "k"); !strings.Contains(got, "NOSCRIPT") {
		t.Fatalf("EVALSHA of a refused text = %q, want NOSCRIPT", got)
	}
	if got := len(d.scripts.bySHA); got != n {
		t.Fatalf("the cache holds %d scripts after refusals, want %d", got, n)
	}
	now = now.Add(time.Second)
	for range maxAnalyses {
		d.analyses <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if got := string(AppendReply(nil, d.Do(ctx, c, args("SCRIPT", "LOAD", src(120))), 2)); !strings.Contains(got, "busy analysing") {
		t.Fatalf("SCRIPT LOAD with every turn taken = %q, want refused", got)
	}
	for range maxAnalyses {
		<-d.analyses
	}
	if got := exists(src(120)); got != "*1\r\n:0\r\n" {
		t.Fatalf("SCRIPT EXISTS of a text refused as busy = %q, want 0", got)
	}
	if got := do(d, c, "SCRIPT", "LOAD", "return ("); !strings.Contains(got, "Error compiling") {
		t.Fatalf("SCRIPT LOAD of a text that does not compile = %q", got)
	}
	if got := exists("return ("); got != "*1\r\n:0\r\n" {
		t.Fatalf("SCRIPT EXISTS of a text that does not compile = %q, want 0", got)
	}
	if got := do(d, c, "SCRIPT", "LOAD", src(120)); !strings.Contains(got, hashScript([]byte(src(120)))) {
		t.Fatalf("SCRIPT LOAD once a turn is free = %q", got)
	}
	if got := exists(src(120)); got != "*1\r\n:1\r\n" {
		t.Fatalf("SCRIPT EXISTS of a loaded text = %q, want 1", got)
	}
}
