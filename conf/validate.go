package conf

import (
	"errors"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Absolute bounds; doc.go has them as a table.
const (
	maxNodeTimeout     = 10 * time.Second
	maxDriftFactor     = 0.1
	minTTLFloor        = time.Millisecond
	maxTTLCeiling      = 24 * time.Hour
	maxMaxWait         = 5 * time.Minute
	minMaxHold         = time.Second
	maxMaxHold         = 7 * 24 * time.Hour
	maxMaxClients      = 1_000_000
	maxWriteTimeout    = 5 * time.Minute
	maxShutdownTimeout = 10 * time.Minute
	minMaxArgs         = 16
	maxMaxArgs         = 1 << 20
	minMaxBulkBytes    = 4096
	maxMaxBulkBytes    = 512 << 20
	minMaxInlineBytes  = 1024
	maxMaxInlineBytes  = 1 << 20
)

var (
	logLevels  = []string{"trace", "debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
)

// ValidationError names the offending key, its value as configured (strings
// quoted, passwords redacted) and the bound it broke.
type ValidationError struct {
	Key   string
	Value string
	Bound string
}

// Error renders "conf: key = value: bound".
func (e *ValidationError) Error() string {
	return "conf: " + e.Key + " = " + e.Value + ": " + e.Bound
}

// Validate checks every field. It returns nil, a single *ValidationError, or
// an errors.Join of several (errors.As finds the first).
func (c Config) Validate() error {
	v := &validator{}

	v.listen(c.Listen)
	v.backends(c.Backends, c.Dev)
	v.blocks(c)

	v.durAbove("node_timeout", c.NodeTimeout, 0, maxNodeTimeout)
	if !(c.DriftFactor >= 0 && c.DriftFactor <= maxDriftFactor) { // also catches NaN
		v.fail("drift_factor", strconv.FormatFloat(c.DriftFactor, 'g', -1, 64), "must be within [0, 0.1]")
	}

	v.durWithin("min_ttl", c.MinTTL, minTTLFloor, "", maxTTLCeiling, "")
	maxTTLFloor, maxTTLFloorName := minTTLFloor, ""
	if c.MinTTL > minTTLFloor && c.MinTTL <= maxTTLCeiling {
		maxTTLFloor, maxTTLFloorName = c.MinTTL, "min_ttl "
	}
	v.durWithin("max_ttl", c.MaxTTL, maxTTLFloor, maxTTLFloorName, maxTTLCeiling, "")
	if d := c.DefaultTTL; d != 0 && (d < c.MinTTL || d > c.MaxTTL) {
		v.fail("default_ttl", fmtDuration(d),
			"must be 0 or within [min_ttl "+fmtDuration(c.MinTTL)+", max_ttl "+fmtDuration(c.MaxTTL)+"]")
	}

	v.durWithin("max_wait", c.MaxWait, 0, "", maxMaxWait, "")
	v.durWithin("max_hold", c.MaxHold, minMaxHold, "", maxMaxHold, "")

	v.durWithin("health_interval", c.HealthInterval, 10*time.Millisecond, "", time.Minute, "")
	v.intWithin("down_after", c.DownAfter, 1, 1000, "")
	v.intWithin("auth_fail_limit", c.AuthFailLimit, 1, 100000, "")
	v.durWithin("auth_fail_window", c.AuthFailWindow, time.Second, "", time.Hour, "")

	v.oneOf("log_level", c.LogLevel, logLevels)
	v.oneOf("log_format", c.LogFormat, logFormats)

	v.intWithin("max_clients", c.MaxClients, 1, maxMaxClients, "")
	v.durWithin("idle_timeout", c.IdleTimeout, 0, "", math.MaxInt64, "")
	v.durAbove("write_timeout", c.WriteTimeout, 0, maxWriteTimeout)
	v.durAbove("shutdown_timeout", c.ShutdownTimeout, 0, maxShutdownTimeout)

	v.intWithin("max_args", c.MaxArgs, minMaxArgs, maxMaxArgs, "")
	v.intWithin("max_bulk_bytes", c.MaxBulkBytes, minMaxBulkBytes, maxMaxBulkBytes, "")
	v.intWithin("max_inline_bytes", c.MaxInlineBytes, minMaxInlineBytes, maxMaxInlineBytes, "")
	// Key and value limits are bounded by max_bulk_bytes when that is valid
	// itself, so one bad value gives one error.
	bulk, bulkName := maxMaxBulkBytes, ""
	if c.MaxBulkBytes >= minMaxBulkBytes && c.MaxBulkBytes <= maxMaxBulkBytes {
		bulk, bulkName = c.MaxBulkBytes, "max_bulk_bytes "
	}
	v.intWithin("max_key_bytes", c.MaxKeyBytes, 1, bulk, bulkName)
	v.intWithin("max_value_bytes", c.MaxValueBytes, 1, bulk, bulkName)

	if c.MetricsListen != "" && v.hostPort("metrics_listen", c.MetricsListen) && c.MetricsListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
		v.fail("metrics_listen", strconv.Quote(c.MetricsListen), "must differ from listen")
	}

	switch len(v.errs) {
	case 0:
		return nil
	case 1:
		return v.errs[0]
	}
	return errors.Join(v.errs...)
}

type validator struct{ errs []error }

func (v *validator) fail(key, value, bound string) {
	v.errs = append(v.errs, &ValidationError{Key: key, Value: value, Bound: bound})
}

// durAbove checks d in (lo, hi].
func (v *validator) durAbove(key string, d, lo, hi time.Duration) {
	switch {
	case d <= lo:
		v.fail(key, fmtDuration(d), "must be > "+fmtDuration(lo))
	case d > hi:
		v.fail(key, fmtDuration(d), "must be <= "+fmtDuration(hi))
	}
}

// durWithin checks d in [lo, hi]; loName/hiName ("min_ttl ") say when a
// bound comes from another key. hi = MaxInt64 means unbounded above.
func (v *validator) durWithin(key string, d, lo time.Duration, loName string, hi time.Duration, hiName string) {
	switch {
	case d < lo:
		v.fail(key, fmtDuration(d), "must be >= "+loName+fmtDuration(lo))
	case d > hi:
		v.fail(key, fmtDuration(d), "must be <= "+hiName+fmtDuration(hi))
	}
}

// intWithin checks n in [lo, hi]; hiName says when hi comes from another key.
func (v *validator) intWithin(key string, n, lo, hi int, hiName string) {
	switch {
	case n < lo:
		v.fail(key, strconv.Itoa(n), "must be >= "+strconv.Itoa(lo))
	case n > hi:
		v.fail(key, strconv.Itoa(n), "must be <= "+hiName+strconv.Itoa(hi))
	}
}

func (v *validator) oneOf(key, s string, allowed []string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.fail(key, strconv.Quote(s), "must be one of "+strings.Join(allowed, ", "))
}

func (v *validator) listen(s string) {
	if s == "" {
		v.fail("listen", `""`, "must be host:port")
		return
	}
	v.hostPort("listen", s)
}

// hostPort checks a listen address: host:port, port in [0, 65535] (0 = any
// free port, empty host = all interfaces). It reports whether s passed.
func (v *validator) hostPort(key, s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		v.fail(key, strconv.Quote(s), "must be host:port")
		return false
	}
	if _, err := parsePort(port, true); err != nil {
		v.fail(key, strconv.Quote(s), "port "+err.Error())
		return false
	}
	return true
}

func (v *validator) backends(list []string, dev bool) {
	if len(list) == 0 && !dev {
		v.fail("backends", "[]", "must list at least 1 backend (or set dev = true)")
		return
	}
	seen := make(map[string]string, len(list))
	for _, s := range list {
		shown := strconv.Quote(RedactBackend(s))
		addr, err := backendAddr(s)
		if err != nil {
			v.fail("backends", shown, err.Error())
			continue
		}
		if prev, dup := seen[addr]; dup {
			v.fail("backends", shown, "duplicates "+strconv.Quote(RedactBackend(prev))+
				": each backend must be a distinct Redis server")
			continue
		}
		seen[addr] = s
	}
}

const backendForm = "must be redis://host:port[/db], rediss://host:port[/db] or host:port"

// backendAddr checks a backend address and returns its server as a
// lower-cased host:port (port defaulting to 6379), for duplicate detection.
// Error texts never repeat the input, which may hold a password.
func backendAddr(s string) (string, error) {
	if s == "" {
		return "", errors.New(backendForm)
	}
	if !strings.Contains(s, "://") {
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" || strings.ContainsAny(s, "/@?#") {
			return "", errors.New(backendForm)
		}
		if _, err := parsePort(port, false); err != nil {
			return "", errors.New("port " + err.Error())
		}
		return net.JoinHostPort(strings.ToLower(host), port), nil
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return "", errors.New(backendForm + ": " + ue.Err.Error())
		}
		return "", errors.New(backendForm)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return "", errors.New("scheme " + strconv.Quote(u.Scheme) + ": " + backendForm)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return "", errors.New(backendForm)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("query parameters are not supported: " + backendForm)
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	if _, err := parsePort(port, false); err != nil {
		return "", errors.New("port " + err.Error())
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return "", errors.New("database must be a number: " + backendForm)
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}

// parsePort accepts a decimal port in [1, 65535], or 0 when zeroOK (listen
// on a free port, used by tests).
func parsePort(p string, zeroOK bool) (int, error) {
	lo := 1
	if zeroOK {
		lo = 0
	}
	n, err := strconv.Atoi(p)
	if err != nil || strings.Trim(p, "0123456789") != "" || n < lo || n > 65535 {
		return 0, errors.New("must be a number within [" + strconv.Itoa(lo) + ", 65535]")
	}
	return n, nil
}
