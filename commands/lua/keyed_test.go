package lua

import (
	"reflect"
	"strings"
	"testing"
)

// TestKeyCommands: every keyed command of the allow-list and every
// unordered read is listed once, with its key positions found as Redis
// finds them, and a count of keys that does not fit makes every later
// argument a key.
func TestKeyCommands(t *testing.T) {
	byName := map[string]KeyCommand{}
	for _, kc := range KeyCommands() {
		if _, dup := byName[kc.Name]; dup || kc.Arity == 0 {
			t.Errorf("%s listed twice or without arity", kc.Name)
		}
		byName[kc.Name] = kc
	}
	for name, c := range allowed {
		if _, ok := byName[name]; ok == (c.keys == kNone) {
			t.Errorf("%s: listed %v, has keys %v", name, ok, c.keys != kNone)
		}
	}
	if !byName["HGETALL"].Pairs || !byName["SMEMBERS"].Unordered || byName["LRANGE"].Unordered || !byName["SADD"].Writes || byName["SCARD"].Writes {
		t.Error("reply shapes or write flags wrong")
	}
	for _, c := range []struct {
		name, cmd string
		want      []int
	}{
		{"MSET", "MSET a 1 b 2", []int{1, 3}},
		{"MGET", "MGET a b c", []int{1, 2, 3}},
		{"SMOVE", "SMOVE a b m", []int{1, 2}},
		{"BITOP", "BITOP AND d a b", []int{2, 3, 4}},
		{"ZUNIONSTORE", "ZUNIONSTORE d 2 a b WEIGHTS 1 2", []int{1, 3, 4}},
		{"ZUNION", "ZUNION 2 a b", []int{2, 3}},
		{"LMPOP", "LMPOP 1 a LEFT", []int{2}},
		{"ZUNION", "ZUNION x a b", []int{2, 3}},
		{"ZUNION", "ZUNION 9 a b", []int{2, 3}},
		{"SINTERCARD", "SINTERCARD -1 a", []int{2}},
		{"SORT", "SORT a LIMIT 0 1 STORE d", []int{1, 6}},
		{"SORT", "SORT a LIMIT STORE 1 ALPHA", []int{1}},
		{"SORT", "SORT a STORE d STORE e", []int{1, 5}},
		{"GEOSEARCHSTORE", "GEOSEARCHSTORE d a FROMMEMBER m BYRADIUS 1 km", []int{1, 2}},
		{"COPY", "COPY a b REPLACE", []int{1, 2}},
		// A count near the largest integer does not wrap round to no keys.
		{"LMPOP", "LMPOP 9223372036854775807 redlock-proxy:x LEFT", []int{2, 3}},
		{"ZUNIONSTORE", "ZUNIONSTORE d 9223372036854775806 a b", []int{1, 3, 4}},
	} {
		if got := byName[c.name].KeyPositions(fields(c.cmd)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: key positions %v, want %v", c.cmd, got, c.want)
		}
	}
}

// TestRefusal: a command Redis has that cannot run by vote has a reason;
// a keyed one and a name Redis does not have have none.
func TestRefusal(t *testing.T) {
	for _, name := range []string{"spop", "KEYS", "SCAN", "RANDOMKEY", "MOVE", "XREAD", "XGROUP", "SWAPDB", "DEBUG", "SHUTDOWN", "CONFIG", "HSCAN", "RENAME"} {
		if why, ok := Refusal(name); !ok || !strings.HasPrefix(why, strings.ToUpper(name)+" ") {
			t.Errorf("Refusal(%s) = %q, %v", name, why, ok)
		}
	}
	for _, name := range []string{"SADD", "smembers", "HGETALL", "NOSUCH", "XADD", "COPY", "sort", "PFADD", "GEOSEARCH"} {
		if why, ok := Refusal(name); ok {
			t.Errorf("Refusal(%s) = %q, want none", name, why)
		}
	}
}

// TestHugeNumkeysInScript: a script naming a command's keys by a count
// near the largest integer has every later argument checked as a key (a
// wrapped count checked none, and a reserved key passed).
func TestHugeNumkeysInScript(t *testing.T) {
	a := Analyze([]byte("return redis.call('LMPOP', '9223372036854775807', 'redlock-proxy:x', 'LEFT')"))
	if a.Vote != nil || a.Problem == nil {
		t.Fatalf("a literal key past a huge numkeys was not refused: %+v", a.Problem)
	}
}

// TestFormsByVote: the forms of XADD, XTRIM, COPY and SORT that every
// backend runs alike are accepted in a script; an ARGV-named command is
// checked the same way on each run.
func TestFormsByVote(t *testing.T) {
	for _, src := range []string{
		"return redis.call('XADD', KEYS[1], '5-1', 'f', ARGV[1])",
		"return redis.call('XADD', KEYS[1], 'NOMKSTREAM', 'MAXLEN', '=', ARGV[2], '5-*', 'f', ARGV[1])",
		"return redis.call('XADD', KEYS[1], 'MINID', '=', ARGV[2], '7-*', 'f', ARGV[1])",
		"return redis.call('XTRIM', KEYS[1], 'MAXLEN', '=', ARGV[1])",
		"return redis.call('COPY', KEYS[1], KEYS[2], 'REPLACE')",
		"return redis.call('SORT', KEYS[1], 'LIMIT', ARGV[1], ARGV[2], 'DESC', 'STORE', KEYS[2])",
		"return redis.call('SORT_RO', KEYS[1], 'ALPHA')",
		"return redis.call('PFADD', KEYS[1], unpack(ARGV))",
		"return redis.call('GEOSEARCHSTORE', KEYS[1], KEYS[2], 'FROMLONLAT', 0, 0, 'BYRADIUS', ARGV[1], 'km')",
	} {
		if a := Analyze([]byte(src)); a.Vote == nil {
			t.Errorf("%s: refused: %v", src, a.Problem)
		}
	}
	a := Analyze([]byte("return redis.call(ARGV[1], KEYS[1], ARGV[2], 'f', 'v')"))
	if a.Vote == nil {
		t.Fatalf("refused: %v", a.Problem)
	}
	if p := a.Vote.CheckRun(1, []string{"XADD", "1-1"}); p == nil || !strings.Contains(p.Reason, "must be string literals") {
		t.Errorf("XADD by ARGV with the id from ARGV: %v, want refused", p)
	}
	if p := a.Vote.CheckRun(1, []string{"HSET", "f"}); p != nil {
		t.Errorf("HSET by ARGV: %v", p)
	}
	for _, c := range []struct{ call, why string }{
		{"XADD s * f v", "id * takes its id from each backend's clock"},
		{"XADD s MAXLEN ~ 5 * f v", "~ trims"},
		{"XADD s 1-* f v", ""},
		{"XADD s MAXLEN = 5 LIMIT 3 1-1 f v", ""},
		{"XTRIM s MAXLEN ~ 5", "~ trims"},
		{"XTRIM s MINID 5", ""},
		{"XADD s LIMIT 5 MAXLEN ~ 10 * f v", "~ trims"},
		{"XTRIM s LIMIT 5 MAXLEN ~ 10", "~ trims"},
		{"XADD s LIMIT 5 1-1 f v", ""},
		{"COPY a b DB 0", "reaches another database"},
		{"COPY a b replace", ""},
		{"SORT a BY w_*", "BY or GET"},
		{"SORT_RO a get #", "BY or GET"},
		{"SORT a ALPHA STORE b", "locale"},
		{"SORT a ALPHA LIMIT 0 1", ""},
	} {
		call := fields(c.call)
		cmd, _ := lookup(string(call[0]))
		why := KeyCommand{Name: cmd.name}.Form(call)
		if c.why == "" && why != "" || !strings.Contains(why, c.why) {
			t.Errorf("%s: form %q, want %q", c.call, why, c.why)
		}
	}
}

// fields is a call written as words.
func fields(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}
