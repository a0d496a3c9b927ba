package tests

import (
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// Every SET option combination, and the edges of the expiry commands, run
// on one real redis-server and through the proxy (runOptCases): replies of
// the same type, errors with the same text.

// setStarts are the states a key starts in: absent, a string with and
// without expiry, a hash (another type) with and without expiry.
var setStarts = []struct {
	name  string
	steps []optStep
}{
	{"absent", nil},
	{"string with ttl", []optStep{st("SET", "$k", "old", "PX", "30000")}},
	{"string without ttl", []optStep{st("SET", "$k", "old")}},
	{"hash with ttl", []optStep{st("HSET", "$k", "f", "old"), st("PEXPIRE", "$k", "30000")}},
	{"hash without ttl", []optStep{st("HSET", "$k", "f", "old")}},
}

// setCombos: every start, condition (none, NX, XX), with and without GET,
// and every expiry (none, EX, PX, EXAT, PXAT, KEEPTTL, a deadline past);
// then what the key holds and its ttl.
func setCombos() []optCase {
	var out []optCase
	for _, start := range setStarts {
		for _, cond := range [][]string{nil, {"NX"}, {"XX"}} {
			for _, get := range [][]string{nil, {"GET"}} {
				for _, exp := range [][]string{nil, {"EX", "20"}, {"PX", "20000"}, {"EXAT", "{s+20}"}, {"PXAT", "{ms+20000}"}, {"KEEPTTL"}, {"EXAT", "{s-10}"}, {"PXAT", "{ms-10000}"}} {
					set := append([]string{"SET", "$k", "new"}, cond...)
					set = append(append(set, get...), exp...)
					steps := append([]optStep{}, start.steps...)
					steps = append(steps, st(set...), st("TYPE", "$k"), st("GET", "$k"), near(2000, "PTTL", "$k"))
					out = append(out, optCase{start.name + ": " + strings.Join(set[3:], " "), steps})
				}
			}
		}
	}
	return append(out, optCase{"GETSET on another type", []optStep{st("HSET", "$k", "f", "old"), st("GETSET", "$k", "new"), st("TYPE", "$k"), st("DEL", "$k"), st("GETSET", "$k", "new"), st("GETSET", "$k", "newer"), st("PTTL", "$k")}})
}

// expireEdges are the expiry commands' edges beyond TestSetExpireOptions.
var expireEdges = []optCase{
	{"GT and LT on no expiry, past", []optStep{st("SET", "$k", "v"), st("PEXPIRE", "$k", "-1", "GT"), st("EXISTS", "$k"), st("PEXPIREAT", "$k", "1", "XX"), st("EXISTS", "$k"), st("EXPIREAT", "$k", "{s-10}", "LT"), st("EXISTS", "$k")}},
	{"GT and LT on an expiry, past", []optStep{st("SET", "$k", "v", "EX", "20"), st("EXPIRE", "$k", "-1", "GT"), near(2, "TTL", "$k"), st("EXPIRE", "$k", "-1", "LT"), st("EXISTS", "$k")}},
	{"NX on an expiry, XX past", []optStep{st("SET", "$k", "v", "EX", "20"), st("EXPIREAT", "$k", "{s+40}", "NX"), near(2, "TTL", "$k"), st("PEXPIREAT", "$k", "1", "XX"), st("EXISTS", "$k")}},
	{"options repeated and in any case", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "20", "nx", "Nx"), near(2, "TTL", "$k"), st("EXPIRE", "$k", "30", "gt", "XX", "gT"), near(2, "TTL", "$k")}},
	{"empty option", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "20", ""), st("TTL", "$k")}},
	{"options before the time", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "soon", "NX", "GT"), st("PEXPIRE", "$k", "soon", "FOO"), st("TTL", "$k")}},
	{"integers as Redis reads them", []optStep{st("SET", "$k", "v"),
		st("EXPIRE", "$k", "+10"), st("EXPIRE", "$k", "010"), st("EXPIRE", "$k", "-0"), st("EXPIRE", "$k", " 10"), st("EXPIRE", "$k", "1e3"), st("EXPIRE", "$k", ""),
		st("EXPIREAT", "$k", "+1"), st("PEXPIREAT", "$k", "0x10"), st("TTL", "$k"),
		st("SET", "$k", "w", "EX", "+10"), st("SET", "$k", "w", "PX", "010"), st("SET", "$k", "w", "EXAT", "-0"), st("SET", "$k", "w", "PXAT", " 1"), st("GET", "$k")}},
	{"another type", []optStep{st("HSET", "$k", "f", "v"), st("EXPIRE", "$k", "20"), near(2, "TTL", "$k"), near(2, "EXPIRETIME", "$k"), st("EXPIRE", "$k", "10", "GT"), st("PEXPIRE", "$k", "10000", "LT"), near(2000, "PTTL", "$k"), st("PEXPIREAT", "$k", "1", "XX"), st("EXISTS", "$k")}},
	{"EXPIRETIME after an expiry is taken away", []optStep{st("SET", "$k", "v", "EX", "20"), st("SET", "$k", "w"), st("EXPIRETIME", "$k"), st("PEXPIRETIME", "$k"), st("DEL", "$k"), st("EXPIRETIME", "$k"), st("PEXPIRETIME", "$k")}},
	{"deadlines a few ms ahead", []optStep{
		st("SET", "$k", "v"), st("PEXPIREAT", "$k", "{ms+3}"), st("SET", "$k", "v"), st("EXPIREAT", "$k", "{s+0}", "LT"), st("EXISTS", "$k"),
		st("SET", "$k", "v", "PXAT", "{ms+3}"), st("SET", "$k", "v", "PX", "20000"), st("SET", "$k", "v", "XX", "PXAT", "{ms+3}"),
		st("SET", "$k", "v", "PX", "20000"), st("SET", "$k", "w", "GET", "PXAT", "{ms+3}"), st("SET", "$k", "v", "PX", "20000"), st("SET", "$k", "w", "NX", "PXAT", "{ms+3}")}},
	{"a deadline a few ms ahead with NX", []optStep{st("SET", "$k", "v", "NX", "PXAT", "{ms+3}")}},
	{"a deadline a few ms ahead with NX GET", []optStep{st("SET", "$k", "v", "NX", "GET", "PXAT", "{ms+3}")}},
	{"EXPIRE zero, negative, on absent", []optStep{st("EXPIRE", "$k", "0"), st("PEXPIRE", "$k", "-1"), st("EXPIREAT", "$k", "{s-10}"), st("EXISTS", "$k")}},
}

func TestSetExpireEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	ref := testkit.Dial(t, startRedis(t).Addr())
	p := startProxy(t, startCluster(t, 3), "")
	proxy := testkit.Dial(t, p.Addr())
	t.Run("SET", func(t *testing.T) { runOptCases(t, ref, proxy, "SETCOMBO", setCombos()) })
	t.Run("EXPIRE", func(t *testing.T) { runOptCases(t, ref, proxy, "EXPIREEDGE", expireEdges) })
}
