package commands

import (
	"strings"
	"testing"
)

// TestOption: option agrees with upper-casing by strings.ToUpper, which
// the option parsers used before, Unicode case mapping included.
func TestOption(t *testing.T) {
	for _, s := range []string{
		"wait", "WAIT", "Token", "fence", "SESSION", "nx", "Px", "pxat", "ifeq", "keepttl",
		"", "W", "waits", "LOCK", "ſeſſion", "\u212aEEPTTL", "ıfeq", "ĳ", strings.Repeat("x", 17),
		"wait\x00", "ex ", "\xff",
	} {
		want := optionNames[strings.ToUpper(s)]
		if got := option([]byte(s)); got != want {
			t.Errorf("option(%q) = %q, want %q", s, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { option([]byte("pxat")) }); n != 0 {
		t.Errorf("option allocates %v times", n)
	}
}
