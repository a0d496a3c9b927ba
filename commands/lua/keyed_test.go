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
	args := func(s string) [][]byte {
		var out [][]byte
		for _, f := range strings.Fields(s) {
			out = append(out, []byte(f))
		}
		return out
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
		// A count near the largest integer does not wrap round to no keys.
		{"LMPOP", "LMPOP 9223372036854775807 redlock-proxy:x LEFT", []int{2, 3}},
		{"ZUNIONSTORE", "ZUNIONSTORE d 9223372036854775806 a b", []int{1, 3, 4}},
	} {
		if got := byName[c.name].KeyPositions(args(c.cmd)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: key positions %v, want %v", c.cmd, got, c.want)
		}
	}
}

// TestRefusal: a command Redis has that cannot run by vote has a reason;
// a keyed one and a name Redis does not have have none.
func TestRefusal(t *testing.T) {
	for _, name := range []string{"spop", "KEYS", "SCAN", "RANDOMKEY", "MOVE", "COPY", "SWAPDB", "DEBUG", "SHUTDOWN", "CONFIG", "HSCAN", "RENAME"} {
		if why, ok := Refusal(name); !ok || !strings.HasPrefix(why, strings.ToUpper(name)+" ") {
			t.Errorf("Refusal(%s) = %q, %v", name, why, ok)
		}
	}
	for _, name := range []string{"SADD", "smembers", "HGETALL", "NOSUCH", "XADD"} {
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
