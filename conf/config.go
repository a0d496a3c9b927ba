package conf

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config is the proxy's effective configuration, and the one declaration
// of each setting: a field whose tags give its file key (hcl), default,
// bound (bound, or check), flag, deprecated values (alias) and help line
// (doc). doc.go says how the tags read; adding a setting is adding a
// field here.
type Config struct {
	Listen            string        `hcl:"listen,optional" default:"127.0.0.1:6380" check:"listen" doc:"host:port of the client listener; port 0: any free port, empty host: all interfaces"`
	Backends          []string      `hcl:"backends,optional" flag:"backend" check:"backends" doc:"redis://host[:port][/db], rediss://… or host:port, at least 1 unless dev, no two on one host:port (the flag repeats and replaces the file's list)"`
	Dev               bool          `hcl:"dev,optional" default:"false" doc:"five embedded in-process backends; configured backends are then ignored (not for production)"`
	MigrateFrom       string        `hcl:"migrate_from,optional" check:"migrate_from" url:"true" doc:"the old single Redis (a URL in the form of backends, TLS as backend_tls, not a backend) that every lock operation also takes while clients move to the proxy (docs/operations.md); empty: none"`
	NodeTimeout       time.Duration `hcl:"node_timeout,optional" default:"50ms" bound:"(0, 10s]" doc:"deadline of each backend call (also capped at 5% of the ttl)"`
	ScriptTimeout     time.Duration `hcl:"script_timeout,optional" default:"500ms" bound:"[10ms, 1m]" doc:"the longest a script by vote runs on a backend before the proxy stops it with SCRIPT KILL (also set as the backends' lua-time-limit)"`
	DriftFactor       float64       `hcl:"drift_factor,optional" default:"0.01" bound:"[0, 0.1]" doc:"clock drift allowed per unit of ttl"`
	MinTTL            time.Duration `hcl:"min_ttl,optional" default:"10ms" bound:"[1ms, 24h]" doc:"the shortest ttl accepted"`
	MaxTTL            time.Duration `hcl:"max_ttl,optional" default:"60s" bound:"[min_ttl, 24h]" doc:"the longest ttl accepted; a restarted backend does not vote for this long (the flag also lowers default_ttl to it)"`
	DefaultTTL        time.Duration `hcl:"default_ttl,optional" default:"30s" bound:"0 or [min_ttl, max_ttl]" doc:"the lease of lock writes that carry no expiry (0: none, warned)"`
	MaxHolds          int           `hcl:"max_holds,optional" default:"50000" bound:"[0, 10000000]" doc:"locks the tier holds without expiry or beyond max_ttl, at most (0: no bound); past it such a lock is refused"`
	MaxWait           time.Duration `hcl:"max_wait,optional" default:"10s" bound:"[0, 5m]" doc:"the longest LOCK … WAIT"`
	MaxHold           time.Duration `hcl:"max_hold,optional" default:"1h" bound:"[1s, 168h]" doc:"SESSION locks stop renewing after this"`
	LogLevel          string        `hcl:"log_level,optional" default:"info" bound:"trace|debug|info|warn|error" doc:"log level"`
	LogFormat         string        `hcl:"log_format,optional" default:"text" bound:"text|json" doc:"log format"`
	MaxClients        int           `hcl:"max_clients,optional" default:"10000" bound:"[1, 1000000]" doc:"client connections at once"`
	Procs             int           `hcl:"procs,optional" default:"0" bound:"[0, 1024]" doc:"threads that run the proxy's code at once (Go's GOMAXPROCS); 0: the runtime's choice (the CPUs, or the container's CPU limit); 1 costs the least CPU per lock on a small machine shared with its backends (docs/benchmarks.md)"`
	IdleTimeout       time.Duration `hcl:"idle_timeout,optional" default:"5m" bound:">= 0" doc:"idle clients are closed after this, at most 1.5× (0: never)"`
	WriteTimeout      time.Duration `hcl:"write_timeout,optional" default:"10s" bound:"(0, 5m]" doc:"a write to a client stuck this long fails, at most 1.5×"`
	ShutdownTimeout   time.Duration `hcl:"shutdown_timeout,optional" default:"10s" bound:"(0, 10m]" doc:"graceful drain on SIGTERM"`
	Strict            bool          `hcl:"strict,optional" default:"false" doc:"refuse to start on backend problems that are otherwise warnings"`
	ProtectedMode     bool          `hcl:"protected_mode,optional" default:"true" doc:"with no password, accept loopback clients only"`
	AllowFlush        bool          `hcl:"allow_flush,optional" default:"false" doc:"let FLUSHDB/FLUSHALL reach the backends and delete every lock"`
	Scripts           string        `hcl:"scripts,optional" default:"vote" bound:"vote|recognised" alias:"catalog=recognised" doc:"scripts not recognised as lock operations run by vote on every backend (vote), or are refused (recognised)"`
	StartupQuarantine bool          `hcl:"startup_quarantine,optional" default:"true" doc:"backends whose uptime is below max_ttl plus drift do not vote at start"`
	HealthInterval    time.Duration `hcl:"health_interval,optional" default:"1s" bound:"[10ms, 1m]" doc:"backend probes: run_id, clock, loading, down"`
	DownAfter         int           `hcl:"down_after,optional" default:"3" bound:"[1, 1000]" doc:"consecutive failures that mark a backend down"`
	RequirePass       string        `hcl:"requirepass,optional" flag:"-" secret:"true" doc:"the default user's password; never logged, never a flag (or REDLOCK_PROXY_REQUIREPASS)"`
	RequirePassFile   string        `hcl:"requirepass_file,optional" doc:"file whose first line is the password; not together with requirepass"`
	AuthFailLimit     int           `hcl:"auth_fail_limit,optional" default:"10" bound:"[1, 100000]" doc:"failed AUTHs per client network (IPv4 address, IPv6 /64) …"`
	AuthFailWindow    time.Duration `hcl:"auth_fail_window,optional" default:"10s" bound:"[1s, 1h]" doc:"… within this window; then AUTH is refused until it passes"`
	MaxArgs           int           `hcl:"max_args,optional" default:"1024" bound:"[16, 1048576]" doc:"arguments per command (after AUTH)"`
	MaxBulkBytes      int           `hcl:"max_bulk_bytes,optional" default:"1048576" bound:"[4096, 536870912]" doc:"bytes per argument (after AUTH)"`
	MaxInlineBytes    int           `hcl:"max_inline_bytes,optional" default:"65536" bound:"[1024, 1048576]" doc:"bytes per inline command line"`
	MaxKeyBytes       int           `hcl:"max_key_bytes,optional" default:"1024" bound:"[1, max_bulk_bytes]" doc:"bytes per key"`
	MaxValueBytes     int           `hcl:"max_value_bytes,optional" default:"4096" bound:"[1, max_bulk_bytes]" doc:"bytes per lock token or value"`
	MaxPipeline       int           `hcl:"max_pipeline,optional" default:"1024" bound:"[1, 1048576]" doc:"commands in flight per client connection; then the proxy stops reading it"`
	Announce          string        `hcl:"announce,optional" check:"announce" doc:"host:port (not a wildcard host) clients reach this proxy at, announced to the tier; empty: listen's address, or none (warned) when listen is a wildcard"`
	ServiceName       string        `hcl:"service_name,optional" default:"redlock" check:"service_name" doc:"the master name the SENTINEL commands answer for: 1 to 128 printable ASCII characters, no spaces"`
	MetricsListen     string        `hcl:"metrics_listen,optional" check:"metrics_listen" doc:"host:port of the status page, /metrics, /healthz and /readyz over HTTP, not listen's address (empty: off)"`
	StatusKeys        bool          `hcl:"status_keys,optional" default:"false" doc:"show lock key names on the status page (/ and /status.json at metrics_listen); off: keys are hidden"`

	TLS        *TLS        `hcl:"tls,block"`         // nil: plaintext clients (block tls { … })
	BackendTLS *BackendTLS `hcl:"backend_tls,block"` // nil: rediss:// backends verify with system roots
	Users      []User      `hcl:"user,block"`        // proxy-level users (blocks user "name" { … })
}

// Values of the scripts setting.
const (
	ScriptsVote       = "vote"       // scripts not recognised run by vote on every backend
	ScriptsRecognised = "recognised" // only recognised scripts run; the rest are refused
)

// Default returns the defaults of the settings' tags. Backends is empty,
// so Default alone fails Validate on that key only: a deployment names
// its backends (or sets dev = true); there is no implicit localhost
// backend to mask a missing one.
func Default() Config {
	var c Config
	for _, s := range settings {
		s.value(&c).Set(s.def)
	}
	return c
}

// RecognisedScriptsOnly reports scripts = "recognised" (or its deprecated
// alias "catalog"): only scripts recognised as lock operations run.
func (c Config) RecognisedScriptsOnly() bool {
	return settingByKey["scripts"].canonical(&c) == ScriptsRecognised
}

// String renders the effective configuration on one line of key=value pairs
// (HCL key names) for the startup log. The password is shown as <set> or
// <unset>, and backend URLs have any credentials replaced by "xxxxx".
func (c Config) String() string {
	var b strings.Builder
	for _, kv := range c.pairs(true) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(kv[0])
		b.WriteByte('=')
		b.WriteString(kv[1])
	}
	return b.String()
}

// pairs lists every key and its value as String shows it, in String's
// order; without redact, secrets appear as they are (for comparison only).
func (c Config) pairs(redact bool) [][2]string {
	out := make([][2]string, 0, len(settings)+3)
	for _, s := range settings {
		out = append(out, [2]string{s.key, s.show(&c, redact)})
	}
	return append(out, c.blockPairs(redact)...)
}

// Change is one key whose value differs between two configurations, with
// both values as String shows them (secrets redacted).
type Change struct {
	Key, Old, New string
}

// Changes lists the keys whose values differ from old to new, in String's
// order. Secrets are compared as they are but shown redacted, so a new
// password is a change even though both sides read <set>. A reload uses it
// to say what it applied and what needs a restart.
func Changes(old, new Config) []Change {
	oldRaw, newRaw := old.pairs(false), new.pairs(false)
	oldShown, newShown := old.pairs(true), new.pairs(true)
	var out []Change
	for i := range oldRaw {
		if oldRaw[i][1] != newRaw[i][1] {
			out = append(out, Change{Key: oldRaw[i][0], Old: oldShown[i][1], New: newShown[i][1]})
		}
	}
	return out
}

// GoString makes %#v print the same redacted text as String, so the
// password cannot leak through a debug print.
func (c Config) GoString() string {
	return "conf.Config{" + c.String() + "}"
}

// RedactBackend returns a backend address fit for logs and error messages:
// the password of a redis:// or rediss:// URL becomes "xxxxx", and so does a
// lone user name (some clients read redis://secret@host as the password).
// Text that does not parse as a URL has everything up to the last '@'
// replaced.
func RedactBackend(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		at := strings.LastIndexByte(s, '@')
		prefix := ""
		if i := strings.Index(s, "://"); i >= 0 && i < at {
			prefix = s[:i+3]
		}
		return prefix + "xxxxx" + s[at:]
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// Warnings returns non-fatal remarks about c for the startup log, in a fixed
// order. An empty result means nothing to remark.
func (c Config) Warnings() []string {
	var w []string
	if c.Dev {
		w = append(w, "dev = true: five embedded in-process backends hold the locks; they vanish with the process and give no fault tolerance, not for production")
		if len(c.Backends) > 0 {
			w = append(w, fmt.Sprintf("dev = true: the %d configured backends are ignored", len(c.Backends)))
		}
	} else if n := len(c.Backends); n > 0 {
		quorum := n/2 + 1
		if n < 3 {
			w = append(w, fmt.Sprintf("backends: %d configured, quorum %d: fewer than 3 backends tolerate no backend failure", n, quorum))
		}
		if n%2 == 0 {
			w = append(w, fmt.Sprintf("backends: %d configured, quorum %d: an even count tolerates no more failures (%d) than %d backends would", n, quorum, n-quorum, n-1))
		}
	}
	if c.DefaultTTL == 0 {
		w = append(w, "default_ttl = 0: locks without expiry (SETNX, SET NX without PX, PERSIST of a lock) are refused: they need the renewed lease")
	}
	if c.DriftFactor == 0 {
		w = append(w, "drift_factor = 0: no allowance for clock drift between the proxy and the backends")
	}
	hasPass := c.RequirePass != "" || c.RequirePassFile != "" || len(c.Users) > 0
	if !hasPass {
		if !c.ProtectedMode {
			w = append(w, "protected_mode = false and no requirepass: any client that reaches "+c.Listen+" can take and release locks")
		} else if host, _, err := net.SplitHostPort(c.Listen); err == nil && !isLoopbackHost(host) {
			w = append(w, "listen = "+c.Listen+" with no requirepass: protected mode accepts loopback clients only; set requirepass to serve other hosts")
		}
	}
	if !c.StartupQuarantine {
		w = append(w, "startup_quarantine = false: backends are trusted to hold no locks at start; a backend that restarted empty just before may let two clients hold one lock")
	}
	if c.Announce == "" {
		if host, _, err := net.SplitHostPort(c.Listen); err == nil && wildcardHost(host) {
			w = append(w, "listen = "+c.Listen+" is a wildcard address and announce is not set: this proxy does not announce itself to Sentinel clients (it still answers SENTINEL with the proxies that do); set announce = \"host:port\"")
		}
	}
	if c.AllowFlush {
		w = append(w, "allow_flush = true: clients may flush lock state on the backends")
	}
	if c.IdleTimeout == 0 {
		w = append(w, "idle_timeout = 0: idle client connections are never closed")
	}
	for _, s := range settings {
		if v := s.value(&c).String(); s.aliases[v] != "" {
			w = append(w, fmt.Sprintf("%s = %q is deprecated: it means %s = %q; write that", s.key, v, s.key, s.aliases[v]))
		}
	}
	return w
}

// isLoopbackHost reports whether a listen host accepts loopback clients only.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// fmtDuration prints d in the largest unit that divides it exactly
// ("2h", "90s", "10ms"), falling back to time.Duration.String.
func fmtDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	units := []struct {
		d    time.Duration
		name string
	}{
		{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"},
		{time.Millisecond, "ms"}, {time.Microsecond, "us"},
	}
	for _, u := range units {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}

// quoteIfNeeded quotes s when it is empty or would not read back as one
// key=value token.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\r\n\"=[],") {
		return strconv.Quote(s)
	}
	return s
}
