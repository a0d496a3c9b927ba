package conf

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config is the proxy's effective configuration. Each key's default,
// decoding, display and bound are declared once, in settings (keys.go);
// doc.go has the table of keys and bounds.
type Config struct {
	Listen            string        // host:port of the client listener
	Backends          []string      // redis://host:port[/db], rediss://…, or host:port
	Dev               bool          // five embedded in-process backends
	NodeTimeout       time.Duration // per backend call (also capped at 5% of the ttl)
	ScriptTimeout     time.Duration // the longest a script by vote runs on a backend before SCRIPT KILL
	DriftFactor       float64       // clock drift allowed per unit of ttl
	MinTTL            time.Duration // the shortest ttl accepted
	MaxTTL            time.Duration // the longest ttl accepted; sets the restart quarantine
	DefaultTTL        time.Duration // the lease of lock writes that carry no expiry (0: none)
	MaxWait           time.Duration // the longest LOCK … WAIT
	MaxHold           time.Duration // SESSION locks stop renewing after this
	LogLevel          string        // trace|debug|info|warn|error
	LogFormat         string        // text|json
	MaxClients        int           // client connections at once
	IdleTimeout       time.Duration // idle clients are closed after this (0: never)
	WriteTimeout      time.Duration // deadline for each write to a client
	ShutdownTimeout   time.Duration // graceful drain on SIGTERM
	Strict            bool          // refuse to start on backend problems
	ProtectedMode     bool          // with no password, loopback clients only
	AllowFlush        bool          // FLUSHDB/FLUSHALL reach the backends
	Scripts           string        // vote|catalog: what runs besides the recognised lock scripts
	StartupQuarantine bool          // backends younger than max_ttl do not vote at start
	HealthInterval    time.Duration // backend probes (run_id, clock, loading, down)
	DownAfter         int           // consecutive failures that mark a backend down
	RequirePass       string        // secret; never shown by String or GoString
	RequirePassFile   string        // file whose first line is the password
	AuthFailLimit     int           // failed AUTHs per client network …
	AuthFailWindow    time.Duration // … within this window, then AUTH is refused until it passes
	MaxArgs           int           // arguments per command (after AUTH)
	MaxBulkBytes      int           // bytes per argument (after AUTH)
	MaxInlineBytes    int           // bytes per inline command line
	MaxKeyBytes       int           // bytes per key
	MaxValueBytes     int           // bytes per lock token / value
	MaxPipeline       int           // commands in flight per client connection
	Announce          string        // host:port clients reach this proxy at, for the tier ("": from listen)
	ServiceName       string        // the master name the SENTINEL commands answer for
	MetricsListen     string        // host:port of /metrics, /healthz, /readyz ("": off)
	TLS               *TLS          // nil: plaintext clients (block tls { … })
	BackendTLS        *BackendTLS   // nil: rediss:// backends verify with system roots
	Users             []User        // proxy-level users (blocks user "name" { … })
}

// Default returns the built-in defaults (settings, keys.go). Backends is
// empty, so Default alone fails Validate on that key only: a deployment
// names its backends (or sets dev = true); there is no implicit localhost
// backend to mask a missing one.
func Default() Config {
	var c Config
	for _, s := range settings {
		if s.setDefault != nil {
			s.setDefault(&c)
		}
	}
	return c
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
		w = append(w, "default_ttl = 0: lock writes that carry no expiry are kept forever; a crashed holder never releases them, and a backend restart without persistence breaks mutual exclusion")
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
