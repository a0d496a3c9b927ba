package lua

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestReach: what a pipeline must order a script by vote against. A GET of
// a key the script builds (KEYS[1] .. ':x') in the same pipeline must wait
// for the script, so Reach names the key's start as a prefix.
func TestReach(t *testing.T) {
	keys := []string{"dk", "ok"}
	cases := []struct {
		src      string
		prefixes []string
	}{
		{"return redis.call('set', KEYS[1], ARGV[1])", nil},
		{"for _, k in ipairs(KEYS) do redis.call('del', k) end", nil},
		{"return redis.call('set', KEYS[1] .. ':x', ARGV[1])", []string{"dk", "ok"}},
		{"local tag = '{' .. KEYS[1] .. '}'\nredis.call('set', tag .. ':n', 1)\nreturn redis.call('incr', tag)", []string{"dk", "ok", "{dk", "{ok"}},
	}
	for _, c := range cases {
		a := analyze(t, c.src)
		if a.Vote == nil {
			t.Fatalf("%s: refused: %v", c.src, a.Problem)
		}
		r := a.Vote.Reach(keys)
		if !slices.Equal(r.Keys, keys) || !slices.Equal(r.Prefixes, c.prefixes) {
			t.Errorf("%s: reach %+v, want prefixes %q", c.src, r, c.prefixes)
		}
	}
	r := Reach{Keys: []string{"a"}, Prefixes: []string{"{b"}}
	for key, want := range map[string]bool{"a": true, "a:x": false, "{b}": true, "{b": true, "b": false} {
		if r.Covers(key) != want {
			t.Errorf("Covers(%q) = %v", key, !want)
		}
	}
}

// TestReachCoversWrites runs scripts by vote on a miniredis and checks that
// every key they left is within their Reach.
func TestReachCoversWrites(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	keys := []string{"dk", "lock:a"}
	argv := []string{"vN", "x", "3", "set"}
	for _, src := range []string{
		"return redis.call('set', KEYS[1] .. ':' .. ARGV[2], ARGV[1])",
		"local k = '{' .. KEYS[2] .. '}'\nredis.call('hset', k .. ':owners', ARGV[1], 1)\nreturn redis.call('set', k, ARGV[1])",
		"local function mark(k, v) return redis.call('set', k .. ':mark', v) end\nfor _, k in ipairs(KEYS) do mark(k, ARGV[1]) end",
		"return redis.call(ARGV[4], KEYS[1] .. ARGV[2], ARGV[1])",
		"redis.call('mset', unpack(KEYS))\nreturn redis.call('rpush', KEYS[2] .. ':q', ARGV[1], ARGV[2])",
		"for i = 1, tonumber(ARGV[3]) do redis.call('sadd', KEYS[1] .. ':' .. i, i) end",
	} {
		m.FlushAll()
		a := analyze(t, src)
		if a.Vote == nil {
			t.Fatalf("%s: refused: %v", src, a.Problem)
		}
		if p := a.Vote.CheckRun(1, argv); p != nil {
			t.Fatalf("%s: %v", src, p)
		}
		if err := rdb.Eval(ctx, src, keys, argv).Err(); err != nil && err != redis.Nil {
			t.Fatalf("%s: %v", src, err)
		}
		r := a.Vote.Reach(keys)
		if len(m.Keys()) == 0 {
			t.Fatalf("%s: wrote nothing", src)
		}
		for _, k := range m.Keys() {
			if !r.Covers(k) {
				t.Errorf("%s: wrote %q, outside %+v", src, k, r)
			}
		}
	}
}

// Reach is every key one run of a script by vote may touch: each of Keys
// (the declared keys), and every key that starts with one of Prefixes (the
// keys it builds from them by concatenation; an empty prefix, from an
// empty declared key, stands for any key). A script by vote touches no
// other key: the vote rules refuse every other way of naming one.
type Reach struct {
	Keys     []string
	Prefixes []string
}

// Reach is what a run with the declared keys may touch. A pipeline orders
// the script after earlier commands on those keys and before later ones;
// with Prefixes, ordering needs prefix matching (or the script is a
// barrier), and a gate must cover every key with those prefixes.
func (v *Vote) Reach(keys []string) Reach {
	r := Reach{Keys: keys}
	if !v.DerivedKeys {
		return r
	}
	seen := map[string]bool{}
	for _, p := range append([]string{""}, v.KeyPrefixes...) {
		for _, k := range keys {
			if start := p + k; !seen[start] {
				seen[start] = true
				r.Prefixes = append(r.Prefixes, start)
			}
		}
	}
	return r
}

// Covers reports whether key is within r.
func (r Reach) Covers(key string) bool {
	for _, k := range r.Keys {
		if k == key {
			return true
		}
	}
	for _, p := range r.Prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
