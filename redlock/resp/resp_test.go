package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func reader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 32) }

func TestReadValues(t *testing.T) {
	long := strings.Repeat("x", 40) // longer than the reader's buffer
	for _, tc := range []struct {
		in   string
		want any
	}{
		// RESP2
		{"+OK\r\n", StatusOK},
		{"+QUEUED\r\n", Status("QUEUED")},
		{"+\r\n", Status("")},
		{"-ERR no\r\n", Error("ERR no")},
		{":42\r\n", int64(42)},
		{":-7\r\n", int64(-7)},
		{":9223372036854775807\r\n", int64(math.MaxInt64)},
		{":-9223372036854775808\r\n", int64(math.MinInt64)},
		{"$3\r\nabc\r\n", "abc"},
		{"$0\r\n\r\n", ""},
		{"$4\r\na\r\nb\r\n", "a\r\nb"},
		{"$40\r\n" + long + "\r\n", long},
		{"$-1\r\n", nil},
		{"*-1\r\n", nil},
		{"*0\r\n", []any{}},
		{"*2\r\n$1\r\na\r\n:1\r\n", []any{"a", int64(1)}},
		{"*2\r\n*1\r\n+OK\r\n*2\r\n$-1\r\n*0\r\n", []any{[]any{StatusOK}, []any{nil, []any{}}}},
		{"*3\r\n:1\r\n-WRONGTYPE x\r\n$1\r\nv\r\n", []any{int64(1), Error("WRONGTYPE x"), "v"}},
		// RESP3
		{"_\r\n", nil},
		{"#t\r\n", true},
		{"#f\r\n", false},
		{",1.5\r\n", "1.5"},
		{",inf\r\n", "inf"},
		{"(123456789012345678901234\r\n", "123456789012345678901234"},
		{"=8\r\ntxt:some\r\n", "some"},
		{"!21\r\nSYNTAX invalid syntax\r\n", Error("SYNTAX invalid syntax")},
		{"%1\r\n+id\r\n:7\r\n", []any{Status("id"), int64(7)}},
		{"%2\r\n$1\r\na\r\n%1\r\n$1\r\nb\r\n:2\r\n$1\r\nc\r\n~0\r\n", []any{"a", []any{"b", int64(2)}, "c", []any{}}},
		{"~1\r\n$1\r\nx\r\n", []any{"x"}},
		{">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n", Push{"message", "ch", "m"}},
		{">2\r\n$10\r\ninvalidate\r\n_\r\n", Push{"invalidate", nil}},
		{">2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n", Push{"invalidate", []any{"a", "b"}}},
		{"|1\r\n+ttl\r\n:3\r\n+after\r\n", Status("after")},
		{"*2\r\n|1\r\n+k\r\n+v\r\n:1\r\n:2\r\n", []any{int64(1), int64(2)}},
	} {
		got, err := Read(reader(tc.in))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Read(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
}

// TestReadStream: replies follow one another with nothing between them.
func TestReadStream(t *testing.T) {
	br := reader("+OK\r\n:1\r\n$3\r\nabc\r\n-ERR x\r\n*1\r\n:2\r\n")
	want := []any{StatusOK, int64(1), "abc", Error("ERR x"), []any{int64(2)}}
	for i, w := range want {
		if got, err := Read(br); err != nil || !reflect.DeepEqual(got, w) {
			t.Fatalf("reply %d = %#v, %v; want %#v", i, got, err, w)
		}
	}
	if _, err := Read(br); err != io.EOF {
		t.Fatalf("after the last reply: %v, want io.EOF", err)
	}
}

// TestReadMalformed: bytes that are not RESP give an error, never a panic
// or a wait for more input than the stream has.
func TestReadMalformed(t *testing.T) {
	deep := strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n"
	for _, tc := range []struct {
		in    string
		proto bool // a protocol error, not the stream's end
	}{
		{"?\r\n", true},
		{"\r\n", true},
		{"+OK\n", true},
		{"+OK\rx\n", true},
		{":\r\n", true},
		{":12a\r\n", true},
		{":9223372036854775808\r\n", true},
		{":-9223372036854775809\r\n", true},
		{":99999999999999999999\r\n", true},
		{"#x\r\n", true},
		{"$x\r\n", true},
		{"$-2\r\n", true},
		{"$\r\n", true},
		{"$-\r\n", true},
		{"$536870913\r\n", true},
		{"*536870913\r\n", true},
		{"%268435457\r\n", false}, // within the bound: doubled, it ends with the stream
		{"*-2\r\n", true},
		{"*x\r\n", true},
		{"$3\r\nabcde\r\n", true},
		{"$3\r\nabc", false},
		{"$3\r\nab", false},
		{"$40\r\n" + strings.Repeat("x", 40) + "xx", true},
		{"$40\r\n" + strings.Repeat("x", 20), false},
		{"*2\r\n:1\r\n", false},
		{"*2\r\n:1\r\n?\r\n", true},
		{"*1000000\r\n:1\r\n", false}, // a huge declared array, little sent
		{"+OK", false},
		{"", false},
		{"+" + strings.Repeat("x", 40) + "\r\n", true}, // longer than the buffer
		{deep, false},                                  // skipped whole: ErrTooDeep
		{deep[:len(deep)-4], false},                    // cut short while skipped
		{"*2\r\n" + deep + "?\r\n", true},              // bad framing while skipped
	} {
		t.Run(fmt.Sprintf("%.20q", tc.in), func(t *testing.T) {
			v, err := Read(reader(tc.in))
			if err == nil {
				t.Fatalf("Read(%q) = %#v, want an error", tc.in, v)
			}
			if got := errors.Is(err, ErrProtocol); got != tc.proto {
				t.Fatalf("Read(%q): %v; protocol error %v, want %v", tc.in, err, got, tc.proto)
			}
		})
	}
}

// TestReadSkipsPastBounds: a well-framed reply nested too deep or larger
// than the bound is read whole and answered ErrTooDeep or ErrTooLarge, and
// the reply after it reads as it should: one caller's reply does not break
// the connection for the others.
func TestReadSkipsPastBounds(t *testing.T) {
	nest := func(n int, leaf string) string { return strings.Repeat("*1\r\n", n) + leaf }
	long := strings.Repeat("x", 100) // longer than the reader's buffer
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want error
	}{
		{"deep", nest(maxDepth+1, ":1\r\n"), MaxReply, ErrTooDeep},
		{"deep by far", nest(3*maxDepth, "$3\r\nabc\r\n"), MaxReply, ErrTooDeep},
		{"deep among siblings", "*3\r\n:1\r\n" + nest(maxDepth, "*2\r\n$1\r\na\r\n%1\r\n+k\r\n_\r\n") + "$1\r\nz\r\n", MaxReply, ErrTooDeep},
		{"deep in a map", "%2\r\n+a\r\n" + nest(maxDepth, "~1\r\n:1\r\n") + "+b\r\n:2\r\n", MaxReply, ErrTooDeep},
		{"deep in an attribute", "|1\r\n+a\r\n" + nest(maxDepth, ">1\r\n:1\r\n") + "+value\r\n", MaxReply, ErrTooDeep},
		{"deep with null leaves", nest(maxDepth, "*3\r\n$-1\r\n*-1\r\n#t\r\n"), MaxReply, ErrTooDeep},
		{"long bulk", "$100\r\n" + long + "\r\n", 50, ErrTooLarge},
		{"bulks past the total", "*3\r\n$40\r\n" + long[:40] + "\r\n$40\r\n" + long[:40] + "\r\n:7\r\n", 50, ErrTooLarge},
		{"long array", "*60\r\n" + strings.Repeat(":1\r\n", 60), 50, ErrTooLarge},
		{"long nested map", "*2\r\n%30\r\n" + strings.Repeat("+k\r\n:1\r\n", 30) + "$1\r\nz\r\n", 50, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := reader(tc.in + "+NEXT\r\n:5\r\n")
			v, err := ReadMax(br, tc.max)
			if !errors.Is(err, tc.want) || !Skipped(err) || errors.Is(err, ErrProtocol) {
				t.Fatalf("ReadMax = %#v, %v; want %v", v, err, tc.want)
			}
			for _, w := range []any{Status("NEXT"), int64(5)} {
				if got, err := Read(br); err != nil || got != w {
					t.Fatalf("next reply = %#v, %v; want %#v", got, err, w)
				}
			}
			if _, err := Read(br); err != io.EOF {
				t.Fatalf("after the last reply: %v, want io.EOF", err)
			}
		})
	}
	// Within the bounds, the same shapes read in full.
	if v, err := Read(reader(nest(maxDepth, ":1\r\n"))); err != nil || v == nil {
		t.Fatalf("nested %d deep: %#v, %v", maxDepth, v, err)
	}
	if v, err := ReadMax(reader("$100\r\n"+long+"\r\n"), 100); err != nil || v != long {
		t.Fatalf("bulk of exactly the bound: %#v, %v", v, err)
	}
}

// TestEncodeRoundTrip: a command encodes as an array of bulk strings that
// Read gives back.
func TestEncodeRoundTrip(t *testing.T) {
	type named string
	args := []any{"SET", "k\r\nv", []byte("bytes"), 42, int64(-9), "", named("other"), 1.5}
	want := []any{"SET", "k\r\nv", "bytes", "42", "-9", "", "other", "1.5"}
	b := AppendCommand(nil, args...)
	b = AppendStrings(b, "DEL", []string{"a", "b"})
	b = AppendArrayLen(b, 3)
	b = AppendBulk(b, "PEXPIRE")
	b = AppendBulk(b, "k")
	b = AppendBulkInt(b, math.MinInt64)
	br := reader(string(b))
	for _, w := range [][]any{want, {"DEL", "a", "b"}, {"PEXPIRE", "k", "-9223372036854775808"}} {
		if got, err := Read(br); err != nil || !reflect.DeepEqual(got, w) {
			t.Fatalf("read back %#v, %v; want %#v", got, err, w)
		}
	}
	if got := string(AppendCommand(nil, "PING")); got != "*1\r\n$4\r\nPING\r\n" {
		t.Fatalf("PING encodes as %q", got)
	}
}

func FuzzRead(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n+a\r\n_\r\n", ">1\r\n#t\r\n", "|1\r\n+a\r\n+b\r\n:1\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		br := reader(s)
		for {
			if _, err := Read(br); err != nil {
				return
			}
		}
	})
}

// TestPTTL: a PTTL reply as a Duration keeps -1 and -2, and saturates a
// ttl past 292 years instead of wrapping it negative.
func TestPTTL(t *testing.T) {
	for ms, want := range map[int64]time.Duration{
		-2: -2, -1: -1, 0: 0, 1500: 1500 * time.Millisecond,
		math.MaxInt64 / int64(time.Millisecond):   math.MaxInt64 / time.Millisecond * time.Millisecond,
		math.MaxInt64/int64(time.Millisecond) + 1: math.MaxInt64,
		math.MaxInt64: math.MaxInt64,
	} {
		if got := PTTL(ms); got != want {
			t.Errorf("PTTL(%d) = %v, want %v", ms, got, want)
		}
	}
}
