package lua

import (
	"path/filepath"
	"testing"
	"time"
)

// Expected meanings, built the way a reader of the catalog would say them.

func constant(v Value) Reply { return Reply{Kind: Constant, Value: v} }

var (
	one      = constant(IntValue(1))
	zero     = constant(IntValue(0))
	minusOne = constant(IntValue(-1))
	okStatus = constant(StatusValue("OK"))
	errERROR = constant(ErrorValue("ERR ERROR")) // redis.error_reply("ERROR"), as Redis 7 answers it
	null     = constant(NilValue())
)

func release(scope Scope, args int, released, absent, other Reply) *Meaning {
	return &Meaning{Op: OpRelease, Keys: scope, Token: 1, Args: args,
		Replies: map[Outcome]Reply{Released: released, Absent: absent, Other: other}}
}

func acquire(scope Scope, mode AcquireMode, unit time.Duration, args int, granted, denied Reply) *Meaning {
	return &Meaning{Op: OpAcquire, Keys: scope, Token: 1, TTL: 2, Unit: unit, Acquire: mode, Args: args,
		Replies: map[Outcome]Reply{Granted: granted, Denied: denied}}
}

func extend(scope Scope, mode ExtendMode, unit time.Duration, args int, granted, denied Reply) *Meaning {
	return &Meaning{Op: OpExtend, Keys: scope, Token: 1, TTL: 2, Unit: unit, Extend: mode, Args: args,
		Replies: map[Outcome]Reply{Granted: granted, Denied: denied}}
}

func read(scope Scope, args int) *Meaning { return &Meaning{Op: OpRead, Keys: scope, Args: args} }

func switchOn(arg, args int, def *Meaning, cases map[string]*Meaning) *Meaning {
	return &Meaning{Op: OpSwitch, Args: args, Switch: &Switch{Arg: arg, Cases: cases, Default: def}}
}

// sameMeaning compares two meanings fully, switches and Args included.
func sameMeaning(got, want *Meaning) bool {
	if got == nil || want == nil {
		return got == want
	}
	if got.Args != want.Args || !got.same(want) {
		return false
	}
	if got.Switch == nil {
		return true
	}
	g, w := got.Switch, want.Switch
	if g.Arg != w.Arg || len(g.Cases) != len(w.Cases) || !sameMeaning(g.Default, w.Default) {
		return false
	}
	for v, m := range w.Cases {
		if !sameMeaning(g.Cases[v], m) {
			return false
		}
	}
	return true
}

func checkMeaning(t *testing.T, src string, want *Meaning) {
	t.Helper()
	got := recognised(t, src)
	if !sameMeaning(got, want) {
		t.Fatalf("meaning\n got: %v (args %d)\nwant: %v (args %d)\nscript:\n%s", got, got.Args, want, want.Args, src)
	}
}

// The catalog's scripts as the libraries send them, read from the
// installed libraries; each text's SHA1 must be the one the library ships (docs/compatibility.md names the versions).
func TestCatalogLibraryTexts(t *testing.T) {
	redisPy := "/usr/lib/python3/dist-packages/redis/lock.py"
	redlockJS := filepath.Join(repoRoot(t), "tests/node/node_modules/redlock/redlock.js")
	redsync := filepath.Join(goModCache(t), "github.com/go-redsync/redsync/v4@v4.18.1/scripts.go")
	replace := extend(FirstKey, Replace, time.Millisecond, 3, one, zero)
	cases := []struct {
		name string
		read func(t *testing.T) string
		sha1 string
		want *Meaning
	}{
		{"redis-py release", func(t *testing.T) string { return pyScript(t, redisPy, "LUA_RELEASE_SCRIPT") },
			"c3f8721cbb97f72bc19e972846bd7aaf91901658", release(FirstKey, 1, one, zero, zero)},
		{"redis-py extend", func(t *testing.T) string { return pyScript(t, redisPy, "LUA_EXTEND_SCRIPT") },
			"a4e8783852e6b949f9ef3a97212805108459a890",
			switchOn(3, 3, replace, map[string]*Meaning{"0": extend(FirstKey, Add, time.Millisecond, 3, one, zero)})},
		{"redis-py reacquire", func(t *testing.T) string { return pyScript(t, redisPy, "LUA_REACQUIRE_SCRIPT") },
			"1cac51482acf5858da00f6d685d68f886cd6b6b2", extend(FirstKey, Replace, time.Millisecond, 2, one, zero)},
		{"node-redlock 4 acquire", func(t *testing.T) string { return jsScript(t, redlockJS, "lockScript") },
			"e5a322e2634ef59a516e8ea150cb085afafee684",
			acquire(AllKeys, IfAbsent, time.Millisecond, 2, Reply{Kind: KeyCount}, zero)},
		{"node-redlock 4 extend", func(t *testing.T) string { return jsScript(t, redlockJS, "extendScript") },
			"ce46f80993d5dac20dd066eb301a4e37994bdbed",
			extend(AllKeys, Replace, time.Millisecond, 2, Reply{Kind: KeyCount}, zero)},
		{"node-redlock 4 release", func(t *testing.T) string { return jsScript(t, redlockJS, "unlockScript") },
			"0f0f23b9048b36752b5be114f357ba083449f908",
			release(AllKeys, 1, Reply{Kind: ReleasedCount}, zero, zero)},
		{"redsync release", func(t *testing.T) string { return goScript(t, redsync, "deleteScript") },
			"e950836ed1e694540c503ef9972b8de518044d3b", release(FirstKey, 1, one, minusOne, zero)},
		{"redsync extend", func(t *testing.T) string { return goScript(t, redsync, "touchScript") },
			"d75bb8b5bd13532ddedd17762e772346e39b321e", extend(FirstKey, Replace, time.Millisecond, 2, one, zero)},
		{"redsync extend-or-acquire", func(t *testing.T) string { return goScript(t, redsync, "touchWithSetNXScript") },
			"b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79", acquire(FirstKey, IfAbsentOrMine, time.Millisecond, 2, one, zero)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := c.read(t)
			if got := sha1hex(src); got != c.sha1 {
				t.Fatalf("read a text with sha1 %s, the library ships %s: wrong text or version", got, c.sha1)
			}
			checkMeaning(t, src, c.want)
		})
	}
}

// The other catalog libraries' meanings, in spellings of our own with the
// same behaviour (the libraries are not installed here).
func TestCatalogOwnSpellings(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name, src string
		want      *Meaning
	}{
		{"pottery release", `
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0`, release(FirstKey, 1, one, zero, zero)},
		{"pottery extend", `
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1`, extend(FirstKey, Replace, ms, 2, one, zero)},
		{"pottery remaining", `
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pttl', KEYS[1]) end
return 0`, read(FirstKey, 1)},
		{"aioredlock set", `
local current = redis.call("GET", KEYS[1])
if current == false or current == ARGV[1] then
  return redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
end
return redis.error_reply("ERROR")`, acquire(FirstKey, IfAbsentOrMine, ms, 2, okStatus, errERROR)},
		{"aioredlock release", `
local v = redis.call('get', KEYS[1])
if not v then return redis.status_reply('OK') end
if v == ARGV[1] then return redis.call('del', KEYS[1]) end
return redis.error_reply('ERROR')`, release(FirstKey, 1, one, okStatus, errERROR)},
		{"aioredlock ttl", `
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('ttl', KEYS[1])
else
  return redis.error_reply('ERROR')
end`, read(FirstKey, 1)},
		{"redlock-rb acquire", `
if (redis.call('exists', KEYS[1]) == 0 and ARGV[3] == 'yes') or redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
end`, switchOn(3, 3, extend(FirstKey, Replace, ms, 3, okStatus, null),
			map[string]*Meaning{"yes": acquire(FirstKey, IfAbsentOrMine, ms, 3, okStatus, null)})},
		{"redlock-rb release", `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`,
			release(FirstKey, 1, one, zero, zero)},
		{"redlock-rb get", `return { redis.call("get", KEYS[1]), redis.call("pttl", KEYS[1]) }`, read(FirstKey, 0)},
		{"RedLock.net release", `
local held = redis.call('GET', KEYS[1]) == ARGV[1]
if held then return redis.call('DEL', KEYS[1]) end
return 0`, release(FirstKey, 1, one, zero, zero)},
		{"RedLock.net extend", `
local v = redis.call('GET', KEYS[1])
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
elseif v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return -1`, acquire(FirstKey, IfAbsentOrMine, ms, 2, one, minusOne)},
		{"redlock-php release", "if redis.call(\"GET\", KEYS[1]) == ARGV[1] then\r\n return redis.call(\"DEL\", KEYS[1])\r\nelse\r\n return 0\r\nend",
			release(FirstKey, 1, one, zero, zero)},
		{"node-redlock 5 acquire", `
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) > 0 then return 0 end
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return #KEYS`, acquire(AllKeys, IfAbsent, ms, 2, Reply{Kind: KeyCount}, zero)},
		{"node-redlock 5 extend", `
for _, k in ipairs(KEYS) do
  if redis.call('GET', k) ~= ARGV[1] then return 0 end
end
for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ARGV[2]) end
return #KEYS`, extend(AllKeys, Replace, ms, 2, Reply{Kind: KeyCount}, zero)},
		{"node-redlock 5 release", `
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then
    redis.call('DEL', k)
    n = n + 1
  end
end
return n`, release(AllKeys, 1, Reply{Kind: ReleasedCount}, zero, zero)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkMeaning(t, c.src, c.want) })
	}
}

// until marks a meaning's ttl argument as a Unix time (SET … PXAT,
// PEXPIREAT): the lock ends then, whenever the call arrives.
func until(m *Meaning) *Meaning {
	m.At = true
	return m
}

// Scripts that take and extend a lock until an absolute deadline, as
// rueidislock's do (its attempt reads the key after the SET so that the
// client tracks it). Spellings of our own.
func TestAbsoluteDeadlines(t *testing.T) {
	ms, s := time.Millisecond, time.Second
	for _, c := range []struct {
		name, src string
		want      *Meaning
	}{
		{"SET NX PXAT, then a read", `
local ok = redis.call('set', KEYS[1], ARGV[1], 'nx', 'pxat', ARGV[2])
redis.call('get', KEYS[1])
return ok`, until(acquire(FirstKey, IfAbsent, ms, 2, okStatus, null))},
		{"SET NX EXAT", `return redis.call("SET", KEYS[1], ARGV[1], "EXAT", ARGV[2], "NX")`,
			until(acquire(FirstKey, IfAbsent, s, 2, okStatus, null))},
		{"PEXPIREAT if held, then a read", `
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end
local n = redis.call("PEXPIREAT", KEYS[1], ARGV[2])
redis.call("GET", KEYS[1])
return n`, until(extend(FirstKey, Replace, ms, 2, one, zero))},
		{"EXPIREAT if held", `
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('expireat', KEYS[1], ARGV[2])
else
  return 0
end`, until(extend(FirstKey, Replace, s, 2, one, zero))},
		{"SET XX PXAT if held", `
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('set', KEYS[1], ARGV[1], 'XX', 'PXAT', ARGV[2])
end
return false`, until(extend(FirstKey, Replace, ms, 2, okStatus, null))},
	} {
		t.Run(c.name, func(t *testing.T) { checkMeaning(t, c.src, c.want) })
	}
	// A take-over (SET PXAT without NX) is no lock meaning: by vote.
	if a := Analyze([]byte(`return redis.call("SET", KEYS[1], ARGV[1], "PXAT", ARGV[2])`)); a.Meaning != nil {
		t.Errorf("SET PXAT without NX recognised as %v", a.Meaning)
	}
	// A deadline from a relative ttl plus TIME is not an argument's value.
	if a := Analyze([]byte(`
local t = redis.call('TIME')
local at = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2])
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PXAT', at)`)); a.Meaning != nil {
		t.Errorf("a deadline computed from TIME recognised as %v", a.Meaning)
	}
}
