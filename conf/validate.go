package conf

import (
	"errors"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// checks are the bounds an interval or a list cannot say, named by a
// field's check tag.
var checks = map[string]func(c *Config, v *validator){
	"listen":       func(c *Config, v *validator) { v.listen(c.Listen) },
	"backends":     func(c *Config, v *validator) { v.backends(c.Backends, c.Dev) },
	"announce":     func(c *Config, v *validator) { v.announce(c.Announce) },
	"migrate_from": func(c *Config, v *validator) { v.migrateFrom(c) },
	"service_name": func(c *Config, v *validator) { v.serviceName(c.ServiceName) },
	"metrics_listen": func(c *Config, v *validator) {
		if c.MetricsListen != "" && v.hostPort("metrics_listen", c.MetricsListen) &&
			c.MetricsListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
			v.fail("metrics_listen", strconv.Quote(c.MetricsListen), "must differ from listen")
		}
	},
}

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
	for _, s := range settings {
		if s.bound.check != nil {
			s.bound.check(&c, v)
		} else if bound := s.violation(&c); bound != "" {
			shown := s.show(&c, true)
			if s.typ.Kind() == reflect.String {
				shown = strconv.Quote(s.value(&c).String())
			}
			v.fail(s.key, shown, bound)
		}
	}
	v.blocks(c)
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

// migrateFrom checks the old single Redis of an upgrade in place: a URL in
// the form of backends, and not one of them.
func (v *validator) migrateFrom(c *Config) {
	if c.MigrateFrom == "" {
		return
	}
	shown := strconv.Quote(RedactBackend(c.MigrateFrom))
	addr, err := backendAddr(c.MigrateFrom)
	if err != nil {
		v.fail("migrate_from", shown, err.Error())
		return
	}
	for _, b := range c.Backends {
		if a, err := backendAddr(b); err == nil && a == addr && !c.Dev {
			v.fail("migrate_from", shown, "is also a backend: the old instance must be a Redis server of its own")
			return
		}
	}
}
