package conf

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFileMistakes: what a user who mistypes gets from a file, start to
// end (Load: file, then Validate): the position, the key, and a
// suggestion or the bound.
func TestFileMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"misspelt key", "backends = [\"a:1\"]\nmax_tll = \"30s\"\n",
			`conf: proxy.hcl:2:1: Unsupported argument: An argument named "max_tll" is not expected here. Did you mean "max_ttl"?`},
		{"misspelt key in a block", "backends = [\"a:1\"]\ntls {\n  cert_fil = \"c.pem\"\n}\n",
			`conf: proxy.hcl:3:3: tls.cert_fil: Unsupported argument: An argument named "cert_fil" is not expected here. Did you mean "cert_file"?`},
		{"wrong type", "backends = [\"a:1\"]\nmax_clients = \"many\"\n",
			`conf: proxy.hcl:2:16: max_clients: a number is required`},
		{"wrong type in a block", "backends = [\"a:1\"]\nuser \"u\" {\n  admin = \"sometimes\"\n}\n",
			`conf: proxy.hcl:3:12: user.admin: a bool is required`},
		{"not a duration", "backends = [\"a:1\"]\nnode_timeout = 50\n",
			`conf: proxy.hcl:2:16: node_timeout: "50" is not a duration (use Go syntax such as "50ms", "30s", "1h")`},
		{"out of bound", "backends = [\"a:1\"]\nmax_hold = \"200h\"\n",
			`conf: max_hold = 200h: must be <= 168h`},
		{"out of a bound set by another key", "backends = [\"a:1\"]\nmax_bulk_bytes = 8192\nmax_key_bytes = 9000\n",
			`conf: max_key_bytes = 9000: must be <= max_bulk_bytes 8192`},
		{"unknown block", "backends = [\"a:1\"]\nusers \"u\" {\n}\n",
			`conf: proxy.hcl:2:1: Unsupported block type: Blocks of type "users" are not expected here. Did you mean "user"?`},
		{"second tls block", "backends = [\"a:1\"]\ntls {\n}\ntls {\n}\n",
			`conf: proxy.hcl:4:1: Duplicate tls block: Only one tls block is allowed. Another was defined at proxy.hcl:2,1-4.`},
		{"not a known value", "backends = [\"a:1\"]\nscripts = \"some\"\n",
			`conf: scripts = "some": must be one of vote, recognised`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, "proxy.hcl", tc.src)
			_, err := Load(p, noEnv, nil)
			if err == nil {
				t.Fatalf("Load succeeded, want %s", tc.want)
			}
			if got := strings.ReplaceAll(err.Error(), strings.TrimSuffix(p, "proxy.hcl"), ""); got != tc.want {
				t.Fatalf("error\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestFileErrorsInOrder: several problems come one per place, in file
// order, whatever order gohcl found them in.
func TestFileErrorsInOrder(t *testing.T) {
	src := "max_clients = \"x\"\nlog_level = debug\nstrict = \"y\"\nbogus = 1\nmax_args = \"z\"\n"
	for range 20 { // gohcl walks a map: the order must not depend on it
		_, err := Parse([]byte(src), "f.hcl", Default())
		lines := strings.Split(err.Error(), "\n")
		want := []string{"f.hcl:1:", "f.hcl:2:", "f.hcl:3:", "f.hcl:4:", "f.hcl:5:"}
		if len(lines) != len(want) {
			t.Fatalf("want one error per line:\n%v", err)
		}
		for i, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Fatalf("error %d = %q, want %q first:\n%v", i, lines[i], w, err)
			}
		}
	}
	var many strings.Builder
	for i := range 15 {
		fmt.Fprintf(&many, "nope%d = 1\n", i)
	}
	_, err := Parse([]byte(many.String()), "f.hcl", Default())
	if n := strings.Count(err.Error(), "\n") + 1; n != maxFileErrors+1 || !strings.HasSuffix(err.Error(), "conf: 5 more errors") {
		t.Fatalf("15 problems: %d lines, want %d ending in a count:\n%v", n, maxFileErrors+1, err)
	}
}

func noEnv(string) (string, bool) { return "", false }

// TestFlags: every setting has its flag, parsed as the file is, applied
// over the file and the environment.
func TestFlags(t *testing.T) {
	parse := func(t *testing.T, args ...string) (*Flags, error) {
		t.Helper()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := NewFlags(fs)
		return f, fs.Parse(args)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	NewFlags(fs)
	for _, s := range settings {
		name := strings.ReplaceAll(s.key, "_", "-")
		switch s.key {
		case "backends":
			name = "backend"
		case "requirepass":
			if fs.Lookup("requirepass") != nil {
				t.Error("the password has a flag: it would show in ps")
			}
			continue
		}
		if fs.Lookup(name) == nil {
			t.Errorf("setting %s has no flag -%s", s.key, name)
		}
	}

	file := writeFile(t, "proxy.hcl", "backends = [\"a:1\", \"b:1\", \"c:1\"]\nmax_clients = 50\nlisten = \"127.0.0.1:7000\"\n")
	env := func(k string) (string, bool) { return "from-env", k == EnvRequirePass }
	f, err := parse(t, "-listen", "127.0.0.1:7001", "-backend", "x:1", "-backend", "y:1", "-max-ttl", "5s",
		"-dev", "-protected-mode=false", "-drift-factor", "0.05", "-scripts", "recognised", "-requirepass-file", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, env, f)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Listen, want.Backends, want.MaxClients = "127.0.0.1:7001", []string{"x:1", "y:1"}, 50
	want.MaxTTL, want.DefaultTTL = 5*time.Second, 5*time.Second // -max-ttl lowers default_ttl with it
	want.Dev, want.ProtectedMode, want.DriftFactor, want.Scripts = true, false, 0.05, ScriptsRecognised
	want.RequirePass = "from-env"
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("flags over file over env:\n got %s\nwant %s", c, want)
	}

	if f, err = parse(t, "-max-ttl", "5s", "-default-ttl", "10s"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file, noEnv, f); err == nil || !strings.Contains(err.Error(), "default_ttl = 10s") {
		t.Fatalf("-default-ttl above -max-ttl: %v, want a default_ttl bound error", err)
	}

	for _, bad := range [][]string{
		{"-max-ttl", "60"}, {"-max-clients", "many"}, {"-dev=maybe"}, {"-drift-factor", "x"}, {"-requirepass", "pw"},
	} {
		if _, err := parse(t, bad...); err == nil {
			t.Errorf("%v parsed", bad)
		}
	}
}

// TestScriptsRecognised: scripts = "recognised" refuses scripts that are
// not recognised; "catalog", its old name, means the same and is warned.
func TestScriptsRecognised(t *testing.T) {
	for _, tc := range []struct {
		value   string
		only    bool
		warning bool
	}{
		{"vote", false, false},
		{"recognised", true, false},
		{"catalog", true, true},
	} {
		c := mustParse(t, `scripts = "`+tc.value+`"`)
		c.Backends = valid().Backends
		if err := c.Validate(); err != nil {
			t.Fatalf("scripts = %q: %v", tc.value, err)
		}
		if c.RecognisedScriptsOnly() != tc.only {
			t.Errorf("scripts = %q: RecognisedScriptsOnly = %t", tc.value, !tc.only)
		}
		warned := strings.Contains(strings.Join(c.Warnings(), "\n"), `scripts = "catalog" is deprecated: it means scripts = "recognised"`)
		if warned != tc.warning {
			t.Errorf("scripts = %q: deprecation warned %t, want %t", tc.value, warned, tc.warning)
		}
	}
}

// TestDeclarations: each setting is declared whole, and a bound that
// names another key is kept by the defaults.
func TestDeclarations(t *testing.T) {
	for _, s := range settings {
		if s.doc == "" {
			t.Errorf("%s has no doc tag", s.key)
		}
		numeric := s.typ.Kind() == reflect.Int || s.typ.Kind() == reflect.Float64 || s.typ == durationType
		if numeric && s.bound.lo == nil {
			t.Errorf("%s is a number without a bound", s.key)
		}
		if s.typ.Kind() == reflect.String && s.bound.oneOf == nil && s.bound.check == nil && s.key != "requirepass" && s.key != "requirepass_file" {
			t.Errorf("%s is a string with neither a list of values nor a check", s.key)
		}
	}
	for _, bad := range []string{"[1, 2", "1..2", "[1, x2]", "~ 3"} {
		s := &setting{key: "k", typ: reflect.TypeFor[int]()}
		if err := s.parseBound(bad); err == nil {
			t.Errorf("bound %q parsed", bad)
		}
	}
}
