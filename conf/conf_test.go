package conf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// valid returns a Config that passes Validate, for tests to break one field.
func valid() Config {
	c := Default()
	c.Backends = []string{"redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "10.0.0.3:6379"}
	return c
}

func mustParse(t *testing.T, src string) Config {
	t.Helper()
	c, err := Parse([]byte(src), "test.hcl", Default())
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return c
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"dev", func() Config { c := Default(); c.Dev = true; return c }()},
		{"three backends", valid()},
		{"one host:port backend", func() Config { c := Default(); c.Backends = []string{"localhost:6379"}; return c }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}

	// Bare defaults have no backends, and that is the only complaint.
	var ve *ValidationError
	err := Default().Validate()
	if !errors.As(err, &ve) || ve.Key != "backends" {
		t.Fatalf("Default().Validate() = %v, want a backends error", err)
	}
	if strings.Count(err.Error(), "conf:") != 1 {
		t.Fatalf("Default().Validate() reports more than backends: %v", err)
	}
}

func TestParseFull(t *testing.T) {
	src := `
# every key, none at its default
listen           = "0.0.0.0:7000"
backends         = ["redis://a:6379", "rediss://user:pw@b:6380/2", "c:6379"]
dev              = true
migrate_from     = "rediss://old:6379"
node_timeout     = "20ms"
script_timeout   = "250ms"
drift_factor     = 0.02
min_ttl          = "5ms"
max_ttl          = "2m"
default_ttl      = "0"
max_holds        = 1000
max_wait         = "3s"
max_hold         = "2h"
log_level        = "debug"
log_format       = "json"
max_clients      = 500
procs            = 1
idle_timeout     = "0"
write_timeout    = "2s"
shutdown_timeout = "30s"
strict           = true
protected_mode   = false
allow_flush      = true
scripts          = "catalog"
startup_quarantine = false
health_interval  = "250ms"
down_after       = 5
requirepass      = "pw"
requirepass_file = "/run/secret"
auth_fail_limit  = 3
auth_fail_window = "1m"
max_args         = 64
max_bulk_bytes   = 8192
max_inline_bytes = 2048
max_key_bytes    = 256
max_value_bytes  = 512
max_pipeline     = 64
announce         = "proxy-1.example:7000"
service_name     = "locks"
metrics_listen   = "127.0.0.1:9121"
status_keys      = true
`
	want := Config{
		Listen:            "0.0.0.0:7000",
		Backends:          []string{"redis://a:6379", "rediss://user:pw@b:6380/2", "c:6379"},
		Dev:               true,
		MigrateFrom:       "rediss://old:6379",
		NodeTimeout:       20 * time.Millisecond,
		ScriptTimeout:     250 * time.Millisecond,
		DriftFactor:       0.02,
		MinTTL:            5 * time.Millisecond,
		MaxTTL:            2 * time.Minute,
		DefaultTTL:        0,
		MaxHolds:          1000,
		MaxWait:           3 * time.Second,
		MaxHold:           2 * time.Hour,
		LogLevel:          "debug",
		LogFormat:         "json",
		MaxClients:        500,
		Procs:             1,
		IdleTimeout:       0,
		WriteTimeout:      2 * time.Second,
		ShutdownTimeout:   30 * time.Second,
		Strict:            true,
		ProtectedMode:     false,
		AllowFlush:        true,
		Scripts:           "catalog",
		StartupQuarantine: false,
		HealthInterval:    250 * time.Millisecond,
		DownAfter:         5,
		RequirePass:       "pw",
		RequirePassFile:   "/run/secret",
		AuthFailLimit:     3,
		AuthFailWindow:    time.Minute,
		MaxArgs:           64,
		MaxBulkBytes:      8192,
		MaxInlineBytes:    2048,
		MaxKeyBytes:       256,
		MaxValueBytes:     512,
		MaxPipeline:       64,
		Announce:          "proxy-1.example:7000",
		ServiceName:       "locks",
		MetricsListen:     "127.0.0.1:9121",
		StatusKeys:        true,
	}
	got := mustParse(t, src)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse full file:\n got %#v\nwant %#v", got, want)
	}
	// The file sets every key the loader knows, so a new key must come here.
	for _, k := range keys() {
		if !strings.Contains(src, "\n"+k+" ") {
			t.Errorf("full-file test does not set %q", k)
		}
	}
}

func TestParseKeepsBase(t *testing.T) {
	base := valid()
	got := mustParse(t, `max_ttl = "30s"`) // over Default
	if got.MaxTTL != 30*time.Second || got.NodeTimeout != Default().NodeTimeout {
		t.Fatalf("partial file: got max_ttl %v node_timeout %v", got.MaxTTL, got.NodeTimeout)
	}
	got, err := Parse([]byte(`backends = ["x:1"]`), "t.hcl", base)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Backends) != 1 || len(base.Backends) != 3 || got.Listen != base.Listen {
		t.Fatalf("file should replace backends and keep the rest: got %v, base %v", got.Backends, base.Backends)
	}
	empty, err := Parse(nil, "empty.hcl", base)
	if err != nil || !reflect.DeepEqual(empty, base) {
		t.Fatalf("empty file changed base: %v %v", err, empty)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // substrings of the error
	}{
		{"unknown key", "listen = \"a:1\"\nmax_ttll = \"1s\"\n", []string{`test.hcl:2:1: Unsupported argument: An argument named "max_ttll" is not expected here. Did you mean "max_ttl"?`}},
		{"unknown key far from any", "\n\nfrobnicate = 1\n", []string{`test.hcl:3:1: Unsupported argument: An argument named "frobnicate" is not expected here.`}},
		{"unknown block", "nosuch {\n}\n", []string{`test.hcl:1:1: Unsupported block type: Blocks of type "nosuch" are not expected here.`}},
		{"unknown key in block", "tls {\n  cert = \"x\"\n}\n", []string{`test.hcl:2:3: tls.cert: Unsupported argument: An argument named "cert" is not expected here.`}},
		{"user without name", "user {\n}\n", []string{"test.hcl:1:6: Missing name for user: All user blocks must have 1 labels (name)."}},
		{"tls with a name", "tls \"x\" {\n}\n", []string{"test.hcl:1:5: Extraneous label for tls: No labels are expected for tls blocks."}},
		{"string for int", `max_clients = "lots"`, []string{"max_clients", "number is required", "test.hcl:1:"}},
		{"fraction for int", `max_args = 1.5`, []string{"max_args", "whole number"}},
		{"string for bool", `strict = "yes"`, []string{"strict", "bool is required"}},
		{"string for float", `drift_factor = "x"`, []string{"drift_factor", "number is required"}},
		{"float overflow", `drift_factor = 9e999`, []string{"drift_factor: number out of range"}},
		// Spelt out as a string (a duration, a string key) these would take
		// minutes and gigabytes: refused as literals.
		{"huge number", `max_ttl = 1e99999999`, []string{"test.hcl:1:11: max_ttl: number out of range"}},
		{"tiny number", `listen = 1e-99999999`, []string{"test.hcl:1:10: listen: number out of range"}},
		{"huge number in a string", `listen = "${1e99999999}"`, []string{"listen: number out of range"}},
		{"huge number in a block", "user \"u\" {\n  password = 1e99999999\n}\n", []string{"test.hcl:2:14: user.password: number out of range"}},
		{"string for list", `backends = "a:1"`, []string{"backends", "list of string required"}},
		{"list for string", `listen = ["a:1"]`, []string{"listen", "string required"}},
		{"null", `log_level = null`, []string{"log_level", "null"}},
		{"variable", `log_level = debug`, []string{"log_level", "Variables not allowed"}},
		{"bad duration", `node_timeout = "fast"`, []string{"node_timeout", `"fast" is not a duration`}},
		{"duration without unit", `max_ttl = 60`, []string{"max_ttl", `"60" is not a duration`}},
		{"syntax error", "listen = \n", []string{"test.hcl:1:"}},
		{"redefined", "listen = \"a:1\"\nlisten = \"b:1\"\n", []string{"test.hcl:2:", "listen"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := valid()
			got, err := Parse([]byte(tc.src), "test.hcl", base)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error", tc.src)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "conf: ") {
				t.Errorf("error %q lacks the conf: prefix", err)
			}
			if !reflect.DeepEqual(got, base) {
				t.Errorf("failed Parse returned a changed config")
			}
		})
	}
}

func TestParseDurations(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want time.Duration
	}{
		{`default_ttl = "0"`, 0},
		{`default_ttl = 0`, 0},
		{`default_ttl = "1h30m"`, 90 * time.Minute},
		{`default_ttl = "250ms"`, 250 * time.Millisecond},
		{`default_ttl = " 5s "`, 5 * time.Second},
		{`default_ttl = "-1s"`, -time.Second}, // parsed; Validate rejects it
	} {
		if got := mustParse(t, tc.src).DefaultTTL; got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.src, got, tc.want)
		}
	}
}

func TestLoadFile(t *testing.T) {
	p := writeFile(t, "proxy.hcl", "listen = \"127.0.0.1:0\"\nbogus = 1\n")
	_, err := LoadFile(p, Default())
	if err == nil || !strings.Contains(err.Error(), p+":2:1") || !strings.Contains(err.Error(), `"bogus"`) {
		t.Fatalf("LoadFile unknown key: %v", err)
	}
	p = writeFile(t, "ok.hcl", `backends = ["a:1"]`)
	c, err := LoadFile(p, Default())
	if err != nil || len(c.Backends) != 1 {
		t.Fatalf("LoadFile: %v %v", c.Backends, err)
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.hcl"), Default()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadFile missing: %v, want ErrNotExist", err)
	}
}

func TestValidateBad(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		key  string
		want string // substring of the error text
	}{
		{"listen empty", func(c *Config) { c.Listen = "" }, "listen", `listen = "": must be host:port`},
		{"announce no port", func(c *Config) { c.Announce = "proxy-1" }, "announce", `announce = "proxy-1": must be host:port`},
		{"announce wildcard", func(c *Config) { c.Announce = "0.0.0.0:6380" }, "announce", "not a wildcard"},
		{"announce empty host", func(c *Config) { c.Announce = ":6380" }, "announce", "not a wildcard"},
		{"announce port 0", func(c *Config) { c.Announce = "10.0.0.1:0" }, "announce", "port must be a number within [1, 65535]"},
		{"service_name empty", func(c *Config) { c.ServiceName = "" }, "service_name", "must be 1 to 128 printable ASCII characters without spaces"},
		{"service_name space", func(c *Config) { c.ServiceName = "my locks" }, "service_name", "without spaces"},
		{"service_name long", func(c *Config) { c.ServiceName = strings.Repeat("x", 129) }, "service_name", "1 to 128"},
		{"listen no port", func(c *Config) { c.Listen = "localhost" }, "listen", "host:port"},
		{"listen bad port", func(c *Config) { c.Listen = "localhost:http" }, "listen", "port must be"},
		{"listen port too big", func(c *Config) { c.Listen = ":65536" }, "listen", "65535"},
		{"no backends", func(c *Config) { c.Backends = nil }, "backends", "at least 1"},
		{"backend scheme", func(c *Config) { c.Backends[0] = "http://a:1" }, "backends", `scheme "http"`},
		{"backend no port", func(c *Config) { c.Backends[0] = "a" }, "backends", "must be redis://"},
		{"backend port 0", func(c *Config) { c.Backends[0] = "a:0" }, "backends", "port must be"},
		{"backend port name", func(c *Config) { c.Backends[0] = "redis://a:redis" }, "backends", "port"},
		{"backend no host", func(c *Config) { c.Backends[0] = ":6379" }, "backends", "must be redis://"},
		{"backend url no host", func(c *Config) { c.Backends[0] = "redis:///0" }, "backends", "must be redis://"},
		{"backend db", func(c *Config) { c.Backends[0] = "redis://a:1/x" }, "backends", "database"},
		{"migrate_from form", func(c *Config) { c.MigrateFrom = "http://old:1" }, "migrate_from", `scheme "http"`},
		{"migrate_from a backend", func(c *Config) { c.MigrateFrom = c.Backends[0] + "/0" }, "migrate_from", "is also a backend"},
		{"backend query", func(c *Config) { c.Backends[0] = "redis://a:1/0?max_retries=3" }, "backends", "query"},
		{"backend empty", func(c *Config) { c.Backends[0] = "" }, "backends", `backends = ""`},
		{"backend duplicate", func(c *Config) { c.Backends[2] = "10.0.0.1:6379" }, "backends", "duplicates"},
		{"user scripts", func(c *Config) {
			c.Users = []User{{Name: "u", Password: "p", Commands: []string{"*"}, Scripts: "catalog"}}
		}, `user u scripts`, `must be "vote" or "recognised"`},
		{"backend duplicate default port", func(c *Config) { c.Backends[2] = "redis://10.0.0.2" }, "backends", "duplicates"},
		{"backend duplicate other db", func(c *Config) { c.Backends[2] = "redis://10.0.0.2:6379/3" }, "backends", "distinct"},
		{"node_timeout zero", func(c *Config) { c.NodeTimeout = 0 }, "node_timeout", "conf: node_timeout = 0s: must be > 0"},
		{"node_timeout negative", func(c *Config) { c.NodeTimeout = -time.Millisecond }, "node_timeout", "must be > 0"},
		{"script_timeout small", func(c *Config) { c.ScriptTimeout = time.Millisecond }, "script_timeout", "must be >= 10ms"},
		{"node_timeout big", func(c *Config) { c.NodeTimeout = 11 * time.Second }, "node_timeout", "must be <= 10s"},
		{"auth_fail_limit zero", func(c *Config) { c.AuthFailLimit = 0 }, "auth_fail_limit", "must be >= 1"},
		{"auth_fail_window short", func(c *Config) { c.AuthFailWindow = time.Millisecond }, "auth_fail_window", "must be >= 1s"},
		{"auth_fail_window long", func(c *Config) { c.AuthFailWindow = 2 * time.Hour }, "auth_fail_window", "must be <= 1h"},
		{"drift negative", func(c *Config) { c.DriftFactor = -0.01 }, "drift_factor", "drift_factor = -0.01: must be >= 0"},
		{"drift big", func(c *Config) { c.DriftFactor = 0.2 }, "drift_factor", "drift_factor = 0.2"},
		{"min_ttl small", func(c *Config) { c.MinTTL = time.Microsecond }, "min_ttl", "must be >= 1ms"},
		{"min_ttl negative", func(c *Config) { c.MinTTL = -time.Second }, "min_ttl", "must be >= 1ms"},
		{"max_ttl big", func(c *Config) { c.MaxTTL = 48 * time.Hour; c.DefaultTTL = 0 }, "max_ttl", "conf: max_ttl = 48h: must be <= 24h"},
		{"max_ttl below min_ttl", func(c *Config) { c.MaxTTL = 5 * time.Millisecond; c.DefaultTTL = 0 }, "max_ttl", "must be >= min_ttl 10ms"},
		{"default_ttl big", func(c *Config) { c.DefaultTTL = 90 * time.Second }, "default_ttl", "conf: default_ttl = 90s: must be 0 or within [min_ttl 10ms, max_ttl 1m]"},
		{"default_ttl small", func(c *Config) { c.DefaultTTL = time.Millisecond }, "default_ttl", "must be 0 or within"},
		{"default_ttl negative", func(c *Config) { c.DefaultTTL = -time.Second }, "default_ttl", "default_ttl = -1s"},
		{"max_wait negative", func(c *Config) { c.MaxWait = -time.Second }, "max_wait", "must be >= 0s"},
		{"max_wait big", func(c *Config) { c.MaxWait = 6 * time.Minute }, "max_wait", "must be <= 5m"},
		{"max_hold small", func(c *Config) { c.MaxHold = 500 * time.Millisecond }, "max_hold", "must be >= 1s"},
		{"max_hold big", func(c *Config) { c.MaxHold = 8 * 24 * time.Hour }, "max_hold", "must be <= 168h"},
		{"log_level", func(c *Config) { c.LogLevel = "verbose" }, "log_level", `log_level = "verbose": must be one of trace, debug, info, warn, error`},
		{"log_level case", func(c *Config) { c.LogLevel = "INFO" }, "log_level", "must be one of"},
		{"log_format", func(c *Config) { c.LogFormat = "xml" }, "log_format", "text, json"},
		{"max_clients zero", func(c *Config) { c.MaxClients = 0 }, "max_clients", "must be >= 1"},
		{"max_clients big", func(c *Config) { c.MaxClients = 1_000_001 }, "max_clients", "must be <= 1000000"},
		{"idle_timeout negative", func(c *Config) { c.IdleTimeout = -time.Second }, "idle_timeout", "must be >= 0s"},
		{"write_timeout zero", func(c *Config) { c.WriteTimeout = 0 }, "write_timeout", "must be > 0"},
		{"write_timeout big", func(c *Config) { c.WriteTimeout = time.Hour }, "write_timeout", "must be <= 5m"},
		{"shutdown_timeout zero", func(c *Config) { c.ShutdownTimeout = 0 }, "shutdown_timeout", "must be > 0"},
		{"shutdown_timeout big", func(c *Config) { c.ShutdownTimeout = 11 * time.Minute }, "shutdown_timeout", "must be <= 10m"},
		{"max_args small", func(c *Config) { c.MaxArgs = 15 }, "max_args", "must be >= 16"},
		{"max_args big", func(c *Config) { c.MaxArgs = 1<<20 + 1 }, "max_args", "must be <= 1048576"},
		{"max_bulk_bytes small", func(c *Config) { c.MaxBulkBytes = 4095 }, "max_bulk_bytes", "must be >= 4096"},
		{"max_bulk_bytes big", func(c *Config) { c.MaxBulkBytes = 512<<20 + 1 }, "max_bulk_bytes", "must be <= 536870912"},
		{"max_inline_bytes small", func(c *Config) { c.MaxInlineBytes = 1023 }, "max_inline_bytes", "must be >= 1024"},
		{"max_inline_bytes big", func(c *Config) { c.MaxInlineBytes = 1<<20 + 1 }, "max_inline_bytes", "must be <= 1048576"},
		{"max_key_bytes zero", func(c *Config) { c.MaxKeyBytes = 0 }, "max_key_bytes", "must be >= 1"},
		{"max_key_bytes over bulk", func(c *Config) { c.MaxKeyBytes = 1<<20 + 1 }, "max_key_bytes", "must be <= max_bulk_bytes 1048576"},
		{"max_value_bytes zero", func(c *Config) { c.MaxValueBytes = 0 }, "max_value_bytes", "must be >= 1"},
		{"max_value_bytes over bulk", func(c *Config) { c.MaxBulkBytes = 4096; c.MaxKeyBytes = 100; c.MaxValueBytes = 4097 }, "max_value_bytes", "max_bulk_bytes 4096"},
		{"metrics_listen no port", func(c *Config) { c.MetricsListen = "localhost" }, "metrics_listen", `metrics_listen = "localhost": must be host:port`},
		{"metrics_listen bad port", func(c *Config) { c.MetricsListen = ":99999" }, "metrics_listen", "port must be a number within [0, 65535]"},
		{"metrics_listen same as listen", func(c *Config) { c.MetricsListen = c.Listen }, "metrics_listen", "must differ from listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			err := c.Validate()
			ve, ok := err.(*ValidationError)
			if !ok {
				t.Fatalf("Validate() = %v (%T), want one *ValidationError", err, err)
			}
			if ve.Key != tc.key {
				t.Errorf("key = %q, want %q (error %q)", ve.Key, tc.key, err)
			}
			if !strings.HasPrefix(err.Error(), "conf: "+tc.key+" = ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want prefix %q and substring %q", err, "conf: "+tc.key+" = ", tc.want)
			}
			if ve.Bound == "" {
				t.Errorf("error %q names no bound", err)
			}
		})
	}
}

func TestValidateBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"listen port 0", func(c *Config) { c.Listen = "127.0.0.1:0" }},
		{"listen all interfaces", func(c *Config) { c.Listen = ":6380" }},
		{"listen ipv6", func(c *Config) { c.Listen = "[::1]:6380" }},
		{"announce hostname", func(c *Config) { c.Announce = "proxy-1.example:6380" }},
		{"announce ipv6", func(c *Config) { c.Announce = "[2001:db8::1]:6380" }},
		{"service_name longest", func(c *Config) { c.ServiceName = strings.Repeat("x", 128) }},
		{"service_name mymaster", func(c *Config) { c.ServiceName = "my-master_1.a" }},
		{"backend url forms", func(c *Config) {
			c.Backends = []string{"redis://a", "rediss://u:p@b:6380/15", "redis://[::1]:6379/", "c:1", "[::2]:6379"}
		}},
		{"node_timeout max", func(c *Config) { c.NodeTimeout = 10 * time.Second }},
		{"drift 0 and 0.1", func(c *Config) { c.DriftFactor = 0.1 }},
		{"ttl edges", func(c *Config) { c.MinTTL = time.Millisecond; c.MaxTTL = 24 * time.Hour; c.DefaultTTL = 24 * time.Hour }},
		{"min_ttl equals max_ttl", func(c *Config) { c.MinTTL = time.Second; c.MaxTTL = time.Second; c.DefaultTTL = time.Second }},
		{"default_ttl 0", func(c *Config) { c.DefaultTTL = 0 }},
		{"max_wait edges", func(c *Config) { c.MaxWait = 0 }},
		{"max_hold edges", func(c *Config) { c.MaxHold = 7 * 24 * time.Hour }},
		{"auth_fail edges", func(c *Config) { c.AuthFailLimit = 100000; c.AuthFailWindow = time.Hour }},
		{"idle_timeout 0", func(c *Config) { c.IdleTimeout = 0 }},
		{"int edges low", func(c *Config) {
			c.MaxClients, c.MaxArgs, c.MaxBulkBytes, c.MaxInlineBytes, c.MaxKeyBytes, c.MaxValueBytes = 1, 16, 4096, 1024, 1, 1
		}},
		{"int edges high", func(c *Config) {
			c.MaxClients, c.MaxArgs, c.MaxBulkBytes, c.MaxInlineBytes = 1_000_000, 1<<20, 512<<20, 1<<20
			c.MaxKeyBytes, c.MaxValueBytes = 512<<20, 512<<20
		}},
		{"dev with no backends", func(c *Config) { c.Dev = true; c.Backends = nil }},
		{"metrics_listen off", func(c *Config) { c.MetricsListen = "" }},
		{"metrics_listen forms", func(c *Config) { c.MetricsListen = ":9121" }},
		{"metrics_listen any port", func(c *Config) { c.Listen = "127.0.0.1:0"; c.MetricsListen = "127.0.0.1:0" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateReportsAll(t *testing.T) {
	c := valid()
	c.NodeTimeout = 0
	c.LogFormat = "xml"
	err := c.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Key != "node_timeout" {
		t.Fatalf("errors.As first = %v", err)
	}
	if !strings.Contains(err.Error(), "log_format") {
		t.Fatalf("joined error misses log_format: %v", err)
	}
}

func TestResolveSecrets(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		pass     string
		path     string
		wantPass string
		wantErr  string
	}{
		{"no file", "", "", "", ""},
		{"inline only", "inline", "", "inline", ""},
		{"crlf", "", file("crlf", "s3cret\r\nsecond line\n"), "s3cret", ""},
		{"lf", "", file("lf", "s3cret\n"), "s3cret", ""},
		{"no newline", "", file("bare", "s3cret"), "s3cret", ""},
		{"keeps inner spaces", "", file("spaces", " a b \n"), " a b ", ""},
		{"both set", "inline", file("both", "s3cret\n"), "", "both set"},
		{"missing file", "", filepath.Join(dir, "nope"), "", "requirepass_file"},
		{"empty file", "", file("empty", ""), "", "first line is empty"},
		{"empty first line", "", file("blank", "\r\nlater\n"), "", "first line is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.RequirePass, c.RequirePassFile = tc.pass, tc.path
			err := c.ResolveSecrets()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ResolveSecrets() = %v, want error containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveSecrets: %v", err)
			}
			if c.RequirePass != tc.wantPass {
				t.Fatalf("RequirePass = %q, want %q", c.RequirePass, tc.wantPass)
			}
		})
	}
}

func TestApplyEnv(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name               string
		env                map[string]string
		pass, file         string
		wantPass, wantFile string
	}{
		{"unset", nil, "filepw", "", "filepw", ""},
		{"overrides inline", map[string]string{EnvRequirePass: "envpw"}, "filepw", "", "envpw", ""},
		{"overrides file", map[string]string{EnvRequirePass: "envpw"}, "", "/run/pw", "envpw", ""},
		{"empty ignored", map[string]string{EnvRequirePass: ""}, "filepw", "", "filepw", ""},
		{"other vars ignored", map[string]string{"REDLOCK_PROXY_LISTEN": ":1"}, "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.RequirePass, c.RequirePassFile = tc.pass, tc.file
			c.ApplyEnv(env(tc.env))
			if c.RequirePass != tc.wantPass || c.RequirePassFile != tc.wantFile {
				t.Fatalf("got pass %q file %q, want %q %q", c.RequirePass, c.RequirePassFile, tc.wantPass, tc.wantFile)
			}
			if c.Listen != valid().Listen {
				t.Fatalf("ApplyEnv changed listen")
			}
		})
	}
}

func TestStringHidesSecrets(t *testing.T) {
	const secret = "S3CR3T"
	for _, tc := range []struct {
		name    string
		backend string
		shown   string // how the backend should appear
	}{
		{"user and password", "redis://user:" + secret + "@host:6379", "redis://user:xxxxx@host:6379"},
		{"password only", "redis://:" + secret + "@host:6379/1", "redis://:xxxxx@host:6379/1"},
		{"lone user", "rediss://" + secret + "@host", "rediss://xxxxx@host"},
		{"unparseable url", "redis://u:" + secret + "@host:bad", "redis://xxxxx@host:bad"},
		{"no scheme", "u:" + secret + "@host:6379", "xxxxx@host:6379"},
		{"no credentials", "redis://host:6379", "redis://host:6379"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.RequirePass = secret
			c.Backends = append(c.Backends, tc.backend)
			for _, s := range []string{c.String(), c.GoString(), fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c)} {
				if strings.Contains(s, secret) {
					t.Fatalf("output leaks the secret: %s", s)
				}
				if !strings.Contains(s, "requirepass=<set>") {
					t.Fatalf("output lacks requirepass=<set>: %s", s)
				}
				if !strings.Contains(s, tc.shown) {
					t.Fatalf("output lacks %q: %s", tc.shown, s)
				}
			}
			if err := c.Validate(); err != nil && strings.Contains(err.Error(), secret) {
				t.Fatalf("validation error leaks the secret: %v", err)
			}
		})
	}
	if s := Default().String(); !strings.Contains(s, "requirepass=<unset>") {
		t.Fatalf("default String lacks requirepass=<unset>: %s", s)
	}
}

func TestStringNamesEveryKey(t *testing.T) {
	s := valid().String()
	for _, k := range keys() {
		if !strings.Contains(s, " "+k+"=") && !strings.HasPrefix(s, k+"=") {
			t.Errorf("String() lacks %q: %s", k, s)
		}
	}
	if !strings.Contains(s, "max_ttl=1m ") || !strings.Contains(s, "node_timeout=50ms ") {
		t.Errorf("durations not in short form: %s", s)
	}
}

func TestChanges(t *testing.T) {
	old := valid()
	old.RequirePass = "old-secret"
	if got := Changes(old, old); len(got) != 0 {
		t.Fatalf("Changes(c, c) = %v, want none", got)
	}
	cur := old
	cur.Backends = append([]string(nil), old.Backends...)
	cur.LogLevel = "debug"
	cur.MaxClients = 5
	cur.RequirePass = "new-secret"
	cur.Backends[0] = "redis://u:other@10.0.0.1:6379" // differs only in its password
	got := Changes(old, cur)
	want := []Change{
		{Key: "backends", Old: "[redis://10.0.0.1:6379,redis://10.0.0.2:6379,10.0.0.3:6379]", New: "[redis://u:xxxxx@10.0.0.1:6379,redis://10.0.0.2:6379,10.0.0.3:6379]"},
		{Key: "log_level", Old: "info", New: "debug"},
		{Key: "max_clients", Old: "10000", New: "5"},
		{Key: "requirepass", Old: "<set>", New: "<set>"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Changes:\n got %+v\nwant %+v", got, want)
	}
	for _, ch := range got {
		if strings.Contains(ch.Old+ch.New, "secret") || strings.Contains(ch.Old+ch.New, "other") {
			t.Fatalf("change leaks a secret: %+v", ch)
		}
	}
}

func TestWarnings(t *testing.T) {
	backends := func(n int) []string {
		b := make([]string, n)
		for i := range b {
			b[i] = fmt.Sprintf("10.0.0.%d:6379", i+1)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want []string // substrings, each in some warning
		not  []string // substrings in no warning
	}{
		{"defaults with 3", func(c *Config) {}, nil, []string{"backends", "default_ttl", "protected_mode"}},
		{"1 backend", func(c *Config) { c.Backends = backends(1) }, []string{"fewer than 3"}, []string{"even"}},
		{"2 backends", func(c *Config) { c.Backends = backends(2) }, []string{"backends: 2 configured, quorum 2: fewer than 3", "an even count"}, nil},
		{"4 backends", func(c *Config) { c.Backends = backends(4) }, []string{"backends: 4 configured, quorum 3: an even count", "than 3 backends"}, []string{"fewer than 3"}},
		{"5 backends", func(c *Config) { c.Backends = backends(5) }, nil, []string{"backends"}},
		{"dev", func(c *Config) { c.Dev = true; c.Backends = nil }, []string{"dev = true"}, []string{"ignored", "fewer"}},
		{"dev with backends", func(c *Config) { c.Dev = true }, []string{"3 configured backends are ignored"}, nil},
		{"default_ttl 0", func(c *Config) { c.DefaultTTL = 0 }, []string{"default_ttl = 0"}, nil},
		{"protected off no password", func(c *Config) { c.ProtectedMode = false }, []string{"protected_mode = false"}, nil},
		{"protected off with password", func(c *Config) { c.ProtectedMode = false; c.RequirePass = "x" }, nil, []string{"protected_mode"}},
		{"protected off with password file", func(c *Config) { c.ProtectedMode = false; c.RequirePassFile = "/p" }, nil, []string{"protected_mode"}},
		{"public listen no password", func(c *Config) { c.Listen = "0.0.0.0:6380" }, []string{"loopback clients only"}, nil},
		{"public listen with password", func(c *Config) { c.Listen = ":6380"; c.RequirePass = "x" }, nil, []string{"loopback"}},
		{"wildcard listen without announce", func(c *Config) { c.Listen = "0.0.0.0:6380" }, []string{"does not announce itself to Sentinel clients"}, nil},
		{"wildcard listen with announce", func(c *Config) { c.Listen = "[::]:6380"; c.Announce = "10.0.0.1:6380" }, nil, []string{"announce"}},
		{"allow_flush", func(c *Config) { c.AllowFlush = true }, []string{"allow_flush"}, nil},
		{"drift 0", func(c *Config) { c.DriftFactor = 0 }, []string{"drift_factor = 0"}, nil},
		{"idle 0", func(c *Config) { c.IdleTimeout = 0 }, []string{"idle_timeout = 0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			all := strings.Join(c.Warnings(), "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("warnings lack %q:\n%s", w, all)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(all, w) {
					t.Errorf("warnings contain %q:\n%s", w, all)
				}
			}
		})
	}
}

func TestFmtDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{2 * time.Hour, "2h"},
		{90 * time.Second, "90s"},
		{time.Minute, "1m"},
		{10 * time.Millisecond, "10ms"},
		{1500 * time.Microsecond, "1500us"},
		{7, "7ns"},
		{-time.Second, "-1s"},
	} {
		if got := fmtDuration(tc.d); got != tc.want {
			t.Errorf("fmtDuration(%d) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// FuzzParse checks that no file makes Parse, Validate, String or Warnings
// panic, and that every Parse error carries the package prefix.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", `listen = "a:1"`, `backends = ["redis://u:p@h:1/2", "h:2"]`, `max_ttl = "1h"`,
		`max_clients = "x"`, "tls {\n}\n", `default_ttl = 0`, `drift_factor = 1e308`,
		`max_args = 1e30`, `listen = "${x}"`, "a = [\n", `max_ttl = "9999999h"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := Parse(src, "fuzz.hcl", Default())
		if err != nil {
			if !strings.HasPrefix(err.Error(), "conf: ") {
				t.Fatalf("error without prefix: %q", err)
			}
			return
		}
		_ = c.Validate()
		_ = c.String()
		_ = c.Warnings()
	})
}

func TestBlocks(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\r\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := `
backends = ["127.0.0.1:6379"]
tls {
  cert_file      = "/etc/rp/cert.pem"
  key_file       = "/etc/rp/key.pem"
  client_ca_file = "/etc/rp/ca.pem"
}
backend_tls {
  ca_file     = "/etc/rp/backend-ca.pem"
  server_name = "redis.internal"
}
user "orders" {
  password = "s3cret-orders"
  commands = ["LOCK", "UNLOCK", "EXTEND"]
  keys     = ["orders:*"]
}
user "ops" {
  password_file = "` + pwFile + `"
  commands      = ["*"]
  admin         = true
}
`
	c, err := Parse([]byte(src), "blocks.hcl", Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ResolveSecrets(); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.TLS == nil || c.TLS.ClientCAFile != "/etc/rp/ca.pem" || c.BackendTLS == nil || c.BackendTLS.ServerName != "redis.internal" {
		t.Fatalf("tls blocks: %+v %+v", c.TLS, c.BackendTLS)
	}
	if len(c.Users) != 2 || c.Users[0].Keys[0] != "orders:*" || c.Users[1].Password != "from-file" || !c.Users[1].Admin {
		t.Fatalf("users: %+v", c.Users)
	}
	for _, shown := range []string{c.String(), fmt.Sprintf("%#v", c)} {
		if strings.Contains(shown, "s3cret-orders") || strings.Contains(shown, "from-file") {
			t.Fatalf("a user password is shown: %s", shown)
		}
	}
	changed := c
	changed.Users = slices.Clone(c.Users)
	changed.Users[0].Password = "new"
	if len(Changes(c, changed)) != 1 {
		t.Fatal("a changed user password is not a change")
	}

	bad := []struct{ src, key string }{
		{"tls {\n cert_file = \"a\"\n}", "tls"},
		{"backend_tls {\n cert_file = \"a\"\n}", "backend_tls"},
		{"user \"u\" {\n commands = [\"*\"]\n}", `user u`},
		{"user \"u\" {\n password = \"p\"\n}", `user u`},
		{"user \"u\" {\n password = \"p\"\n commands = [\"*\"]\n}\nuser \"u\" {\n password = \"p\"\n commands = [\"*\"]\n}", `user u`},
	}
	for _, b := range bad {
		c, err := Parse([]byte("backends = [\"127.0.0.1:6379\"]\n"+b.src), "bad.hcl", Default())
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), b.key) {
			t.Errorf("%q: err = %v, want one naming %q", b.src, err, b.key)
		}
	}
}

// keys returns the HCL keys a config file may set, sorted.
func keys() []string {
	keys := make([]string, 0, len(settings))
	for _, s := range settings {
		keys = append(keys, s.key)
	}
	slices.Sort(keys)
	return keys
}
