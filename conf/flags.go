package conf

import (
	"flag"
	"reflect"
)

// Flags are the settings' command-line flags: one per setting, named by
// its key with dashes (-max-ttl) unless its flag tag says otherwise
// (-backend, repeated; none for requirepass), its doc line and bound as
// the usage. Values parse as the file's do; Apply sets those given.
type Flags struct {
	values []*flagValue
}

// NewFlags declares every setting's flag on fs.
func NewFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	for _, s := range settings {
		if s.flag == "" {
			continue
		}
		v := &flagValue{s: s}
		usage := s.doc
		if s.bound.text != "" {
			usage += "; must be " + s.bound.text
		}
		fs.Var(v, s.flag, usage)
		f.values = append(f.values, v)
	}
	return f
}

// Apply sets over c the settings whose flags were given. A list flag
// (-backend) replaces the file's list with every value given. A smaller
// max_ttl from -max-ttl brings default_ttl down with it, unless
// -default-ttl is given too, so that -max-ttl 5s alone is valid.
func (f *Flags) Apply(c *Config) {
	given := map[string]bool{}
	for _, v := range f.values {
		if v.given {
			v.s.value(c).Set(v.val)
			given[v.s.key] = true
		}
	}
	if given["max_ttl"] && !given["default_ttl"] {
		c.DefaultTTL = min(c.DefaultTTL, c.MaxTTL)
	}
}

// flagValue is one setting's flag.Value.
type flagValue struct {
	s     *setting
	val   reflect.Value
	given bool
}

// String shows the value given, or the default (flag prints it as the
// default when it is not the zero value).
func (v *flagValue) String() string {
	switch {
	case v == nil || v.s == nil:
		return ""
	case v.given:
		return v.s.format(v.val, true)
	case v.s.def.IsZero():
		return ""
	}
	return v.s.format(v.s.def, true)
}

func (v *flagValue) Set(text string) error {
	if v.s.typ.Kind() == reflect.Slice { // repeated: each adds one
		if !v.given {
			v.val = reflect.MakeSlice(v.s.typ, 0, 1)
		}
		v.val, v.given = reflect.Append(v.val, reflect.ValueOf(text)), true
		return nil
	}
	x, err := v.s.parse(text)
	if err != nil {
		return err
	}
	v.val, v.given = x, true
	return nil
}

// IsBoolFlag lets -dev stand for -dev=true.
func (v *flagValue) IsBoolFlag() bool { return v.s.typ.Kind() == reflect.Bool }
