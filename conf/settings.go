package conf

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A setting is one key of Config, read once from its field's tags (see
// Config): the HCL key, the default, the bound, the flag and the doc line.
// Default, Parse, the flags, String, Changes and Validate all read settings.
type setting struct {
	key     string // HCL key, from the hcl tag
	field   int    // index in Config
	typ     reflect.Type
	flag    string            // flag name; "" for none
	doc     string            // one line, for -help
	def     reflect.Value     // the default, of typ
	bound   bound             // what Validate checks
	aliases map[string]string // deprecated value → the value it stands for
	secret  bool              // shown as <set>/<unset>, never as it is
	url     bool              // a backend URL: shown with its credentials hidden
}

// bound is a parsed bound tag. Numbers (int, float64, time.Duration) take
// an interval; strings a list of allowed values; a named check does the
// rest.
type bound struct {
	text   string // as written, for -help
	lo, hi *endpoint
	loOpen bool     // (lo, …: lo itself is outside
	zeroOK bool     // "0 or [lo, hi]"
	oneOf  []string // allowed strings
	check  func(c *Config, v *validator)
}

// endpoint is one end of an interval: a number, or another key's value
// ("[min_ttl, 24h]").
type endpoint struct {
	num float64
	ref string
}

var durationType = reflect.TypeFor[time.Duration]()

// settings lists Config's settings in field order: String's order and
// Validate's.
var settings = func() []*setting {
	var out []*setting
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		key, kind, _ := strings.Cut(f.Tag.Get("hcl"), ",")
		if kind != "optional" {
			continue // blocks, decoded by gohcl into their own types
		}
		out = append(out, newSetting(key, i, f))
	}
	return out
}()

// settingByKey finds a setting by its HCL key.
var settingByKey = func() map[string]*setting {
	m := make(map[string]*setting, len(settings))
	for _, s := range settings {
		if _, dup := m[s.key]; dup {
			panic("conf: duplicate key " + s.key)
		}
		m[s.key] = s
	}
	// A bound may name only a key of its type, and no chain of names may
	// come back to where it started (Validate would not end).
	var follow func(s *setting, depth int)
	follow = func(s *setting, depth int) {
		for _, e := range []*endpoint{s.bound.lo, s.bound.hi} {
			if e == nil || e.ref == "" {
				continue
			}
			if r := m[e.ref]; r == nil || r.typ != s.typ || depth > len(m) {
				panic("conf: " + s.key + ": bound names " + e.ref + ": not a key of its type, or a cycle")
			}
			follow(m[e.ref], depth+1)
		}
	}
	for _, s := range settings {
		follow(s, 0)
	}
	return m
}()

// newSetting reads one field's tags; a tag that does not parse is a
// programming error, so it panics (at start, and in every test).
func newSetting(key string, i int, f reflect.StructField) *setting {
	s := &setting{key: key, field: i, typ: f.Type, doc: f.Tag.Get("doc"), def: reflect.Zero(f.Type)}
	fail := func(what string, err error) { panic(fmt.Sprintf("conf: %s: %s tag: %v", key, what, err)) }
	s.flag = strings.ReplaceAll(key, "_", "-")
	switch fl := f.Tag.Get("flag"); fl {
	case "":
	case "-":
		s.flag = ""
	default:
		s.flag = fl
	}
	s.secret = f.Tag.Get("secret") == "true"
	s.url = f.Tag.Get("url") == "true"
	if d, ok := f.Tag.Lookup("default"); ok {
		v, err := s.parse(d)
		if err != nil {
			fail("default", err)
		}
		s.def = v
	}
	for _, a := range strings.Fields(f.Tag.Get("alias")) {
		old, now, _ := strings.Cut(a, "=")
		if s.aliases == nil {
			s.aliases = map[string]string{}
		}
		s.aliases[old] = now
	}
	if name := f.Tag.Get("check"); name != "" {
		if s.bound.check = checks[name]; s.bound.check == nil {
			fail("check", fmt.Errorf("no check %q", name))
		}
	}
	if b := f.Tag.Get("bound"); b != "" {
		if err := s.parseBound(b); err != nil {
			fail("bound", err)
		}
	}
	return s
}

// parse reads a value of the setting's type from text: a default, a flag.
// Durations are Go duration strings; "0" is zero.
func (s *setting) parse(text string) (reflect.Value, error) {
	v := reflect.New(s.typ).Elem()
	switch {
	case s.typ == durationType:
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			return v, fmt.Errorf("%q is not a duration (use Go syntax such as \"50ms\", \"30s\", \"1h\")", text)
		}
		v.SetInt(int64(d))
	case s.typ.Kind() == reflect.String:
		v.SetString(text)
	case s.typ.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return v, fmt.Errorf("%q is not true or false", text)
		}
		v.SetBool(b)
	case s.typ.Kind() == reflect.Int:
		n, err := strconv.Atoi(text)
		if err != nil {
			return v, fmt.Errorf("%q is not a whole number", text)
		}
		v.SetInt(int64(n))
	case s.typ.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return v, fmt.Errorf("%q is not a number", text)
		}
		v.SetFloat(x)
	case s.typ == reflect.TypeFor[[]string]():
		if text != "" {
			v.Set(reflect.ValueOf(strings.Split(text, ",")))
		}
	default:
		panic("conf: " + s.key + ": unsupported type " + s.typ.String())
	}
	return v, nil
}

// format shows a value of the setting's type as String does: durations
// in their largest exact unit, strings quoted when needed, lists of
// backends with their credentials hidden (when redact).
func (s *setting) format(v reflect.Value, redact bool) string {
	switch {
	case s.secret && redact:
		if v.String() != "" {
			return "<set>"
		}
		return "<unset>"
	case s.secret:
		return strconv.Quote(v.String()) // for comparison only, never printed
	case s.typ == durationType:
		return fmtDuration(time.Duration(v.Int()))
	case s.typ.Kind() == reflect.String && s.url && redact:
		return quoteIfNeeded(RedactBackend(v.String()))
	case s.typ.Kind() == reflect.String:
		return quoteIfNeeded(v.String())
	case s.typ.Kind() == reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case s.typ.Kind() == reflect.Slice:
		shown := make([]string, v.Len())
		for i := range shown {
			e := v.Index(i).String()
			if redact {
				e = RedactBackend(e)
			}
			shown[i] = quoteIfNeeded(e)
		}
		return "[" + strings.Join(shown, ",") + "]"
	}
	return fmt.Sprint(v.Interface())
}

func (s *setting) value(c *Config) reflect.Value {
	return reflect.ValueOf(c).Elem().Field(s.field)
}

// show is the setting's value in c as String shows it.
func (s *setting) show(c *Config, redact bool) string { return s.format(s.value(c), redact) }

// num is a number-typed setting's value in c as a float64 (exact for
// every bound this package has: durations up to 104 days).
func (s *setting) num(c *Config) float64 {
	v := s.value(c)
	if v.Kind() == reflect.Float64 {
		return v.Float()
	}
	return float64(v.Int())
}

// fmtNum shows a bound's number in the setting's type.
func (s *setting) fmtNum(x float64) string {
	switch {
	case s.typ == durationType:
		return fmtDuration(time.Duration(x))
	case s.typ.Kind() == reflect.Float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strconv.FormatInt(int64(x), 10)
}

// parseBound reads the bound tag: "[lo, hi]", "(lo, hi]", ">= lo",
// "0 or [lo, hi]" for numbers (each end a value or another key); "a|b|c"
// for strings.
func (s *setting) parseBound(text string) error {
	b := &s.bound
	b.text = text
	if s.typ.Kind() == reflect.String {
		b.oneOf = strings.Split(text, "|")
		return nil
	}
	var err error
	end := func(t string) *endpoint {
		t = strings.TrimSpace(t)
		if isKeyName(t) {
			return &endpoint{ref: t}
		}
		v, perr := s.parse(t)
		if perr != nil {
			err = perr
			return nil
		}
		if v.Kind() == reflect.Float64 {
			return &endpoint{num: v.Float()}
		}
		return &endpoint{num: float64(v.Int())}
	}
	rest, zeroOK := strings.CutPrefix(text, "0 or ")
	b.zeroOK = zeroOK
	switch {
	case strings.HasPrefix(rest, ">= "):
		b.lo = end(rest[3:])
	case strings.HasPrefix(rest, "> "):
		b.lo, b.loOpen = end(rest[2:]), true
	case len(rest) > 2 && strings.ContainsRune("[(", rune(rest[0])) && strings.HasSuffix(rest, "]"):
		lo, hi, ok := strings.Cut(rest[1:len(rest)-1], ",")
		if !ok {
			return fmt.Errorf("%q: want [lo, hi]", text)
		}
		b.lo, b.hi, b.loOpen = end(lo), end(hi), rest[0] == '('
	default:
		return fmt.Errorf("%q: want [lo, hi], (lo, hi], >= lo or > lo", text)
	}
	return err
}

// isKeyName reports text that names a key (lower case and '_') rather
// than a value.
func isKeyName(t string) bool {
	return t != "" && strings.Trim(t, "abcdefghijklmnopqrstuvwxyz_") == ""
}

// violation returns the bound that the setting's value in c breaks, or ""
// when it keeps it.
func (s *setting) violation(c *Config) string {
	b := &s.bound
	if b.oneOf != nil {
		v := s.value(c).String()
		if _, alias := s.aliases[v]; alias || slices.Contains(b.oneOf, v) {
			return ""
		}
		return "must be one of " + strings.Join(b.oneOf, ", ")
	}
	if b.lo == nil {
		return ""
	}
	x := s.num(c)
	if b.zeroOK && x == 0 {
		return ""
	}
	lo, loText := s.resolve(c, b.lo, true)
	var hi float64 = math.Inf(1)
	hiText := ""
	if b.hi != nil {
		hi, hiText = s.resolve(c, b.hi, false)
	}
	below := x < lo || (b.loOpen && x == lo)
	above := x > hi
	switch {
	case !below && !above && !math.IsNaN(x):
		return ""
	case b.zeroOK:
		return "must be 0 or within [" + loText + ", " + hiText + "]"
	case math.IsNaN(x):
		return "must be within [" + loText + ", " + hiText + "]"
	case below && b.loOpen:
		return "must be > " + loText
	case below:
		return "must be >= " + loText
	}
	return "must be <= " + hiText
}

// resolve gives an endpoint's number and how a message names it. An end
// that names another key takes that key's value when the value keeps its
// own bound ("min_ttl 10ms"), else that key's own end on the same side,
// so that one bad value gives one error.
func (s *setting) resolve(c *Config, e *endpoint, lower bool) (float64, string) {
	if e.ref == "" {
		return e.num, s.fmtNum(e.num)
	}
	r := settingByKey[e.ref]
	if r.violation(c) == "" {
		x := r.num(c)
		return x, e.ref + " " + s.fmtNum(x)
	}
	next, none := r.bound.hi, math.Inf(1)
	if lower {
		next, none = r.bound.lo, math.Inf(-1)
	}
	if next == nil {
		return none, "any"
	}
	return r.resolve(c, next, lower)
}

// canonical is the setting's value in c with a deprecated alias replaced
// by what it stands for.
func (s *setting) canonical(c *Config) string {
	v := s.value(c).String()
	if now, ok := s.aliases[v]; ok {
		return now
	}
	return v
}
