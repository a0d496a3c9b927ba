package conf

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The blocks of the file, decoded by gohcl from these tags (Parse). Their
// bounds are in blocks below; doc.go lists them.

// TLS is the client-facing TLS of the listener (block tls { … }).
type TLS struct {
	CertFile     string `hcl:"cert_file,optional"`      // PEM certificate chain
	KeyFile      string `hcl:"key_file,optional"`       // PEM private key
	ClientCAFile string `hcl:"client_ca_file,optional"` // when set, clients must present a certificate it signed
}

// BackendTLS is the TLS towards the backends (block backend_tls { … }); a
// rediss:// backend URL uses it, or the system roots when it is absent.
type BackendTLS struct {
	CAFile             string `hcl:"ca_file,optional"`   // PEM roots to verify the backends; system roots when empty
	CertFile           string `hcl:"cert_file,optional"` // client certificate, for backends that require one
	KeyFile            string `hcl:"key_file,optional"`
	ServerName         string `hcl:"server_name,optional"`          // overrides the name verified in the backend's certificate
	InsecureSkipVerify bool   `hcl:"insecure_skip_verify,optional"` // tests only: do not verify the backend's certificate
}

// User is one proxy-level user (block user "name" { … }), separate from
// the backends' credentials.
type User struct {
	Name         string   `hcl:"name,label"`
	Password     string   `hcl:"password,optional"`      // secret; or PasswordFile
	PasswordFile string   `hcl:"password_file,optional"` // file whose first line is the password
	Commands     []string `hcl:"commands,optional"`      // allowed commands, upper case; "*" for all
	Keys         []string `hcl:"keys,optional"`          // glob patterns of the keys it may touch; "*" for all
	Admin        bool     `hcl:"admin,optional"`         // may run admin commands (LOCKS, FLUSHDB, CLIENT LIST, …)
	// Scripts is how the user's scripts that are not recognised run:
	// "vote" or "recognised" (refused), as the scripts setting says; ""
	// takes "recognised" for a user limited to key patterns, else the
	// scripts setting (docs/configuration.md).
	Scripts string `hcl:"scripts,optional"`
}

// validateBlocks checks the blocks' bounds.
func (v *validator) blocks(c Config) {
	if t := c.TLS; t != nil {
		if t.CertFile == "" || t.KeyFile == "" {
			v.fail("tls", "{…}", "needs cert_file and key_file")
		}
	}
	if t := c.BackendTLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		v.fail("backend_tls", "{…}", "cert_file and key_file go together")
	}
	seen := map[string]bool{}
	for _, u := range c.Users {
		key := "user " + quoteIfNeeded(u.Name)
		switch {
		case u.Name == "" || strings.ContainsAny(u.Name, " \t\r\n"):
			v.fail("user", quoteIfNeeded(u.Name), "name must be non-empty without spaces")
		case seen[u.Name]:
			v.fail(key, "{…}", "defined twice")
		case u.Password == "" && u.PasswordFile == "":
			v.fail(key, "{…}", "needs password or password_file")
		case len(u.Commands) == 0:
			v.fail(key, "{…}", `needs commands = ["LOCK", "UNLOCK", …] (or ["*"])`)
		case u.Scripts != "" && u.Scripts != ScriptsVote && u.Scripts != ScriptsRecognised:
			v.fail(key+" scripts", u.Scripts, `must be "vote" or "recognised"`)
		}
		seen[u.Name] = true
	}
}

// resolveUserSecrets reads each user's password_file.
func (c *Config) resolveUserSecrets() error {
	users := slices.Clone(c.Users)
	for i := range users {
		u := &users[i]
		if u.PasswordFile == "" {
			continue
		}
		if u.Password != "" {
			return fmt.Errorf("conf: user %q: password and password_file are both set: use one", u.Name)
		}
		data, err := os.ReadFile(u.PasswordFile)
		if err != nil {
			return fmt.Errorf("conf: user %q: password_file: %w", u.Name, err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		if line = strings.TrimRight(line, "\r"); line == "" {
			return errors.New("conf: user " + u.Name + ": password_file: first line is empty")
		}
		u.Password = line
	}
	c.Users = users
	return nil
}

// blockPairs renders the blocks for String and Changes; passwords never.
func (c Config) blockPairs(redact bool) [][2]string {
	var out [][2]string
	tls := "<off>"
	if t := c.TLS; t != nil {
		tls = fmt.Sprintf("{cert_file=%s key_file=%s client_ca_file=%s}", quoteIfNeeded(t.CertFile), quoteIfNeeded(t.KeyFile), quoteIfNeeded(t.ClientCAFile))
	}
	out = append(out, [2]string{"tls", tls})
	btls := "<off>"
	if t := c.BackendTLS; t != nil {
		btls = fmt.Sprintf("{ca_file=%s cert_file=%s server_name=%s insecure_skip_verify=%t}", quoteIfNeeded(t.CAFile), quoteIfNeeded(t.CertFile), quoteIfNeeded(t.ServerName), t.InsecureSkipVerify)
	}
	out = append(out, [2]string{"backend_tls", btls})
	var users []string
	for _, u := range c.Users {
		pass := "<set>"
		if !redact {
			pass = u.Password
		}
		users = append(users, fmt.Sprintf("%s{password=%s commands=%s keys=%s admin=%t}", u.Name, pass,
			strings.Join(u.Commands, ","), strings.Join(u.Keys, ","), u.Admin))
	}
	out = append(out, [2]string{"users", "[" + strings.Join(users, " ") + "]"})
	return out
}
