package conf

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TLS is the client-facing TLS of the listener (block tls { … }).
type TLS struct {
	CertFile     string // PEM certificate chain
	KeyFile      string // PEM private key
	ClientCAFile string // when set, clients must present a certificate it signed
}

// BackendTLS is the TLS towards the backends (block backend_tls { … }); a
// rediss:// backend URL uses it, or the system roots when it is absent.
type BackendTLS struct {
	CAFile             string // PEM roots to verify the backends; system roots when empty
	CertFile           string // client certificate, for backends that require one
	KeyFile            string
	ServerName         string // overrides the name verified in the backend's certificate
	InsecureSkipVerify bool   // tests only: do not verify the backend's certificate
}

// User is one proxy-level user (block user "name" { … }), separate from
// the backends' credentials.
type User struct {
	Name         string
	Password     string   // secret; or PasswordFile
	PasswordFile string   // file whose first line is the password
	Commands     []string // allowed commands, upper case; "*" for all
	Keys         []string // glob patterns of the keys it may touch; "*" for all
	Admin        bool     // may run admin commands (LOCKS, FLUSHDB, CLIENT LIST, …)
}

// blockField decodes one attribute of a block into its struct.
type blockField[T any] func(v *T, key string, e hcl.Expression) error

func blockAttr[T, F any](ptr func(*T) *F) blockField[T] {
	return func(v *T, key string, e hcl.Expression) error {
		x, err := decodeAs[F](key, e)
		if err == nil {
			*ptr(v) = x
		}
		return err
	}
}

var tlsFields = map[string]blockField[TLS]{
	"cert_file":      blockAttr(func(t *TLS) *string { return &t.CertFile }),
	"key_file":       blockAttr(func(t *TLS) *string { return &t.KeyFile }),
	"client_ca_file": blockAttr(func(t *TLS) *string { return &t.ClientCAFile }),
}

var backendTLSFields = map[string]blockField[BackendTLS]{
	"ca_file":              blockAttr(func(t *BackendTLS) *string { return &t.CAFile }),
	"cert_file":            blockAttr(func(t *BackendTLS) *string { return &t.CertFile }),
	"key_file":             blockAttr(func(t *BackendTLS) *string { return &t.KeyFile }),
	"server_name":          blockAttr(func(t *BackendTLS) *string { return &t.ServerName }),
	"insecure_skip_verify": blockAttr(func(t *BackendTLS) *bool { return &t.InsecureSkipVerify }),
}

var userFields = map[string]blockField[User]{
	"password":      blockAttr(func(u *User) *string { return &u.Password }),
	"password_file": blockAttr(func(u *User) *string { return &u.PasswordFile }),
	"commands":      blockAttr(func(u *User) *[]string { return &u.Commands }),
	"keys":          blockAttr(func(u *User) *[]string { return &u.Keys }),
	"admin":         blockAttr(func(u *User) *bool { return &u.Admin }),
}

// decodeBlock fills v from the attributes of blk; unknown attributes and
// nested blocks are errors naming the block and the key.
func decodeBlock[T any](blk *hclsyntax.Block, fields map[string]blockField[T], v *T) []error {
	var errs []error
	for _, b := range blk.Body.Blocks {
		errs = append(errs, fmt.Errorf("conf: %s: %s: unknown block %q", pos(b.TypeRange), blk.Type, b.Type))
	}
	for name, a := range blk.Body.Attributes {
		f, ok := fields[name]
		if !ok {
			errs = append(errs, fmt.Errorf("conf: %s: %s: unknown key %q", pos(a.NameRange), blk.Type, name))
			continue
		}
		if err := f(v, blk.Type+"."+name, a.Expr); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// decodeBlocks reads the tls, backend_tls and user blocks of a file into c.
func decodeBlocks(c *Config, blocks hclsyntax.Blocks) []error {
	var errs []error
	var users []User
	for _, blk := range blocks {
		switch {
		case blk.Type == "tls" && len(blk.Labels) == 0:
			t := TLS{}
			errs = append(errs, decodeBlock(blk, tlsFields, &t)...)
			c.TLS = &t
		case blk.Type == "backend_tls" && len(blk.Labels) == 0:
			t := BackendTLS{}
			errs = append(errs, decodeBlock(blk, backendTLSFields, &t)...)
			c.BackendTLS = &t
		case blk.Type == "user" && len(blk.Labels) == 1:
			u := User{Name: blk.Labels[0]}
			errs = append(errs, decodeBlock(blk, userFields, &u)...)
			users = append(users, u)
		case blk.Type == "user":
			errs = append(errs, fmt.Errorf("conf: %s: user block needs one name: user \"alice\" { … }", pos(blk.TypeRange)))
		case blk.Type == "tls" || blk.Type == "backend_tls":
			errs = append(errs, fmt.Errorf("conf: %s: %s block takes no name", pos(blk.TypeRange), blk.Type))
		default:
			errs = append(errs, fmt.Errorf("conf: %s: unknown block %q (blocks: tls, backend_tls, user)", pos(blk.TypeRange), blk.Type))
		}
	}
	if users != nil {
		c.Users = users
	}
	return errs
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
