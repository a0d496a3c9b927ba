package conf

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/gocty"
)

// EnvRequirePass is the environment variable ApplyEnv reads the password from.
const EnvRequirePass = "REDLOCK_PROXY_REQUIREPASS"

// maxFileErrors caps how many problems one file reports.
const maxFileErrors = 10

// LoadFile reads an HCL file over base: keys present in the file replace
// base's values, absent keys keep them.
func LoadFile(path string, base Config) (Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("conf: read config file: %w", err)
	}
	return Parse(src, path, base)
}

// Parse is LoadFile over bytes; filename is used in messages. On error it
// returns base unchanged and every problem found (up to ten), each naming
// the position and, where there is one, the key.
func Parse(src []byte, filename string, base Config) (Config, error) {
	file, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return base, diagsError(diags, "")
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok { // ParseHCL always yields native syntax; guard anyway.
		return base, fmt.Errorf("conf: %s: unsupported config syntax", filename)
	}

	var errs []error
	c := base
	c.Backends = slices.Clone(base.Backends) // never alias the caller's slice
	errs = append(errs, decodeBlocks(&c, body.Blocks)...)
	attrs := make([]*hclsyntax.Attribute, 0, len(body.Attributes))
	for _, a := range body.Attributes {
		attrs = append(attrs, a)
	}
	slices.SortFunc(attrs, func(a, b *hclsyntax.Attribute) int {
		return a.NameRange.Start.Byte - b.NameRange.Start.Byte
	})

	for _, a := range attrs {
		f, ok := settingByKey[a.Name]
		if !ok {
			msg := fmt.Sprintf("conf: %s: unknown key %q", pos(a.NameRange), a.Name)
			if s := suggest(a.Name); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			errs = append(errs, errors.New(msg))
			continue
		}
		if err := f.decode(&c, a.Name, a.Expr); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		if len(errs) > maxFileErrors {
			errs = append(errs[:maxFileErrors], fmt.Errorf("conf: %s: %d more errors", filename, len(errs)-maxFileErrors))
		}
		return base, errors.Join(errs...)
	}
	return c, nil
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

// decodeAs evaluates e (no variables, no functions) and converts it to T
// with HCL's usual conversions ("5" is a number, 5 is a string). It does what
// gohcl.DecodeExpression does; gohcl itself is not imported because it pulls
// in hclwrite and its go-cmp dependency, which go.sum does not hold.
func decodeAs[T any](key string, e hcl.Expression) (T, error) {
	var v T
	val, diags := e.Value(nil)
	if diags.HasErrors() {
		return v, diagsError(diags, key)
	}
	ty, err := gocty.ImpliedType(&v)
	if err != nil {
		panic("conf: unsuitable decode target: " + err.Error())
	}
	if val, err = convert.Convert(val, ty); err == nil {
		err = gocty.FromCtyValue(val, &v)
	}
	if err != nil {
		msg := err.Error()
		if _, isFloat := any(v).(float64); isFloat && strings.Contains(msg, "between") {
			msg = "number out of range" // cty spells out ±MaxFloat64 in full
		}
		return v, fmt.Errorf("conf: %s: %s: %s", pos(e.StartRange()), key, msg)
	}
	return v, nil
}

// diagsError turns HCL diagnostics into one error per problem, each
// "conf: file:line:col: [key: ]text".
func diagsError(diags hcl.Diagnostics, key string) error {
	var errs []error
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		where := ""
		if d.Subject != nil {
			where = pos(*d.Subject) + ": "
		}
		text := d.Summary
		if d.Detail != "" {
			text = d.Summary + ": " + d.Detail
		}
		if key != "" {
			text = key + ": " + text
		}
		errs = append(errs, errors.New("conf: "+where+text))
	}
	return errors.Join(errs...)
}

// pos renders the start of r as file:line:col.
func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// suggest returns the known key closest to name, if it is close enough to be
// a likely typo.
func suggest(name string) string {
	best, bestDist := "", 3
	for _, s := range settings {
		k := s.key
		if d := editDistance(name, k); d < bestDist || (d == bestDist && best != "" && k < best) {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ApplyEnv overrides c from the environment through lookup (main passes
// os.LookupEnv). REDLOCK_PROXY_REQUIREPASS, when set and non-empty, replaces
// RequirePass and clears RequirePassFile: the environment outranks the file.
// An empty value is ignored so that an exported-but-blank variable cannot
// silently remove a password.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) {
	if v, ok := lookup(EnvRequirePass); ok && v != "" {
		c.RequirePass = v
		c.RequirePassFile = ""
	}
}

// ResolveSecrets reads RequirePassFile into RequirePass when it is set. The
// password is the file's first line without its trailing "\r\n". It is an
// error to set both RequirePass and RequirePassFile, or for the file to be
// unreadable or its first line empty. Call it once, after flags.
func (c *Config) ResolveSecrets() error {
	if err := c.resolveUserSecrets(); err != nil {
		return err
	}
	if c.RequirePassFile == "" {
		return nil
	}
	if c.RequirePass != "" {
		return errors.New("conf: requirepass and requirepass_file are both set: use one")
	}
	data, err := os.ReadFile(c.RequirePassFile)
	if err != nil {
		return fmt.Errorf("conf: requirepass_file: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return fmt.Errorf("conf: requirepass_file = %q: first line is empty", c.RequirePassFile)
	}
	c.RequirePass = line
	return nil
}
