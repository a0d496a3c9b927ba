package script

import (
	"fmt"
	"testing"
)

// TestShebangFlags: a script's shebang read as Redis 7.0.15 reads it; each
// error is the text redis-server answered to EVAL of the same script
// (without its "ERR ").
func TestShebangFlags(t *testing.T) {
	for _, tc := range []struct {
		src, want string // want: the flags, has, and the error
	}{
		{"return 1", "[] false <nil>"},
		{"#!lua\nreturn 1", "[] true <nil>"},
		{"#!lua\r\nreturn 1", "[] true <nil>"},
		{"#!lua flags=\nreturn 1", "[] true <nil>"},
		{"#!lua  flags=no-writes\nreturn 1", "[no-writes] true <nil>"},
		{"#!lua flags=no-writes flags=allow-oom\n", "[no-writes allow-oom] true <nil>"},
		{"#!lua flags=no-writes,allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\n", "[no-writes allow-oom allow-stale no-cluster allow-cross-slot-keys] true <nil>"},
		{"#!lua \"flags=no-writes\"\nreturn 1", "[no-writes] true <nil>"},
		{"#!lua 'flags=no-writes'\nreturn 1", "[no-writes] true <nil>"},
		{"#!\"lua\" flags=\"no-\\x77rites\"\n", "[no-writes] true <nil>"},
		{"#!lua flags=bogus\nreturn 1", "[] true Unexpected flag in script shebang: bogus"},
		{"#!lua flags=NO-WRITES\nreturn 1", "[] true Unexpected flag in script shebang: NO-WRITES"},
		{"#!lua flags=no-writes,\nreturn 1", "[] true Unexpected flag in script shebang: "},
		{"#!lua name=x\nreturn 1", "[] true Unknown lua shebang option: name=x"},
		{"#! lua\nreturn 1", "[] true Unexpected engine in script shebang: #!"},
		{"#!python\nreturn 1", "[] true Unexpected engine in script shebang: #!python"},
		{"#!lua", "[] true Invalid script shebang"},
		{"#!lua\treturn 1", "[] true Invalid script shebang"},
		{"#!lua \"flags=no-writes\nreturn 1", "[] true Invalid engine in script shebang"},
		{"#!lua \"flags=no-writes\"x\nreturn 1", "[] true Invalid engine in script shebang"},
	} {
		flags, has, err := ShebangFlags(tc.src)
		if flags == nil {
			flags = []string{}
		}
		if got := fmt.Sprint(flags, " ", has, " ", err); got != tc.want {
			t.Errorf("ShebangFlags(%q) = %s, want %s", tc.src, got, tc.want)
		}
	}
	for src, want := range map[string][2]bool{ // NoWrites, DeclaresWrites
		"return 1":                            {false, false},
		"#!lua\nreturn 1":                     {false, true},
		"#!lua flags=no-cluster\n":            {false, true},
		"#!lua flags=no-writes\n":             {true, false},
		"#!lua 'flags=no-writes'\n":           {true, false},
		"#!lua flags=allow-oom --no-writes\n": {false, true},
	} {
		s := New(src)
		if got := [2]bool{s.NoWrites(), s.DeclaresWrites()}; got != want {
			t.Errorf("%q: NoWrites, DeclaresWrites = %v, want %v", src, got, want)
		}
	}
}
