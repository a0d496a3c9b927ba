package lua

import "testing"

// TestParseExpireOptions: EXPIRE's options and Redis 7's replies to bad
// ones (texts as redis-server 7.0 answers them).
func TestParseExpireOptions(t *testing.T) {
	for _, c := range []struct {
		opts []string
		want ExpireOptions
		err  string
	}{
		{nil, ExpireOptions{}, ""},
		{[]string{"nx"}, ExpireOptions{NX: true}, ""},
		{[]string{"XX", "gt", "GT"}, ExpireOptions{XX: true, GT: true}, ""},
		{[]string{"Lt", "xx"}, ExpireOptions{XX: true, LT: true}, ""},
		{[]string{"NX", "XX"}, ExpireOptions{}, "ERR NX and XX, GT or LT options at the same time are not compatible"},
		{[]string{"GT", "NX"}, ExpireOptions{}, "ERR NX and XX, GT or LT options at the same time are not compatible"},
		{[]string{"GT", "LT"}, ExpireOptions{}, "ERR GT and LT options at the same time are not compatible"},
		{[]string{"NX", "foo"}, ExpireOptions{}, "ERR Unsupported option foo"},
	} {
		got, err := ParseExpireOptions(c.opts)
		switch {
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%q: error %v, want %q", c.opts, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q = %+v, %v; want %+v", c.opts, got, err, c.want)
		}
	}
	// Allows, on a key with expiry cur (0: none) and a new one at 100.
	for _, c := range []struct {
		o    ExpireOptions
		cur  int64
		want bool
	}{
		{ExpireOptions{}, 0, true}, {ExpireOptions{NX: true}, 0, true}, {ExpireOptions{NX: true}, 50, false},
		{ExpireOptions{XX: true}, 0, false}, {ExpireOptions{XX: true}, 50, true},
		{ExpireOptions{GT: true}, 0, false}, {ExpireOptions{GT: true}, 50, true}, {ExpireOptions{GT: true}, 100, false},
		{ExpireOptions{LT: true}, 0, true}, {ExpireOptions{LT: true}, 150, true}, {ExpireOptions{LT: true}, 100, false},
		{ExpireOptions{XX: true, LT: true}, 0, false},
	} {
		if got := c.o.Allows(c.cur, 100); got != c.want {
			t.Errorf("%+v.Allows(%d, 100) = %v, want %v", c.o, c.cur, got, c.want)
		}
	}
}
