package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestFillItem: every hold and every data key is written exactly once,
// and the holds are spread among the data keys.
func TestFillItem(t *testing.T) {
	for _, tc := range []struct{ data, holds int }{{10, 0}, {0, 7}, {100, 20}, {7, 3}, {1, 1000}} {
		total := tc.data + tc.holds
		holds, data := make([]int, tc.holds), make([]int, tc.data)
		firstHold := -1
		for i := range total {
			hold, j := fillItem(i, total, tc.holds)
			if hold {
				holds[j]++
				if firstHold < 0 {
					firstHold = i
				}
			} else {
				data[j]++
			}
		}
		for kind, counts := range map[string][]int{"hold": holds, "data": data} {
			for j, n := range counts {
				if n != 1 {
					t.Fatalf("data %d holds %d: %s %d written %d times", tc.data, tc.holds, kind, j, n)
				}
			}
		}
		if tc.holds > 0 && tc.data > 0 && firstHold >= total/2 {
			t.Errorf("data %d holds %d: first hold at %d: not spread", tc.data, tc.holds, firstHold)
		}
	}
}

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_client|setname:calls=3,usec=4,usec_per_call=1.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=100,usec=50,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n"
	m, err := parseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m["evalsha"] != (cmdStat{12, 340}) || m["client|setname"] != (cmdStat{3, 4}) || m["get"] != (cmdStat{100, 50}) {
		t.Fatalf("parseCommandStats = %v", m)
	}
	if _, err := parseCommandStats("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Fatal("a bad count was accepted")
	}
}

func TestLoadSince(t *testing.T) {
	t0 := time.Unix(100, 0)
	before := commandSample{at: t0, stats: map[string]cmdStat{"evalsha": {10, 1000}, "get": {5, 5}}}
	after := commandSample{at: t0.Add(2 * time.Second), stats: map[string]cmdStat{
		"evalsha": {210, 401000}, "get": {1005, 2005}, "ping": {2, 0}, "info": {1, 0}}}
	l := after.loadSince(before)
	want := backendLoad{CommandsPerSec: 601.5, BusyMSPerSec: 201, EvalshaPerSec: 100, EvalshaMSPerSec: 200}
	if l.CommandsPerSec != want.CommandsPerSec || l.BusyMSPerSec != want.BusyMSPerSec ||
		l.EvalshaPerSec != want.EvalshaPerSec || l.EvalshaMSPerSec != want.EvalshaMSPerSec {
		t.Fatalf("loadSince = %+v, want %+v", *l, want)
	}
	if len(l.Top) != 3 || l.Top[0].Command != "get" || l.Top[1].Command != "evalsha" || l.Top[2].Command != "ping" {
		t.Fatalf("top = %v", l.Top)
	}
	if s := l.String(); !strings.HasPrefix(s, "602 cmd/s (get 500, evalsha 100, ping 1.00)") {
		t.Errorf("String = %q", s)
	}
}

func TestParseBackendsInfo(t *testing.T) {
	info := "# Backends\r\nbackends:3\r\nquorum:2\r\nvoting:2\r\nready:1\r\n" +
		"backend0:addr=127.0.0.1:1,state=up,run_id=a\r\n" +
		"backend1:addr=127.0.0.1:2,state=down,reason=failing: context deadline exceeded,run_id=b\r\n" +
		"backend2:addr=127.0.0.1:3,state=up\r\n"
	voting, quorum, notUp, err := parseBackendsInfo(info)
	if err != nil || voting != 2 || quorum != 2 || len(notUp) != 1 || !strings.HasPrefix(notUp[0], "backend1:") {
		t.Fatalf("parseBackendsInfo = %d, %d, %q, %v", voting, quorum, notUp, err)
	}
	if _, _, _, err := parseBackendsInfo("# Backends\r\nbackends:3\r\n"); err == nil {
		t.Fatal("INFO without voting and quorum was accepted")
	}
}

func TestFillReport(t *testing.T) {
	ok := &fillResult{Data: 100, Holds: 20, Conns: 4, Pipeline: 1, Written: 100, Held: 20, FillMS: 2000,
		RecordMin: 20, RecordMax: 20, Quorum: 3, MinVoting: 5, HoldsKept: 20, HoldsSampled: 20, DataKept: 100, DataSampled: 100}
	if why := ok.failed(); why != "" {
		t.Fatalf("a clean fill failed: %s", why)
	}
	bad := *ok
	bad.Errors, bad.MinVoting, bad.HoldsKept, bad.HoldsGone = 3, 2, 19, 1
	bad.NotVoting = []string{"12:00:00.000 proxy2 backend0:addr=x,state=down"}
	why := bad.failed()
	for _, want := range []string{"3 fill writes failed", "only 2 backends voted", "19/20 holds still held (1 gone"} {
		if !strings.Contains(why, want) {
			t.Errorf("failed() = %q, want %q in it", why, want)
		}
	}
	text := strings.Join(bad.lines(), "\n")
	for _, want := range []string{"100 data keys (10 hashes) and 20 holds", "(60.0 writes/s)", "fewest backends voting 2 (quorum 3)", "not voting: 12:00:00.000 proxy2 backend0"} {
		if !strings.Contains(text, want) {
			t.Errorf("lines lack %q:\n%s", want, text)
		}
	}
	if l := (&fillResult{}).lines(); !strings.Contains(l[0], "baseline") {
		t.Errorf("baseline line = %q", l[0])
	}

	// A row below 99.9% success fails the run.
	rep := sampleReport()
	rep.Fill = ok
	rep.Results = []result{{Mode: "proxy", Clients: 16, Cycles: 9989, Errors: 11, Attempts: 10000}}
	var errOut bytes.Buffer
	if !rep.writeErrors(&errOut) || !strings.Contains(errOut.String(), "99.890% (BELOW 99.9%) of the lock cycles") {
		t.Fatalf("writeErrors: %q", errOut.String())
	}
	rep.Results[0].Cycles, rep.Results[0].Errors = 9991, 9
	if rep.writeErrors(&bytes.Buffer{}) {
		t.Fatal("99.91% success failed the run")
	}
	if l := rep.Results[0].loadLine(); !strings.HasPrefix(l, "load proxy c=16: 99.910% success (9 errors in 10000 cycles tried)") {
		t.Errorf("loadLine = %q", l)
	}
}

func TestFillUsage(t *testing.T) {
	var errOut bytes.Buffer
	if code := run([]string{"-fill-data", "10", "-modes", "proxy"}, &bytes.Buffer{}, &errOut); code != 2 || !strings.Contains(errOut.String(), "need -spawn") {
		t.Fatalf("-fill-data without -spawn: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"-spawn", "3", "-fill-holds", "-1"}, &bytes.Buffer{}, &errOut); code != 2 || !strings.Contains(errOut.String(), "must not be negative") {
		t.Fatalf("-fill-holds -1: exit %d, %q", code, errOut.String())
	}
}
