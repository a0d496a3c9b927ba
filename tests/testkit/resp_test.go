package testkit

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
)

// TestParseReply checks the tests' own RESP parser.
func TestParseReply(t *testing.T) {
	cases := []struct {
		in   string
		want string
	}{
		{"+OK\r\n", `"OK"`},
		{"-ERR x\r\n", `error:"ERR x"`},
		{":-12\r\n", `-12`},
		{"$3\r\na\r\n\r\n", `"a\r\n"`},
		{"$-1\r\n", `<nil>`},
		{"*-1\r\n", `<nil>`},
		{"_\r\n", `<nil>`},
		{"*3\r\n$2\r\nab\r\n:5\r\n_\r\n", `[]interface {}{"ab", 5, interface {}(nil)}`},
		{"%1\r\n+proto\r\n:3\r\n", `map[interface {}]interface {}{"proto":3}`},
		{"#t\r\n", `true`},
		{",1.5\r\n", `1.5`},
		{"!3\r\nERR\r\n", `error:"ERR"`},
		{"=7\r\ntxt:abc\r\n", `testkit.Verbatim{Format:"txt", Text:"abc"}`},
		{"~1\r\n:1\r\n", `[]interface {}{1}`},
		{"|1\r\n+a\r\n+b\r\n:7\r\n", `7`},
	}
	for _, tc := range cases {
		v, err := ParseReply(bufio.NewReader(strings.NewReader(tc.in)))
		if err != nil {
			t.Errorf("parse %q: %v", tc.in, err)
			continue
		}
		got := fmt.Sprintf("%#v", v)
		if e, ok := v.(Error); ok {
			got = fmt.Sprintf("error:%q", string(e))
		}
		if got != tc.want {
			t.Errorf("parse %q = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "?\r\n", ":x\r\n", "$3\r\nab", "+OK\n", "$2\r\nabcd", "_x\r\n", "$-5\r\n", "*-2\r\n", "%-1\r\n"} {
		if v, err := ParseReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("parse %q = %#v, want an error", bad, v)
		}
	}
}
