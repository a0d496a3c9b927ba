package conf

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// EnvRequirePass is the environment variable ApplyEnv reads the password from.
const EnvRequirePass = "REDLOCK_PROXY_REQUIREPASS"

// maxFileErrors caps how many problems one file reports.
const maxFileErrors = 10

// Load builds the effective configuration: the defaults, the file at
// path (when not ""), the environment through lookup (main passes
// os.LookupEnv), the flags given (flags may be nil); then it reads the
// password files and validates the result.
func Load(path string, lookup func(string) (string, bool), flags *Flags) (Config, error) {
	c := Default()
	if path != "" {
		var err error
		if c, err = LoadFile(path, c); err != nil {
			return c, err
		}
	}
	c.ApplyEnv(lookup)
	if flags != nil {
		flags.Apply(&c)
	}
	if err := c.ResolveSecrets(); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// LoadFile reads an HCL file over base: keys present in the file replace
// base's values, absent keys keep them.
func LoadFile(path string, base Config) (Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("conf: read config file: %w", err)
	}
	return Parse(src, path, base)
}

// fileType is Config as gohcl decodes a file into it: the same hcl tags,
// each setting's field an *hcl.Attribute (nil when the file does not set
// it, so that base's value stays), each block as Config declares it.
// gohcl checks the file against it: unknown keys and blocks (with "Did
// you mean"), labels, duplicates. Each present attribute's value is then
// decoded by gohcl into its Config field, a duration through its string.
var fileType = func() reflect.Type {
	t := reflect.TypeFor[Config]()
	var fields []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("hcl")
		if tag == "" {
			continue
		}
		if _, kind, _ := strings.Cut(tag, ","); kind == "optional" {
			f.Type = reflect.TypeFor[*hcl.Attribute]()
		}
		f.Tag = reflect.StructTag(`hcl:"` + tag + `"`)
		f.Index, f.Offset = nil, 0
		fields = append(fields, f)
	}
	return reflect.StructOf(fields)
}()

// Parse is LoadFile over bytes; filename is used in messages. On error it
// returns base unchanged and every problem found (up to ten), each naming
// the position and, where there is one, the key.
func Parse(src []byte, filename string, base Config) (Config, error) {
	file, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return base, diagsError(diags, nil)
	}
	body, _ := file.Body.(*hclsyntax.Body) // ParseHCL's body is always native syntax
	if diags := hugeNumbers(body); diags.HasErrors() {
		return base, diagsError(diags, body)
	}
	decoded := reflect.New(fileType).Elem()
	diags = gohcl.DecodeBody(file.Body, nil, decoded.Addr().Interface())

	c := base
	c.Backends = slices.Clone(base.Backends) // never alias the caller's slice
	for i := range fileType.NumField() {
		f, v := fileType.Field(i), decoded.Field(i)
		switch x := v.Interface().(type) {
		case *hcl.Attribute:
			if x != nil {
				s := settingByKey[x.Name]
				diags = append(diags, s.decode(x.Expr, s.value(&c))...)
			}
		case *TLS:
			if x != nil {
				c.TLS = x
			}
		case *BackendTLS:
			if x != nil {
				c.BackendTLS = x
			}
		case []User:
			if len(x) > 0 {
				c.Users = x
			}
		default:
			panic("conf: field " + f.Name + " is neither a setting nor a known block")
		}
	}
	if diags.HasErrors() {
		return base, diagsError(diags, body)
	}
	return c, nil
}

// maxExponent bounds a number literal's binary exponent (2^1100 is about
// 1e331, beyond float64).
const maxExponent = 1100

// hugeNumbers refuses number literals far beyond float64, such as 1e99999999:
// HCL holds them exactly, and turning one into a string (max_ttl = 1e99999999,
// a duration read as a string) would spell out every digit.
func hugeNumbers(body *hclsyntax.Body) hcl.Diagnostics {
	var diags hcl.Diagnostics
	hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		lit, ok := n.(*hclsyntax.LiteralValueExpr)
		if !ok || lit.Val.Type() != cty.Number || !lit.Val.IsKnown() || lit.Val.IsNull() {
			return nil
		}
		if exp := lit.Val.AsBigFloat().MantExp(nil); exp > maxExponent || exp < -maxExponent {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "number out of range", Subject: lit.SrcRange.Ptr()})
		}
		return nil
	})
	return diags
}

// decode evaluates e (no variables, no functions) into dst with gohcl, as
// HCL converts ("5" is a number, 5 is a string); a duration is a string
// in Go syntax, and "0" or 0 is zero. Signs are kept: Validate rejects
// negatives with the bound.
func (s *setting) decode(e hcl.Expression, dst reflect.Value) hcl.Diagnostics {
	if s.typ != durationType {
		v := reflect.New(s.typ)
		diags := gohcl.DecodeExpression(e, nil, v.Interface())
		for _, d := range diags {
			if s.typ.Kind() == reflect.Float64 && strings.Contains(d.Detail, "between") {
				d.Detail = "number out of range" // cty spells out ±MaxFloat64 in full
			}
		}
		if !diags.HasErrors() {
			dst.Set(v.Elem())
		}
		return diags
	}
	var text string
	if diags := gohcl.DecodeExpression(e, nil, &text); diags.HasErrors() {
		return diags
	}
	v, err := s.parse(text)
	if err != nil {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: err.Error(), Subject: e.Range().Ptr()}}
	}
	dst.Set(v)
	return nil
}

// diagsError turns HCL diagnostics into one error per problem, in file
// order, at most maxFileErrors, each "conf: file:line:col: [key: ]text".
// The key is the attribute the problem lies in ("tls.cert_file"), found
// in body, unless the text names it already.
func diagsError(diags hcl.Diagnostics, body *hclsyntax.Body) error {
	diags = slices.DeleteFunc(slices.Clone(diags), func(d *hcl.Diagnostic) bool { return d.Severity != hcl.DiagError })
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int { return start(a) - start(b) })
	var errs []error
	for i, d := range diags {
		if i > 0 && d.Subject != nil && start(diags[i-1]) == start(d) {
			continue // one problem per place: "Variables not allowed", not also "value must be known"
		}
		where, text := "", d.Summary
		switch {
		case d.Summary == "Unsuitable value type": // the detail says which
			text = strings.TrimPrefix(d.Detail, "Unsuitable value: ")
		case d.Detail != "":
			text += ": " + d.Detail
		}
		if d.Subject != nil {
			where = pos(*d.Subject) + ": "
			if key := keyAt(body, *d.Subject, ""); key != "" && !strings.Contains(text, strconv.Quote(key)) {
				text = key + ": " + text
			}
		}
		errs = append(errs, errors.New("conf: "+where+text))
	}
	if n := len(errs) - maxFileErrors; n > 0 {
		errs = append(errs[:maxFileErrors], fmt.Errorf("conf: %d more errors", n))
	}
	return errors.Join(errs...)
}

// start is where a diagnostic's subject starts in its file (-1: nowhere).
func start(d *hcl.Diagnostic) int {
	if d.Subject == nil {
		return -1
	}
	return d.Subject.Start.Byte
}

// keyAt names the attribute of body whose text holds r: "max_ttl", or
// "tls.cert_file" inside a block; "" when none does.
func keyAt(body *hclsyntax.Body, r hcl.Range, prefix string) string {
	if body == nil {
		return ""
	}
	for name, a := range body.Attributes {
		if a.SrcRange.ContainsOffset(r.Start.Byte) {
			return prefix + name
		}
	}
	for _, b := range body.Blocks {
		if b.Range().ContainsOffset(r.Start.Byte) {
			return keyAt(b.Body, r, prefix+b.Type+".")
		}
	}
	return ""
}

// pos renders the start of r as file:line:col.
func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
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
