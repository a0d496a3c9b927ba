package proxy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

func statusSources(show bool) StatusSources {
	ev := &redlock.Events{}
	ev.Add(redlock.EventBackendDown, "10.0.0.5:6379", "connection refused")
	ev.Add(redlock.EventForceReleased, "orders:<42>", "by admin@10.1.1.1:5000")
	return StatusSources{
		Backends: fiveBackends(3),
		Version:  "test",
		ShowKeys: show,
		Events:   ev,
		Members: func() []StatusMember {
			return []StatusMember{{Addr: "10.0.0.11:6380", ID: "aaaaaaaaaaaa", Self: true, Advertised: true}}
		},
		Locks:   func() StatusLocks { return StatusLocks{Granted: 7, Held: 2, Waiters: 3} },
		HotKeys: func(n int) []StatusKey { return []StatusKey{{Key: "orders:<42>", Waiters: 3, Held: true}} },
	}
}

func TestStatusPage(t *testing.T) {
	code, body := get(t, StatusHandler(statusSources(false)), "/")
	if code != 200 {
		t.Fatalf("code %d", code)
	}
	for _, want := range []string{
		`data-ready="true" data-voting="3" data-quorum="3"`,
		`data-addr="10.0.0.4:6379" data-state="quarantined"`, "1m0s left",
		`data-addr="10.0.0.5:6379" data-state="down"`,
		`<td id="locks-granted">7</td>`, `<td id="locks-waiters">3</td>`,
		`data-self="true"`, "this proxy",
		`data-kind="backend-down" data-subject="10.0.0.5:6379"`,
		`data-kind="force-released" data-subject="(hidden)"`,
		`<code>(hidden)</code>`,
		`http-equiv="refresh"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "orders:") || strings.Contains(body, "<script") {
		t.Errorf("page shows a key or a script:\n%s", body)
	}
	_, shown := get(t, StatusHandler(statusSources(true)), "/")
	if !strings.Contains(shown, "orders:&lt;42&gt;") {
		t.Errorf("status_keys: the key is not shown, escaped")
	}
	if code, _ := get(t, StatusHandler(statusSources(true)), "/nope"); code != 404 {
		t.Errorf("/nope: %d", code)
	}
}

func TestStatusJSON(t *testing.T) {
	code, body := get(t, StatusHandler(statusSources(false)), "/status.json")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("code %d, %v: %s", code, err, body)
	}
	if len(st.Backends) != 5 || st.Backends[0].State != "voting" || st.Backends[4].State != "down" ||
		st.Locks.Held != 2 || len(st.Events) != 2 || st.Events[0].Kind != redlock.EventForceReleased ||
		st.HotKeys[0].Key != hiddenKey {
		t.Fatalf("status: %+v", st)
	}
}
