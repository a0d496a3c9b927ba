package commands

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// TestKeyedByVote: hash, set, sorted-set, list and string commands outside
// scripts run by vote on five backends, with their replies as Redis's;
// key positions beyond the first (MSET's every other, ZUNIONSTORE's after
// the count) are checked as keys; commands that cannot run by vote are
// refused with the reason.
func TestKeyedByVote(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"SADD", "s", "a", "b", "c"}, ":3\r\n"},
		{[]string{"sadd", "s", "a"}, ":0\r\n"},
		{[]string{"SISMEMBER", "s", "b"}, ":1\r\n"},
		{[]string{"SCARD", "s"}, ":3\r\n"},
		{[]string{"HSET", "h", "f", "1", "g", "2"}, ":2\r\n"},
		{[]string{"HGET", "h", "g"}, "$1\r\n2\r\n"},
		{[]string{"HINCRBY", "h", "f", "5"}, ":6\r\n"},
		{[]string{"ZADD", "z", "1", "one", "2", "two"}, ":2\r\n"},
		{[]string{"ZRANGE", "z", "0", "-1", "WITHSCORES"}, "*4\r\n$3\r\none\r\n$1\r\n1\r\n$3\r\ntwo\r\n$1\r\n2\r\n"},
		{[]string{"ZUNIONSTORE", "zu", "2", "z", "z"}, ":2\r\n"},
		{[]string{"ZSCORE", "zu", "two"}, "$1\r\n4\r\n"},
		{[]string{"RPUSH", "l", "x", "y"}, ":2\r\n"},
		{[]string{"LRANGE", "l", "0", "-1"}, "*2\r\n$1\r\nx\r\n$1\r\ny\r\n"},
		{[]string{"MSET", "m1", "a", "m2", "b"}, "+OK\r\n"},
		{[]string{"MGET", "m1", "m2", "nope"}, "*3\r\n$1\r\na\r\n$1\r\nb\r\n$-1\r\n"},
		{[]string{"APPEND", "m1", "bc"}, ":3\r\n"},
		{[]string{"STRLEN", "m1"}, ":3\r\n"},
		{[]string{"SREM", "h", "f"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{[]string{"SADD", "s"}, "-ERR wrong number of arguments for 'sadd' command\r\n"},
		{[]string{"MSET", "m1", "a", redlock.FenceKey, "b"}, "-" + string(errReservedKey) + "\r\n"},
		{[]string{"ZUNIONSTORE", "zu", "2", "z", redlock.FenceKey}, "-" + string(errReservedKey) + "\r\n"},
		{[]string{"SADD", "s", strings.Repeat("v", 5000)}, "-ERR value is too long (max 4096 bytes)\r\n"},
	})
	// Unordered replies are compared as sets: every backend holds the same
	// members, whatever order each answers in.
	if got := do(d, c, "SMEMBERS", "s"); !strings.HasPrefix(got, "*3\r\n") {
		t.Fatalf("SMEMBERS = %q", got)
	}
	c3 := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	do(d, c3, "HELLO", "3")
	if got := do(d, c3, "HGETALL", "h"); got != "%2\r\n$1\r\nf\r\n:6\r\n$1\r\ng\r\n$1\r\n2\r\n" && got != "%2\r\n$1\r\nf\r\n$1\r\n6\r\n$1\r\ng\r\n$1\r\n2\r\n" {
		t.Fatalf("HGETALL in RESP3 = %q, want a map", got)
	}
	// A set where Redis 7 sends one (SMEMBERS), an array for HVALS and
	// HKEYS: a client that reads a set as one would merge equal values.
	do(d, c3, "HSET", "hv", "a", "1", "b", "1")
	for _, tc := range []struct{ cmd, key, want string }{{"SMEMBERS", "s", "~3\r\n"}, {"HVALS", "hv", "*2\r\n"}, {"HKEYS", "hv", "*2\r\n"}} {
		if got := do(d, c3, tc.cmd, tc.key); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s in RESP3 = %q, want %q…", tc.cmd, got, tc.want)
		}
	}
	for _, m := range mrs {
		if ok, _ := m.SIsMember("s", "c"); !ok {
			t.Fatalf("backend %s lacks the member", m.Addr())
		}
	}

	// Refused with the reason, not unknown.
	for _, cmd := range [][]string{{"SPOP", "s"}, {"SRANDMEMBER", "s"}, {"KEYS", "*"}, {"SCAN", "0"}, {"RANDOMKEY"}, {"MOVE", "s", "1"}, {"DEBUG", "SLEEP", "0"}} {
		got := do(d, c, cmd...)
		if !strings.HasPrefix(got, "-ERR redlock-proxy cannot serve this command: "+cmd[0]+" ") {
			t.Errorf("%q = %q, want the reason", cmd, got)
		}
	}
	// The reason is the command's, not a script's.
	for _, cmd := range [][]string{{"MONITOR"}, {"RENAME", "a", "b"}, {"DEBUG", "SLEEP", "0"}, {"MEMORY", "USAGE", "k"}} {
		got := do(d, c, cmd...)
		if !strings.HasPrefix(got, "-ERR redlock-proxy cannot serve this command: "+cmd[0]+" ") ||
			strings.Contains(got, "script") || strings.Contains(got, "key-local") {
			t.Errorf("%q = %q, want the reason for a command", cmd, got)
		}
	}
	if got := do(d, c, "NOSUCHCMD", "x"); !strings.HasPrefix(got, "-ERR unknown command 'NOSUCHCMD'") {
		t.Errorf("NOSUCHCMD = %q", got)
	}
}

// TestKeyedUserKeys: a user's key patterns apply to every key of a keyed
// command, not only the first.
func TestKeyedUserKeys(t *testing.T) {
	d := newUsersDispatcher(t, nil, func(o *Options) {
		o.Users = []User{{Name: "app", Password: "p", Commands: []string{"*"}, Keys: []string{"app:*"}}}
	})
	c := loggedIn(t, d, "app", "p")
	runAll(t, d, c, []run{
		{[]string{"SADD", "app:s", "a"}, ":1\r\n"},
		{[]string{"SADD", "other", "a"}, "-" + string(errNoPermKey) + "\r\n"},
		{[]string{"MSET", "app:1", "v", "other", "v"}, "-" + string(errNoPermKey) + "\r\n"},
		{[]string{"SINTERCARD", "2", "app:s", "other"}, "-" + string(errNoPermKey) + "\r\n"},
		{[]string{"SINTERCARD", "1", "app:s"}, ":1\r\n"},
		// The keys of the commands added with streams, geo and HLL, and
		// SORT's STORE destination, found where Redis's parser finds it.
		{[]string{"RPUSH", "app:l", "2", "1"}, ":2\r\n"},
		{[]string{"SORT", "app:l", "LIMIT", "0", "1", "STORE", "other"}, "-" + string(errNoPermKey) + "\r\n"},
		{[]string{"SORT", "app:l", "STORE", "app:d", "STORE", "other"}, "-" + string(errNoPermKey) + "\r\n"},
		{[]string{"COPY", "app:l", "app:c"}, ":1\r\n"},
		{[]string{"COPY", "app:l", "other"}, "-" + string(errNoPermKey) + "\r\n"},
		{[]string{"PFMERGE", "app:h", "other"}, "-" + string(errNoPermKey) + "\r\n"},
		{[]string{"GEOSEARCHSTORE", "other", "app:g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"}, "-" + string(errNoPermKey) + "\r\n"},
		{[]string{"XADD", "app:x", "*", "f", "v"}, "-ERR redlock-proxy cannot serve this command: XADD with the id * takes its id from each backend's clock: give it as <ms>-<seq> or <ms>-*. See docs/compatibility.md\r\n"},
		{[]string{"COPY", "app:l", "app:c", "DB", "0"}, "-ERR redlock-proxy cannot serve this command: COPY with DB reaches another database. See docs/compatibility.md\r\n"},
	})
}

// TestKeyedRowsFollowTheAllowList: every keyed command of the scripts'
// allow-list is served, with COMMAND INFO's key positions, and flags
// that let tracking and MULTI treat it right.
func TestKeyedRowsFollowTheAllowList(t *testing.T) {
	for _, kc := range lua.KeyCommands() {
		cmd := commandIndex[kc.Name]
		if cmd == nil {
			t.Errorf("%s is on the allow-list but not served", kc.Name)
			continue
		}
		if kc.Writes && cmd.Flags&Writes == 0 {
			t.Errorf("%s writes but its row lacks Writes", kc.Name)
		}
		if cmd.Flags&(Reads|Writes) == 0 {
			t.Errorf("%s has neither Reads nor Writes", kc.Name)
		}
	}
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	if got := do(d, c, "COMMAND", "INFO", "mset"); !strings.Contains(got, "$4\r\nmset\r\n:-3\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:2\r\n") {
		t.Errorf("COMMAND INFO mset = %q", got)
	}
	if got := do(d, c, "COMMAND", "INFO", "zunion"); !strings.Contains(got, "+readonly\r\n+movablekeys\r\n") {
		t.Errorf("COMMAND INFO zunion = %q", got)
	}
	if got := do(d, c, "COMMAND", "INFO", "sort"); !strings.Contains(got, "+write\r\n+movablekeys\r\n") {
		t.Errorf("COMMAND INFO sort = %q", got)
	}
	if got := do(d, c, "COMMAND", "INFO", "spop"); got != "*1\r\n$-1\r\n" { // not served: null, as Redis for a name it does not know
		t.Errorf("COMMAND INFO spop = %q", got)
	}
}

// TestKeyedInMulti: keyed reads are queued and run at EXEC; a keyed write
// runs in the transaction's script, and after WATCH is refused inside
// MULTI, and EXEC then aborts, as for other writes.
func TestKeyedInMulti(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"SADD", "s", "a"}, ":1\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SISMEMBER", "s", "a"}, "+QUEUED\r\n"},
		{[]string{"SCARD", "s"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n:1\r\n:1\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SADD", "s", "b"}, "+QUEUED\r\n"},
		{[]string{"SCARD", "s"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n:1\r\n:2\r\n"},
		{[]string{"WATCH", "s"}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SADD", "s", "c"}, "-" + errTxOnly + "\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"SCARD", "s"}, ":2\r\n"},
	})
}

// TestKeyedTooManyArgs: more arguments than the backends' Lua can unpack
// are refused with the reason, before any backend is asked.
func TestKeyedTooManyArgs(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	args := []string{"SADD", "s"}
	for i := range maxKeyedArgs {
		args = append(args, strconv.Itoa(i))
	}
	if r := do(d, c, args...); !strings.HasPrefix(r, "-ERR redlock-proxy runs SADD by vote as a script, which takes at most") {
		t.Fatalf("SADD with %d arguments = %.120q", len(args)-1, r)
	}
}

// TestKeyedCheckedAtRun: a keyed command sent directly runs in the
// run-time check only when it may grow a value past its arguments
// (SETRANGE, SETBIT, APPEND, BITFIELD); the others run as a plain call,
// their keys and values checked here. A PFMERGE of more keys than one
// run's write budget is refused here, before anything is sent (before, it
// went to the backends' check after taking 1,001 order locks: under load
// that acquire missed its deadline).
func TestKeyedCheckedAtRun(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	row := func(name string) *keyed {
		for _, kc := range lua.KeyCommands() {
			if kc.Name == name {
				return &keyed{cmd: kc}
			}
		}
		t.Fatalf("no keyed command %s", name)
		return nil
	}
	manyKeys := []string{"PFMERGE"}
	for i := range scriptWriteKeys + 1 {
		manyKeys = append(manyKeys, "k"+strconv.Itoa(i))
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"SADD", "s", "m"}, false},
		{[]string{"SMEMBERS", "s"}, false},
		{[]string{"MSET", "a", "1", "b", "2"}, false},
		{[]string{"SETRANGE", "s", "10", "x"}, true},
		{[]string{"SETBIT", "s", "10", "1"}, true},
		{[]string{"APPEND", "s", "x"}, true},
		{[]string{"BITFIELD", "s", "SET", "u8", "0", "1"}, true},
		{manyKeys, false},
		{append([]string{"EXISTS"}, manyKeys[1:]...), false},
	} {
		if got := d.checkedAtRun(row(tc.args[0])); got != tc.want {
			t.Errorf("checkedAtRun(%.40q) = %v, want %v", tc.args, got, tc.want)
		}
	}
	if r := do(d, c, manyKeys...); !strings.Contains(r, "would write more than 1000 keys") {
		t.Fatalf("PFMERGE of %d keys = %.160q, want refused by the write budget", len(manyKeys)-1, r)
	}
	if r := do(d, c, "SETRANGE", "s", "100000000", "x"); !strings.Contains(r, "max_value_bytes") {
		t.Fatalf("SETRANGE past max_value_bytes = %.160q, want refused", r)
	}
}

// TestScoresRESP3: in RESP3 a score is a double and a range WITHSCORES
// answers [member, score] pairs, as Redis 7 answers them (replies taken
// from redis-server 7.0.15); RESP2 keeps bulk strings, flat.
func TestScoresRESP3(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	do(d, c, "HELLO", "3")
	pairs := "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
	runAll(t, d, c, []run{
		{[]string{"ZADD", "z", "1", "a", "2.5", "b"}, ":2\r\n"},
		{[]string{"ZSCORE", "z", "b"}, ",2.5\r\n"},
		{[]string{"ZSCORE", "z", "nope"}, "_\r\n"},
		{[]string{"ZMSCORE", "z", "a", "nope"}, "*2\r\n,1\r\n_\r\n"},
		{[]string{"ZRANGE", "z", "0", "-1", "WITHSCORES"}, pairs},
		{[]string{"zrange", "z", "0", "-1", "withscores"}, pairs},
		{[]string{"ZRANGE", "z", "0", "-1"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{[]string{"ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "0", "5"}, pairs},
		{[]string{"ZREVRANGE", "z", "0", "0", "WITHSCORES"}, "*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"},
		{[]string{"ZUNION", "1", "z", "WITHSCORES"}, pairs},
		{[]string{"ZUNION", "1", "WITHSCORES"}, "*0\r\n"}, // a key named WITHSCORES
		{[]string{"ZINCRBY", "z", "1", "a"}, ",2\r\n"},
		{[]string{"ZADD", "z", "INCR", "1", "a"}, ",3\r\n"},
		{[]string{"ZADD", "z", "XX", "INCR", "1", "nope"}, "_\r\n"},
		{[]string{"ZPOPMIN", "z"}, "*2\r\n$1\r\nb\r\n,2.5\r\n"},
		{[]string{"ZPOPMAX", "z", "1"}, "*1\r\n*2\r\n$1\r\na\r\n,3\r\n"},
		{[]string{"ZPOPMIN", "z"}, "*0\r\n"},
	})
	c2 := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	runAll(t, d, c2, []run{
		{[]string{"ZADD", "z", "1", "a", "2.5", "b"}, ":2\r\n"},
		{[]string{"ZSCORE", "z", "b"}, "$3\r\n2.5\r\n"},
		{[]string{"ZRANGE", "z", "0", "-1", "WITHSCORES"}, "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n"},
	})
}

// TestKeyedErrorsAlone: a backend's error for a keyed command answers as
// Redis answers the command sent alone, not as its script by vote.
func TestKeyedErrorsAlone(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		got, out string
	}{
		{[]string{"ZRANK", "z", "a", "WITHSCORE"}, "ERR Wrong number of args calling Redis command from script", "ERR wrong number of arguments for 'zrank' command"},
		{[]string{"HTTL", "h", "FIELDS", "1", "f"}, "ERR Unknown Redis command called from script", "ERR unknown command 'HTTL', with args beginning with: 'h' 'FIELDS' '1' 'f' "},
		{[]string{"SETRANGE", "k", "4096", "x"},
			"ERR script would grow a value with SETRANGE to 4097 bytes, past max_value_bytes (4096) (redlock-proxy checks scripts by vote as they run: see docs/safety.md) script: 76c014677c208cbd51339c8bbca7dfe18985d875, on @user_script:1.",
			"ERR script would grow a value with SETRANGE to 4097 bytes, past max_value_bytes (4096) (redlock-proxy checks scripts by vote as they run: see docs/safety.md)"},
		{[]string{"INCRBYFLOAT", "k", "x"}, "ERR value is not a valid float", "ERR value is not a valid float"},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		if got := alone(Error(tc.got), args); string(got) != tc.out {
			t.Errorf("alone(%q) = %q, want %q", tc.got, got, tc.out)
		}
	}
}
