package conf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// A setting is one key of the file, declared once: its field in Config,
// its default, how the file's value decodes, how String shows it, and the
// bound Validate checks. settings is the one list of them, in String's
// order; Default, Parse, String, Changes and Validate all read it. Adding
// a key is a Config field, a row here, a line in doc.go's table, and the
// constructor the daemon hands it to (cmd/redlock-proxy/daemon.go).
type setting struct {
	key        string
	setDefault func(c *Config)
	decode     func(c *Config, key string, e hcl.Expression) error
	show       func(c *Config, redact bool) string
	check      func(c *Config, v *validator) // nil: any value
}

var settings = []setting{
	row("listen", func(c *Config) *string { return &c.Listen }, "127.0.0.1:6380", quoteIfNeeded,
		func(c *Config, v *validator) { v.listen(c.Listen) }),
	{
		key:    "backends",
		decode: plain(func(c *Config) *[]string { return &c.Backends }),
		show:   showBackends,
		check:  func(c *Config, v *validator) { v.backends(c.Backends, c.Dev) },
	},
	row("dev", func(c *Config) *bool { return &c.Dev }, false, strconv.FormatBool, nil),
	durRow("node_timeout", func(c *Config) *time.Duration { return &c.NodeTimeout }, 50*time.Millisecond,
		func(c *Config, v *validator) { v.durAbove("node_timeout", c.NodeTimeout, 0, maxNodeTimeout) }),
	durRow("script_timeout", func(c *Config) *time.Duration { return &c.ScriptTimeout }, 500*time.Millisecond,
		func(c *Config, v *validator) {
			v.durWithin("script_timeout", c.ScriptTimeout, 10*time.Millisecond, "", time.Minute, "")
		}),
	row("drift_factor", func(c *Config) *float64 { return &c.DriftFactor }, 0.01,
		func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) },
		func(c *Config, v *validator) {
			if !(c.DriftFactor >= 0 && c.DriftFactor <= maxDriftFactor) { // also catches NaN
				v.fail("drift_factor", strconv.FormatFloat(c.DriftFactor, 'g', -1, 64), "must be within [0, 0.1]")
			}
		}),
	durRow("min_ttl", func(c *Config) *time.Duration { return &c.MinTTL }, 10*time.Millisecond,
		func(c *Config, v *validator) { v.durWithin("min_ttl", c.MinTTL, minTTLFloor, "", maxTTLCeiling, "") }),
	durRow("max_ttl", func(c *Config) *time.Duration { return &c.MaxTTL }, 60*time.Second,
		func(c *Config, v *validator) {
			floor, floorName := minTTLFloor, ""
			if c.MinTTL > minTTLFloor && c.MinTTL <= maxTTLCeiling {
				floor, floorName = c.MinTTL, "min_ttl "
			}
			v.durWithin("max_ttl", c.MaxTTL, floor, floorName, maxTTLCeiling, "")
		}),
	durRow("default_ttl", func(c *Config) *time.Duration { return &c.DefaultTTL }, 30*time.Second,
		func(c *Config, v *validator) {
			if d := c.DefaultTTL; d != 0 && (d < c.MinTTL || d > c.MaxTTL) {
				v.fail("default_ttl", fmtDuration(d),
					"must be 0 or within [min_ttl "+fmtDuration(c.MinTTL)+", max_ttl "+fmtDuration(c.MaxTTL)+"]")
			}
		}),
	durRow("max_wait", func(c *Config) *time.Duration { return &c.MaxWait }, 10*time.Second,
		func(c *Config, v *validator) { v.durWithin("max_wait", c.MaxWait, 0, "", maxMaxWait, "") }),
	durRow("max_hold", func(c *Config) *time.Duration { return &c.MaxHold }, time.Hour,
		func(c *Config, v *validator) { v.durWithin("max_hold", c.MaxHold, minMaxHold, "", maxMaxHold, "") }),
	row("log_level", func(c *Config) *string { return &c.LogLevel }, "info", quoteIfNeeded,
		func(c *Config, v *validator) { v.oneOf("log_level", c.LogLevel, logLevels) }),
	row("log_format", func(c *Config) *string { return &c.LogFormat }, "text", quoteIfNeeded,
		func(c *Config, v *validator) { v.oneOf("log_format", c.LogFormat, logFormats) }),
	intRow("max_clients", func(c *Config) *int { return &c.MaxClients }, 10000,
		func(c *Config, v *validator) { v.intWithin("max_clients", c.MaxClients, 1, maxMaxClients, "") }),
	durRow("idle_timeout", func(c *Config) *time.Duration { return &c.IdleTimeout }, 5*time.Minute,
		func(c *Config, v *validator) { v.durWithin("idle_timeout", c.IdleTimeout, 0, "", math.MaxInt64, "") }),
	durRow("write_timeout", func(c *Config) *time.Duration { return &c.WriteTimeout }, 10*time.Second,
		func(c *Config, v *validator) { v.durAbove("write_timeout", c.WriteTimeout, 0, maxWriteTimeout) }),
	durRow("shutdown_timeout", func(c *Config) *time.Duration { return &c.ShutdownTimeout }, 10*time.Second,
		func(c *Config, v *validator) {
			v.durAbove("shutdown_timeout", c.ShutdownTimeout, 0, maxShutdownTimeout)
		}),
	row("strict", func(c *Config) *bool { return &c.Strict }, false, strconv.FormatBool, nil),
	row("protected_mode", func(c *Config) *bool { return &c.ProtectedMode }, true, strconv.FormatBool, nil),
	row("allow_flush", func(c *Config) *bool { return &c.AllowFlush }, false, strconv.FormatBool, nil),
	row("scripts", func(c *Config) *string { return &c.Scripts }, "vote", quoteIfNeeded,
		func(c *Config, v *validator) { v.oneOf("scripts", c.Scripts, []string{"vote", "catalog"}) }),
	row("startup_quarantine", func(c *Config) *bool { return &c.StartupQuarantine }, true, strconv.FormatBool, nil),
	durRow("health_interval", func(c *Config) *time.Duration { return &c.HealthInterval }, time.Second,
		func(c *Config, v *validator) {
			v.durWithin("health_interval", c.HealthInterval, 10*time.Millisecond, "", time.Minute, "")
		}),
	intRow("down_after", func(c *Config) *int { return &c.DownAfter }, 3,
		func(c *Config, v *validator) { v.intWithin("down_after", c.DownAfter, 1, 1000, "") }),
	{
		key:    "requirepass",
		decode: plain(func(c *Config) *string { return &c.RequirePass }),
		show:   showPassword,
	},
	row("requirepass_file", func(c *Config) *string { return &c.RequirePassFile }, "", quoteIfNeeded, nil),
	intRow("auth_fail_limit", func(c *Config) *int { return &c.AuthFailLimit }, 10,
		func(c *Config, v *validator) { v.intWithin("auth_fail_limit", c.AuthFailLimit, 1, 100000, "") }),
	durRow("auth_fail_window", func(c *Config) *time.Duration { return &c.AuthFailWindow }, 10*time.Second,
		func(c *Config, v *validator) {
			v.durWithin("auth_fail_window", c.AuthFailWindow, time.Second, "", time.Hour, "")
		}),
	intRow("max_args", func(c *Config) *int { return &c.MaxArgs }, 1024,
		func(c *Config, v *validator) { v.intWithin("max_args", c.MaxArgs, minMaxArgs, maxMaxArgs, "") }),
	intRow("max_bulk_bytes", func(c *Config) *int { return &c.MaxBulkBytes }, 1<<20,
		func(c *Config, v *validator) {
			v.intWithin("max_bulk_bytes", c.MaxBulkBytes, minMaxBulkBytes, maxMaxBulkBytes, "")
		}),
	intRow("max_inline_bytes", func(c *Config) *int { return &c.MaxInlineBytes }, 65536,
		func(c *Config, v *validator) {
			v.intWithin("max_inline_bytes", c.MaxInlineBytes, minMaxInlineBytes, maxMaxInlineBytes, "")
		}),
	intRow("max_key_bytes", func(c *Config) *int { return &c.MaxKeyBytes }, 1024,
		func(c *Config, v *validator) { v.withinBulk("max_key_bytes", c.MaxKeyBytes, c.MaxBulkBytes) }),
	intRow("max_value_bytes", func(c *Config) *int { return &c.MaxValueBytes }, 4096,
		func(c *Config, v *validator) { v.withinBulk("max_value_bytes", c.MaxValueBytes, c.MaxBulkBytes) }),
	intRow("max_pipeline", func(c *Config) *int { return &c.MaxPipeline }, 1024,
		func(c *Config, v *validator) { v.intWithin("max_pipeline", c.MaxPipeline, 1, maxMaxPipeline, "") }),
	row("announce", func(c *Config) *string { return &c.Announce }, "", quoteIfNeeded,
		func(c *Config, v *validator) { v.announce(c.Announce) }),
	row("service_name", func(c *Config) *string { return &c.ServiceName }, "redlock", quoteIfNeeded,
		func(c *Config, v *validator) { v.serviceName(c.ServiceName) }),
	row("metrics_listen", func(c *Config) *string { return &c.MetricsListen }, "", quoteIfNeeded,
		func(c *Config, v *validator) {
			if c.MetricsListen != "" && v.hostPort("metrics_listen", c.MetricsListen) &&
				c.MetricsListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
				v.fail("metrics_listen", strconv.Quote(c.MetricsListen), "must differ from listen")
			}
		}),
}

// settingByKey finds a row by its key.
var settingByKey = func() map[string]*setting {
	m := make(map[string]*setting, len(settings))
	for i := range settings {
		s := &settings[i]
		if _, dup := m[s.key]; dup {
			panic("conf: duplicate key " + s.key)
		}
		m[s.key] = s
	}
	return m
}()

// row is a setting of a plain type, decoded as HCL converts it.
func row[T any](key string, ptr func(*Config) *T, def T, show func(T) string, check func(*Config, *validator)) setting {
	return setting{
		key:        key,
		setDefault: func(c *Config) { *ptr(c) = def },
		decode:     plain(ptr),
		show:       func(c *Config, _ bool) string { return show(*ptr(c)) },
		check:      check,
	}
}

func intRow(key string, ptr func(*Config) *int, def int, check func(*Config, *validator)) setting {
	return row(key, ptr, def, strconv.Itoa, check)
}

// durRow is a duration: a Go duration string in the file, shown in the
// largest unit that divides it.
func durRow(key string, ptr func(*Config) *time.Duration, def time.Duration, check func(*Config, *validator)) setting {
	s := row(key, ptr, def, fmtDuration, check)
	s.decode = dur(ptr)
	return s
}

// plain decodes a value as HCL converts it ("5" is a number, 5 a string).
func plain[T any](ptr func(*Config) *T) func(c *Config, key string, e hcl.Expression) error {
	return func(c *Config, key string, e hcl.Expression) error {
		v, err := decodeAs[T](key, e)
		if err == nil {
			*ptr(c) = v
		}
		return err
	}
}

// dur decodes a Go duration string ("50ms", "1h"); "0" and the number 0 are
// zero. Signs are kept: Validate rejects negatives with the bound.
func dur(ptr func(*Config) *time.Duration) func(c *Config, key string, e hcl.Expression) error {
	return func(c *Config, key string, e hcl.Expression) error {
		s, err := decodeAs[string](key, e)
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("conf: %s: %s: %q is not a duration (use Go syntax such as \"50ms\", \"30s\", \"1h\")", pos(e.Range()), key, s)
		}
		*ptr(c) = d
		return nil
	}
}

func showBackends(c *Config, redact bool) string {
	shown := make([]string, len(c.Backends))
	for i, be := range c.Backends {
		if redact {
			be = RedactBackend(be)
		}
		shown[i] = quoteIfNeeded(be)
	}
	return "[" + strings.Join(shown, ",") + "]"
}

// showPassword shows requirepass as <set> or <unset>, or (for comparison
// only, never printed) as it is.
func showPassword(c *Config, redact bool) string {
	switch {
	case !redact:
		return strconv.Quote(c.RequirePass)
	case c.RequirePass != "":
		return "<set>"
	}
	return "<unset>"
}
