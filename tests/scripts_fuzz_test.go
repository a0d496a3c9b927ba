package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FuzzScriptEnforce generates scripts from a small grammar of what
// scripts by vote do (calls through redis, its aliases and pcall; keys
// declared, built, aliased or named outright; KEYS and ARGV changed
// through the aliases pairs and ipairs hand out) and runs each through a
// proxy as a user limited to tenant:42 and tenant:42:*, with scripts =
// "vote". Whatever the analysis lets through, no key outside the user's
// patterns is ever touched (canaries stay, no other key appears), and
// every backend answers PING after each run.
//
//	go test -run '^$' -fuzz FuzzScriptEnforce -fuzztime 2m -parallel 1 ./tests
//
// The fuzz engine kills its workers when the time is up, before their
// cleanups run: their redis-servers stay up, holding the output pipe, and
// the command waits until they are stopped.
func FuzzScriptEnforce(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 1, 2, 3}, {4, 0, 6, 1, 2}, {5, 5, 5, 5, 5, 5}, {7, 3, 9, 2, 11, 4},
		{1, 6, 0, 8, 3, 3, 2}, {8, 2, 1, 1, 4, 6, 5, 7}, {3, 4, 10, 0, 2, 9},
	} {
		f.Add(seed)
	}
	rs := startCluster(f, 3)
	p := startProxy(f, rs, enforceUsers)
	tenant := p.Client(&redis.Options{Username: "tenant", Password: "tenant-secret-42", ReadTimeout: 10 * time.Second})
	ctx := context.Background()
	canaries := []string{"other:1", "tenant:421", "tenant:4"}
	for _, r := range rs {
		for _, k := range canaries {
			if err := r.Client().Set(ctx, k, "canary", 0).Err(); err != nil {
				f.Fatal(err)
			}
		}
	}
	f.Fuzz(func(t *testing.T, choices []byte) {
		src := scriptFrom(choices)
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		err := tenant.Eval(c, src, []string{"tenant:42"}, "get", "v").Err()
		t.Logf("%q: %v", src, err)
		for i, r := range rs {
			b := r.Client()
			if err := b.Ping(c).Err(); err != nil {
				t.Fatalf("%q: backend %d does not answer PING: %v", src, i, err)
			}
			for _, k := range canaries {
				if v, err := b.Get(c, k).Result(); err != nil || v != "canary" {
					t.Fatalf("%q: canary %s on backend %d = %q, %v", src, k, i, v, err)
				}
			}
			keys, err := b.Keys(c, "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				mine := k == "tenant:42" || strings.HasPrefix(k, "tenant:42:")
				if !mine && !strings.HasPrefix(k, "redlock-proxy:") && !inList(canaries, k) {
					t.Fatalf("%q: backend %d holds %q, outside the user's patterns", src, i, k)
				}
			}
		}
	})
}

func inList(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The grammar: each choice byte picks the next piece.
var (
	fuzzKeys = []string{
		"KEYS[1]", "KEYS[1] .. '1'", "KEYS[1] .. ':x'", "'other:1'", "k[1]", "'redlock-proxy:fence'",
		"KEYS[1] .. ''", "string.sub(KEYS[1], 1, 8)", "'tenant:4' .. '21'", "ARGV[2]",
	}
	fuzzCalls = []string{
		"redis.call(%s)", "redis.pcall(%s)", "r.call(%s)", "_G.redis.call(%s)", "rawget(_G, 'redis').call(%s)",
		"pcall(redis.call, %s)", "call(%s)",
	}
	fuzzCmds = []string{
		"'SET', %k, 'x'", "'GET', %k", "'DEL', %k", "'INCR', %k", "'APPEND', %k, 'y'", "'HSET', %k, 'f', 'v'",
		"'FLUSHALL'", "'SWAPDB', 0, 1", "'RENAME', KEYS[1], %k", "'COPY', KEYS[1], %k", "ARGV[1], %k",
		"'SETRANGE', %k, 100000000, 'x'", "'EXPIRE', %k, 10",
	}
	fuzzMutations = []string{
		"k[1] = %k", "a[1] = 'flushall'", "a[2] = %k", "KEYS[1] = %k", "k = {%k}",
	}
)

// scriptFrom builds a script from choices: a prologue of aliases, then a
// statement per three bytes (a mutation or a call).
func scriptFrom(choices []byte) string {
	pick := func(i int, list []string) string {
		if i >= len(choices) {
			return list[0]
		}
		return list[int(choices[i])%len(list)]
	}
	var b strings.Builder
	b.WriteString("local _, k = pairs(KEYS)\nlocal _, a = ipairs(ARGV)\nlocal r = redis\nlocal call = redis.call\n")
	for i := 0; i < len(choices) && i < 24; i += 3 {
		key := pick(i+2, fuzzKeys)
		if choices[i]%4 == 0 {
			b.WriteString(strings.ReplaceAll(pick(i+1, fuzzMutations), "%k", key) + "\n")
			continue
		}
		cmd := strings.ReplaceAll(pick(i+1, fuzzCmds), "%k", key)
		b.WriteString(strings.ReplaceAll(pick(i, fuzzCalls), "%s", cmd) + "\n")
	}
	b.WriteString("return 1")
	return b.String()
}
