package proxy

import (
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"os"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// The status page: one screen of what the proxy sees, at / on
// metrics_listen (server-rendered HTML that refreshes itself every few
// seconds, without JavaScript) and as JSON at /status.json. Both read the
// same Status, built at each request from StatusSources.

//go:embed status.html
var statusFiles embed.FS

var statusPage = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"ms": func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"us": func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() },
	"at": func(t time.Time) string { return t.Format("15:04:05") },
}).ParseFS(statusFiles, "status.html"))

// statusRefresh is how often the page reloads itself.
const statusRefresh = 5

// hiddenKey stands for a key name on a page that does not show keys.
const hiddenKey = "(hidden)"

// StatusSources are what the status page reads at each request. Backends
// is required; a nil func shows nothing for its part.
type StatusSources struct {
	Backends Backends
	Version  string
	Members  func() []StatusMember // the tier's live members
	Locks    func() StatusLocks
	HotKeys  func(n int) []StatusKey
	Events   *redlock.Events
	// ShowKeys shows key names (status_keys); otherwise they read
	// "(hidden)".
	ShowKeys bool
}

// StatusMember is one proxy of the tier.
type StatusMember struct {
	Addr       string `json:"addr"`
	ID         string `json:"id"`
	Self       bool   `json:"self"`
	Advertised bool   `json:"advertised"`
}

// StatusLocks are this proxy's lock counts.
type StatusLocks struct {
	Granted  int64 `json:"granted_total"` // acquisitions granted through this proxy since start
	Held     int   `json:"held"`          // granted here, not yet released or expired
	Waiters  int   `json:"waiters"`
	Sessions int   `json:"sessions"`
	Holds    int   `json:"holds"` // keys this proxy renews as holds
}

// StatusKey is one of the busiest keys.
type StatusKey struct {
	Key     string        `json:"key"`
	Waiters int           `json:"waiters"`
	Held    bool          `json:"held_here"`
	Age     time.Duration `json:"held_for_ns"`
}

// StatusBackend is one backend as the page shows it.
type StatusBackend struct {
	Addr           string        `json:"addr"`
	State          string        `json:"state"` // voting, down, quarantined, loading, refilling
	Reason         string        `json:"reason,omitempty"`
	QuarantineLeft time.Duration `json:"quarantine_left_ns,omitempty"`
	Latency        time.Duration `json:"latency_ns"`
	RunID          string        `json:"run_id"`
	Failures       int           `json:"consecutive_failures"`
	// Refill is how far the refill of a backend back from empty has got
	// (nil: none runs).
	Refill *redlock.RefillProgress `json:"refill,omitempty"`
}

// StatusEvent is one notable event.
type StatusEvent struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	Detail  string    `json:"detail"`
}

// Status is everything the page shows.
type Status struct {
	Time      time.Time       `json:"time"`
	Host      string          `json:"host"`
	Version   string          `json:"version"`
	Ready     bool            `json:"ready"`
	Voting    int             `json:"voting"`
	Quorum    int             `json:"quorum"`
	Backends  []StatusBackend `json:"backends"`
	Members   []StatusMember  `json:"members"`
	Locks     StatusLocks     `json:"locks"`
	HotKeys   []StatusKey     `json:"hot_keys"`
	Events    []StatusEvent   `json:"events"`
	KeysShown bool            `json:"keys_shown"`
	Refresh   int             `json:"-"`
}

// statusRows bounds the hot keys and events shown.
const statusRows = 10

// Snapshot builds the Status now.
func (s StatusSources) Snapshot() Status {
	now := time.Now()
	st := Status{Time: now, Version: s.Version, Quorum: s.Backends.Quorum(), KeysShown: s.ShowKeys, Refresh: statusRefresh}
	st.Host, _ = os.Hostname()
	for _, b := range s.Backends.Status() {
		sb := StatusBackend{Addr: b.Addr, State: b.State, Reason: b.Reason, Latency: b.Latency, RunID: b.RunID, Failures: b.Failures}
		if b.Refilling {
			f := b.Refill
			sb.Refill = &f
		}
		switch b.State {
		case redlock.StateUp:
			sb.State = "voting"
			st.Voting++
		case redlock.StateDown:
			sb.Latency = 0 // the last answer's, before it went down
		}
		if !b.QuarantinedUntil.IsZero() {
			sb.QuarantineLeft = max(0, b.QuarantinedUntil.Sub(now)).Round(time.Second)
		}
		st.Backends = append(st.Backends, sb)
	}
	st.Ready = st.Voting >= st.Quorum
	if s.Members != nil {
		st.Members = s.Members()
	}
	if s.Locks != nil {
		st.Locks = s.Locks()
	}
	if s.HotKeys != nil {
		st.HotKeys = s.HotKeys(statusRows)
		if !s.ShowKeys {
			for i := range st.HotKeys {
				st.HotKeys[i].Key = hiddenKey
			}
		}
	}
	for _, e := range s.Events.Last(statusRows) {
		if e.Kind == redlock.EventForceReleased && !s.ShowKeys {
			e.Subject = hiddenKey
		}
		st.Events = append(st.Events, StatusEvent{Time: e.Time, Kind: e.Kind, Subject: e.Subject, Detail: e.Detail})
	}
	return st
}

// StatusHandler serves the page at / (text/html) and the same Status as
// JSON at /status.json.
func StatusHandler(s StatusSources) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := s.Snapshot()
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path == "/status.json" {
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(st)
			return
		}
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		_ = statusPage.Execute(w, st)
	})
}
