package commands

import (
	"reflect"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	d := &Dispatcher{index: commandIndex}
	for _, tc := range []struct {
		cmd  string
		tx   bool
		want Plan
	}{
		{"PING", false, Plan{Local: true}},
		{"NOSUCH a", false, Plan{Local: true}},
		{"LOCK k", false, Plan{Local: true}}, // wrong arity: an error at once
		{"LOCK k 5000", false, Plan{Keys: args("k")}},
		{"LOCK k 5000 WAIT 100", false, Plan{Barrier: true, Blocks: true}},
		{"LOCK k 5000 WAIT 0", false, Plan{Keys: args("k")}},
		{"MLOCK 5000 a b", false, Plan{Keys: args("a", "b")}},
		{"DEL a b c", false, Plan{Keys: args("a", "b", "c")}},
		{"EVALSHA x 2 a b arg", false, Plan{Keys: args("a", "b"), parsed: callKeys{args("a", "b"), true}}},
		{"EVAL return 1 a", false, Plan{Keys: args("a"), parsed: callKeys{args("a"), true}}},
		{"EVAL return..KEYS[1] 1 a", false, Plan{Barrier: true, parsed: callKeys{args("a"), true}}}, // not analysed yet: by its text
		{"SET k v NX PX 100", false, Plan{Keys: args("k")}},
		{"SET k v NX PX 100", true, Plan{Barrier: true}},
		{"HELLO 3", false, Plan{Barrier: true, Local: true}},
		{"MULTI", false, Plan{Barrier: true, Local: true, OpensTx: true}},
		{"EXEC", true, Plan{Barrier: true, ClosesTx: true}},
		{"SUBSCRIBE c", false, Plan{Barrier: true}}, // waits for the backends' confirmations
		{"UNSUBSCRIBE c", false, Plan{Barrier: true, Local: true}},
		{"BLPOP a b 0", false, Plan{Barrier: true, Blocks: true}},
		{"BLMOVE a b LEFT RIGHT 1", false, Plan{Barrier: true, Blocks: true}},
		{"LPUSH a x", false, Plan{Keys: args("a")}},
		{"FLUSHDB", false, Plan{Barrier: true}},
		{"INFO", false, Plan{Local: true}},
	} {
		got := d.Plan(args(strings.Fields(tc.cmd)...), tc.tx)
		got.cmd = nil // the row, checked by TestPlanCarriesRow
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Plan(%q, tx %v) = %+v, want %+v", tc.cmd, tc.tx, got, tc.want)
		}
	}
}

// TestPlanForCaching: the command right after CLIENT CACHING runs alone,
// since the flag applies to it only.
func TestPlanForCaching(t *testing.T) {
	d := &Dispatcher{index: commandIndex}
	c := &Client{}
	if got := d.PlanFor(c, args("GET", "k")); got.Barrier {
		t.Fatalf("PlanFor(GET k) without CLIENT CACHING = %+v, want no barrier", got)
	}
	c.caching.Store(cachingYes)
	if got := d.PlanFor(c, args("GET", "k")); !got.Barrier || got.Keys != nil {
		t.Fatalf("PlanFor(GET k) after CLIENT CACHING YES = %+v, want a barrier", got)
	}
}

// TestPlanCarriesRow: a planned command is run by the row Plan found, and
// PlanFor follows MULTI … EXEC as the connection reads it.
func TestPlanCarriesRow(t *testing.T) {
	d := &Dispatcher{index: commandIndex}
	c := &Client{}
	for _, tc := range []struct {
		cmd     string
		row     string
		barrier bool
	}{
		{"get k", "GET", false},
		{"MULTI", "MULTI", true},
		{"GET k", "GET", true}, // inside MULTI: runs in arrival order
		{"EXEC", "EXEC", true},
		{"GET k", "GET", false},
		{"NOSUCH k", "", false},
		{"GET", "GET", false}, // wrong arity: answered at once, by its row
		// A script that builds keys is a barrier, and still its row.
		{"EVAL|return redis.call('get', KEYS[1]..':x')|1|k", "EVAL", true},
		{"LOCK k 1000 WAIT 10", "LOCK", true},
	} {
		words := strings.Fields(tc.cmd)
		if strings.Contains(tc.cmd, "|") {
			words = strings.Split(tc.cmd, "|")
		}
		p := d.PlanFor(c, args(words...))
		row := ""
		if p.cmd != nil {
			row = p.cmd.Name
		}
		if row != tc.row || p.Barrier != tc.barrier {
			t.Errorf("PlanFor(%q) = row %q barrier %v, want %q %v", tc.cmd, row, p.Barrier, tc.row, tc.barrier)
		}
	}
}

// TestPlanHandsKeysOver: EVAL's numkeys is parsed once, by Plan, and the
// handler runs with the keys Plan found. The numkeys changed after
// planning is not read again (a second parse would answer "not an
// integer"), and a script that builds keys stays a barrier run by its row.
func TestPlanHandsKeysOver(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	ctx := t.Context()
	for _, src := range []string{
		"return redis.call('SET', KEYS[1], ARGV[1])",
		"return redis.call('SET', KEYS[1] .. ':x', ARGV[1])",
	} {
		a := args("EVAL", src, "1", "k", "v")
		p := d.PlanFor(c, a)
		if p.cmd == nil || p.cmd.Name != "EVAL" || !p.parsed.ok || len(p.parsed.keys) != 1 {
			t.Fatalf("%s: plan row %v, parsed %v", src, p.cmd, p.parsed)
		}
		a[2] = []byte("x") // not a count: only a second parse would see it
		if r := d.DoPlanned(ctx, c, p, a); r != OK {
			t.Fatalf("%s: DoPlanned = %v, want OK (the planned keys)", src, r)
		}
	}
	if got := do(d, c, "EVAL", "return 1", "x"); got != "-ERR value is not an integer or out of range\r\n" {
		t.Fatalf("EVAL with numkeys x = %q", got)
	}
	if got := do(d, c, "EVAL", "return 1", "2", "k"); !strings.HasPrefix(got, "-ERR Number of keys can't be greater") {
		t.Fatalf("EVAL with numkeys 2 of 1 = %q", got)
	}
	if got := do(d, c, "EVAL", "return 1", "-1"); !strings.HasPrefix(got, "-ERR Number of keys can't be negative") {
		t.Fatalf("EVAL with numkeys -1 = %q", got)
	}
}
