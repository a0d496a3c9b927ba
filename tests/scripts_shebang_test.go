package tests

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestScriptShebangsAsOneRedis: scripts with a shebang, and EVAL_RO and
// EVALSHA_RO, answer through the proxy as one Redis 7 answers them.
// Before, a read-only script with a shebang that does not declare
// no-writes ("#!lua", "#!lua flags=no-cluster") was sent to the backends
// as a read, EVALSHA_RO, which Redis refuses for it ("Can not execute a
// script with write flag using *_ro command."); SCRIPT LOAD of an unknown
// flag answered a SHA1; and EVAL_RO and EVALSHA_RO were refused as
// commands.
func TestScriptShebangsAsOneRedis(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	single := startRedis(t)
	p := startProxy(t, rs, "")
	c, s := p.Client(nil), single.Client()
	ctx := testCtx(t, 60*time.Second)
	const (
		hget      = "#!lua\nreturn redis.call('hget', KEYS[1], 'f')"
		one       = "#!lua\nreturn 1"
		noCluster = "#!lua flags=no-cluster\nreturn redis.call('hget', KEYS[1], 'f')"
		noWrites  = "#!lua flags=no-writes\nreturn redis.call('hget', KEYS[1], 'f')"
		writes    = "#!lua\nredis.call('hset', KEYS[1], 'g', ARGV[1])\nreturn redis.call('hget', KEYS[1], 'g')"
		compat    = "return redis.call('hget', KEYS[1], 'f')"
		compatSet = "return redis.call('hset', KEYS[1], 'g', ARGV[1])"
		bogus     = "#!lua flags=bogus\nreturn 1"
	)
	for _, cl := range []*redis.Client{c, s} {
		if err := cl.HSet(ctx, "sb:h", "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
	}
	type call struct {
		cmd, src string
		keys     []string
		args     []any
	}
	for _, tc := range []call{
		{"EVAL", hget, []string{"sb:h"}, nil},
		{"EVAL", one, nil, nil},
		{"EVAL", noCluster, []string{"sb:h"}, nil},
		{"EVAL", noWrites, []string{"sb:h"}, nil},
		{"EVAL", writes, []string{"sb:h"}, []any{"w"}},
		{"EVAL", bogus, nil, nil},
		{"EVAL_RO", hget, []string{"sb:h"}, nil},
		{"EVAL_RO", one, nil, nil},
		{"EVAL_RO", noWrites, []string{"sb:h"}, nil},
		{"EVAL_RO", compat, []string{"sb:h"}, nil},
		{"EVAL_RO", compatSet, []string{"sb:h"}, []any{"x"}},
		{"EVALSHA_RO", compat, []string{"sb:h"}, nil},
		{"EVALSHA_RO", compatSet, []string{"sb:h"}, []any{"x"}},
		{"EVALSHA_RO", one, nil, nil},
		{"SCRIPT", bogus, nil, nil},
	} {
		var replies [2]string
		for i, cl := range []*redis.Client{c, s} {
			args := []any{tc.cmd}
			switch tc.cmd {
			case "SCRIPT":
				args = append(args, "LOAD", tc.src)
			case "EVALSHA_RO":
				if err := cl.ScriptLoad(ctx, tc.src).Err(); err != nil {
					t.Fatalf("SCRIPT LOAD %q: %v", tc.src, err)
				}
				sum := sha1.Sum([]byte(tc.src))
				args = append(args, hex.EncodeToString(sum[:]), len(tc.keys))
			default:
				args = append(args, tc.src, len(tc.keys))
			}
			for _, k := range tc.keys {
				args = append(args, k)
			}
			args = append(args, tc.args...)
			v, err := cl.Do(ctx, args...).Result()
			replies[i] = fmt.Sprint(v, err)
		}
		if replies[0] != replies[1] {
			t.Errorf("%s %q: proxy %s; one Redis %s", tc.cmd, tc.src, replies[0], replies[1])
		}
	}
}
