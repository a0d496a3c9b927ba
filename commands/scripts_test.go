package commands

import (
	"crypto/sha1"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Scripts of our own, written the way lock libraries write theirs (never
// their text): the proxy recognises what they do, not their bytes.
const (
	// The compare-and-delete of every "Redis lock" tutorial, spaced out.
	testRelease = `if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end`
	// The same meaning, spelled otherwise: 1 released, 0 another owner,
	// -1 absent (redsync's convention).
	testReleaseTernary = `local current = redis.call('GET', KEYS[1])
if current == false then return -1 end
if current ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`
	// Compare-and-expire.
	testExtend = `if redis.call('get',KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('pexpire',KEYS[1],ARGV[2])`
	// Every key or none, answering the number of keys (node-redlock's
	// convention).
	testAcquireAll = `for _, k in ipairs(KEYS) do
  if redis.call("EXISTS", k) == 1 then return 0 end
end
for _, k in ipairs(KEYS) do
  redis.call("SET", k, ARGV[1], "PX", ARGV[2])
end
return #KEYS`
	// Set when absent or already ours, an error reply otherwise
	// (aioredlock's convention).
	testAcquireOrError = `local v = redis.call('GET', KEYS[1])
if not v or v == ARGV[1] then
  return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return redis.error_reply('ERROR')`
	// ARGV[3] == "0" adds to the remaining ttl, else replaces it.
	testExtendSwitch = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ms = tonumber(ARGV[2])
if ARGV[3] == "0" then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then ms = ms + left end
end
redis.call('PEXPIRE', KEYS[1], ms)
return 1`
	// The remaining ms when the key holds ARGV[1], else 0.
	testRemaining = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return 0`
	// A re-entrant lock in a hash with a hold count (Redisson's shape):
	// nil when taken, else the holder's remaining ttl.
	testHashAcquire = `if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`
	testHashRelease = `if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then return 0 end
redis.call('del', KEYS[1])
return 1`
	// A lock in a sorted set of holders (Symfony's shape).
	testZAcquire = `redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[2])
if redis.call('zscore', KEYS[1], ARGV[1]) then return 1 end
if redis.call('zcard', KEYS[1]) > 0 then return 0 end
redis.call('zadd', KEYS[1], ARGV[3], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[4])
return 1`
)

func sha1Of(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestScriptsRecognised: scripts of the catalog's meanings, in our own
// spellings, run as quorum operations and answer in their conventions.
func TestScriptsRecognised(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"SET", "r", "tok", "NX", "PX", "10000"}, "+OK\r\n"},
		{[]string{"EVAL", testReleaseTernary, "1", "r", "other"}, ":0\r\n"},
		{[]string{"EVAL", testReleaseTernary, "1", "r", "tok"}, ":1\r\n"},
		{[]string{"EVAL", testReleaseTernary, "1", "r", "tok"}, ":-1\r\n"},
		{[]string{"SET", "r", "tok", "NX", "PX", "10000"}, "+OK\r\n"},
		{[]string{"EVAL", strings.ReplaceAll(testRelease, "\n", "\r\n\t"), "1", "r", "tok"}, ":1\r\n"},
		// Several keys, all or none.
		{[]string{"EVAL", testAcquireAll, "2", "a", "b", "v", "10000"}, ":2\r\n"},
		{[]string{"EVAL", testAcquireAll, "2", "b", "c", "w", "10000"}, ":0\r\n"},
		{[]string{"EXISTS", "c"}, ":0\r\n"},
		// Compare-and-expire, and the switch on ARGV[3].
		{[]string{"EVAL", testExtend, "1", "a", "v", "20000"}, ":1\r\n"},
		{[]string{"EVAL", testExtend, "1", "a", "x", "20000"}, ":0\r\n"},
		{[]string{"EVAL", testExtendSwitch, "1", "a", "v", "30000", "1"}, ":1\r\n"},
		{[]string{"EVAL", testExtendSwitch, "1", "a", "x", "30000", "0"}, ":0\r\n"},
		// An error reply is the convention's "no".
		{[]string{"EVAL", testAcquireOrError, "1", "a", "x", "10000"}, "-ERR ERROR\r\n"},
		{[]string{"EVAL", testAcquireOrError, "1", "e", "x", "10000"}, "+OK\r\n"},
		// A read-only script answers from what a quorum holds.
		{[]string{"EVAL", testRemaining, "1", "e", "nope"}, ":0\r\n"},
		// Every ttl within [min_ttl, max_ttl].
		{[]string{"EVAL", testExtend, "1", "a", "v", "288230376151712504"}, "-ERR ttl 288230376151712504 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"EVAL", testAcquireAll, "1", "z", "v", "x"}, "-ERR value is not an integer or out of range\r\n"},
	})
	// The extension reached a quorum: 30 s on every backend that had it.
	n := 0
	for _, m := range mrs {
		if m.TTL("a") > 25_000_000_000 {
			n++
		}
	}
	if n < 3 {
		t.Fatalf("the recognised extend reached %d backends", n)
	}
	if got := do(d, c, "EVAL", testRemaining, "1", "e", "x"); !strings.HasPrefix(got, ":") || got == ":0\r\n" {
		t.Fatalf("remaining ms of a held key = %q", got)
	}
}

// TestScriptsByVote: scripts of shapes no meaning covers run on every
// backend; the client gets what a quorum agreed on, with five, three and
// two of five backends answering, and with one backend answering
// otherwise.
func TestScriptsByVote(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"EVAL", testHashAcquire, "1", "h", "10000", "owner1"}, "$-1\r\n"},
		{[]string{"EVAL", testHashAcquire, "1", "h", "10000", "owner1"}, "$-1\r\n"}, // re-entered
		{[]string{"EVAL", testZAcquire, "1", "z", "tok", "0", "1", "10000"}, ":1\r\n"},
		{[]string{"EVAL", testZAcquire, "1", "z", "other", "0", "1", "10000"}, ":0\r\n"},
	})
	// Another owner gets the holder's remaining ttl: the backends' values
	// differ by a few ms, the reply is one of them, positive.
	if got := do(d, c, "EVAL", testHashAcquire, "1", "h", "10000", "owner2"); !strings.HasPrefix(got, ":") || strings.HasPrefix(got, ":-") || got == ":0\r\n" {
		t.Fatalf("hash acquire by another owner = %q, want the remaining ttl", got)
	}
	// One backend lost the hash: it would grant owner2, the quorum does not.
	mrs[0].Del("h")
	if got := do(d, c, "EVAL", testHashAcquire, "1", "h", "10000", "owner2"); !strings.HasPrefix(got, ":") {
		t.Fatalf("hash acquire with one backend disagreeing = %q", got)
	}
	// The hold count: two releases for two acquisitions.
	runAll(t, d, c, []run{
		{[]string{"EVAL", testHashRelease, "1", "h", "owner1"}, ":0\r\n"},
	})
	// Three of five answer (the one that disagreed is gone): still a
	// quorum; two: none.
	mrs[0].Close()
	mrs[4].Close()
	if got := do(d, c, "EVAL", testHashRelease, "1", "h", "owner1"); got != ":1\r\n" {
		t.Fatalf("release with three backends = %q", got)
	}
	mrs[2].Close()
	if got := do(d, c, "EVAL", testZAcquire, "1", "z2", "tok", "0", "1", "10000"); !strings.HasPrefix(got, "-NOQUORUM") {
		t.Fatalf("vote with two backends = %q, want -NOQUORUM", got)
	}
}

func TestScriptErrors(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	keys := "return redis.call('KEYS', '*')"
	undeclared := "return redis.call('SET', 'elsewhere', ARGV[1])"
	byArg := "return redis.call(ARGV[1], KEYS[1], ARGV[2])"
	runAll(t, d, c, []run{
		{[]string{"EVALSHA", "0000000000000000000000000000000000000000", "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"EVAL", "return 1", "0"}, ":1\r\n"},
		{[]string{"SCRIPT", "LOAD", "return 1"}, "$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n"},
		{[]string{"EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"}, ":1\r\n"},
		{[]string{"SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0000"}, "*2\r\n:1\r\n:0\r\n"},
		{[]string{"SCRIPT", "FLUSH"}, "+OK\r\n"},
		{[]string{"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"SCRIPT", "BOGUS"}, "-ERR unknown subcommand 'BOGUS'. Try SCRIPT HELP.\r\n"},
		{[]string{"EVAL", "return 1", "-1"}, "-ERR Number of keys can't be negative\r\n"},
		{[]string{"EVAL", "return 1", "2", "k"}, "-ERR Number of keys can't be greater than number of args\r\n"},
		{[]string{"EVAL", byArg, "1", "k", "PUBLISH", "m"}, ":0\r\n"},
	})
	for _, tc := range []struct{ src, want string }{
		{keys, "line 1: redis.call(\"KEYS\""},
		{undeclared, "line 1:"},
		{"return (", "ERR Error compiling script (new function): user_script:1:"},
	} {
		got := do(d, c, "EVAL", tc.src, "0", "v")
		if !strings.HasPrefix(got, "-ERR") || !strings.Contains(got, tc.want) {
			t.Errorf("EVAL %q = %q, want an error with %q", tc.src, got, tc.want)
		}
	}
	// A key built from a declared key stays within what it names: none may
	// reach the proxy's own keys.
	built := "return redis.call('SET', KEYS[1] .. ':fence', ARGV[1])"
	if got := do(d, c, "EVAL", built, "1", "redlock-proxy", "1"); !strings.Contains(got, "reserved by redlock-proxy") {
		t.Errorf("a built key that could reach the reserved keys = %q", got)
	}
	if got := do(d, c, "EVAL", built, "1", "app", "1"); got != "+OK\r\n" {
		t.Errorf("a built key under a declared key = %q", got)
	}
	// A literal before the declared key (a hash tag) is part of the
	// built key's start, checked the same way.
	tagged := "redis.call('SET', '{' .. KEYS[1] .. '}', ARGV[1]) return redis.call('GET', '{' .. KEYS[1] .. '}')"
	if got := do(d, c, "EVAL", tagged, "1", "app", "v1"); got != "$2\r\nv1\r\n" {
		t.Errorf("a hash-tagged key built from a declared key = %q", got)
	}
	prefixed := "return redis.call('SET', 'redlock-' .. KEYS[1], ARGV[1])"
	if got := do(d, c, "EVAL", prefixed, "1", "proxy:fence", "1"); !strings.Contains(got, "reserved by redlock-proxy") {
		t.Errorf("a literal and a declared key that reach the reserved keys = %q", got)
	}
	if got := do(d, c, "SCRIPT", "LOAD", "return ("); !strings.HasPrefix(got, "-ERR Error compiling script") {
		t.Errorf("SCRIPT LOAD of a text that is not Lua = %q", got)
	}
	if got := do(d, c, "EVAL", byArg, "1", "k", "FLUSHALL", "m"); !strings.HasPrefix(got, "-ERR redlock-proxy cannot run this script") || !strings.Contains(got, "ARGV[1] = \"FLUSHALL\"") {
		t.Errorf("a command name from ARGV outside the list = %q", got)
	}
}

// With scripts = "recognised" only recognised scripts run.
func TestScriptsRecognisedOnly(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	d.opts.RecognisedOnly = true
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	if got := do(d, c, "EVAL", testZAcquire, "1", "z", "tok", "0", "1", "10000"); !strings.HasPrefix(got, "-ERR redlock-proxy runs only scripts it recognises") {
		t.Fatalf("a vote-only script with scripts = recognised = %q", got)
	}
	if got := do(d, c, "EVAL", testRelease, "1", "z", "tok"); got != ":0\r\n" {
		t.Fatalf("a recognised script in catalog mode = %q", got)
	}
}

// TestRealLibraryScript reads redis-py's own release script (Debian's
// python3-redis), reindents it, and runs it by EVAL, SCRIPT LOAD and
// EVALSHA: it is recognised whatever its white space.
func TestRealLibraryScript(t *testing.T) {
	src, err := os.ReadFile("/usr/lib/python3/dist-packages/redis/lock.py")
	if err != nil {
		t.Skip("python3-redis is not installed (make test installs it)")
	}
	m := regexp.MustCompile(`(?s)LUA_RELEASE_SCRIPT = """(.*?)"""`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no release script in redis-py's lock.py")
	}
	reindented := strings.ReplaceAll(string(m[1]), "\n", "\r\n\t")
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	sha := sha1Of(reindented)
	runAll(t, d, c, []run{
		{[]string{"EVALSHA", sha, "1", "k", "v"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"SET", "k", "v", "NX", "PX", "5000"}, "+OK\r\n"},
		{[]string{"EVAL", reindented, "1", "k", "v"}, ":1\r\n"},
		{[]string{"SCRIPT", "LOAD", reindented}, "$40\r\n" + sha + "\r\n"},
		{[]string{"EVALSHA", sha, "1", "k", "v"}, ":0\r\n"},
	})
}

// Scripts that begin with a SELECT of the client's database, passed as
// ARGV[1] (as @sesamecare-oss/redlock does): they run when it is "0", are
// refused for any other database, and are refused altogether when a
// backend uses a database other than 0.
const (
	testSelectAcquire = `redis.pcall('select', tonumber(ARGV[1]))
for _, k in ipairs(KEYS) do
  if redis.call('exists', k) == 1 then return 0 end
end
for _, k in ipairs(KEYS) do redis.call('set', k, ARGV[2], 'PX', ARGV[3]) end
return #KEYS`
	testSelectRelease = `redis.call("SELECT", ARGV[1])
if redis.call("get", KEYS[1]) == ARGV[2] then return redis.call("del", KEYS[1]) end
return 0`
	testSelectZAdd = `redis.call('select', 0)
redis.call('zadd', KEYS[1], ARGV[2], ARGV[1])
return redis.call('zcard', KEYS[1])`
)

func TestScriptsSelectZero(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"EVAL", testSelectAcquire, "2", "a", "b", "0", "tok", "10000"}, ":2\r\n"},
		{[]string{"EVAL", testSelectAcquire, "1", "b", "0", "other", "10000"}, ":0\r\n"},
		{[]string{"EVAL", testSelectRelease, "1", "a", "0", "other"}, ":0\r\n"},
		{[]string{"EVAL", testSelectRelease, "1", "a", "0", "tok"}, ":1\r\n"},
		{[]string{"EVAL", testSelectZAdd, "1", "z", "m", "5"}, ":1\r\n"},
	})
	// The acquire was carried out as the quorum operation: b holds tok on
	// the backends, in database 0.
	n := 0
	for _, m := range mrs {
		if v, err := m.Get("b"); err == nil && v == "tok" {
			n++
		}
	}
	if n < 3 {
		t.Fatalf("b holds tok on %d backends", n)
	}
	for _, argv := range [][]string{{"1", "tok"}, {"00", "tok"}} {
		got := do(d, c, append([]string{"EVAL", testSelectRelease, "1", "b"}, argv...)...)
		if !strings.HasPrefix(got, "-ERR redlock-proxy cannot run this script") || !strings.Contains(got, "line 1: SELECT with ARGV[1] = ") {
			t.Errorf("SELECT ARGV[1] = %q: %q", argv[0], got)
		}
	}
	if got := do(d, c, "EVAL", testSelectRelease, "1", "b", "0", "tok"); got != ":1\r\n" {
		t.Fatalf("release after the refusals = %q, want :1", got)
	}

	// A backend in another database: every script that selects is refused.
	d.opts.OtherDB = "backend 127.0.0.1:6380 uses database 3"
	for _, src := range []string{testSelectAcquire, testSelectZAdd} {
		got := do(d, c, "EVAL", src, "1", "k", "0", "tok", "10000")
		if !strings.HasPrefix(got, "-ERR redlock-proxy cannot run this script") || !strings.Contains(got, "backend 127.0.0.1:6380 uses database 3") {
			t.Errorf("with a backend in database 3: %q", got)
		}
	}
	if got := do(d, c, "EVAL", testRelease, "1", "k", "tok"); got != ":0\r\n" {
		t.Errorf("a script without SELECT with a backend in database 3 = %q", got)
	}
}

// TestScriptsUntilDeadline: a script whose ttl argument is a Unix time
// (SET NX PXAT, PEXPIREAT: rueidislock's shape, in our spelling) is
// recognised and runs as a quorum operation whose ttl is the time left
// until that deadline on the proxy's clock, within [min_ttl, max_ttl]; a
// deadline nearer than min_ttl, or past, runs the script by vote.
func TestScriptsUntilDeadline(t *testing.T) {
	const take = `local ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PXAT', ARGV[2])
redis.call('GET', KEYS[1])
return ok`
	const extendAt = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIREAT', KEYS[1], ARGV[2])`
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	at := func(ms int64) string { return strconv.FormatInt(time.Now().UnixMilli()+ms, 10) }
	past := strconv.FormatInt(time.Now().UnixMilli()-1000, 10)
	runAll(t, d, c, []run{
		{[]string{"EVAL", take, "1", "k", "tok", at(20_000)}, "+OK\r\n"},
		{[]string{"EVAL", take, "1", "k", "other", at(20_000)}, "$-1\r\n"},
		{[]string{"EVAL", extendAt, "1", "k", "other", at(40_000)}, ":0\r\n"},
		{[]string{"EVAL", extendAt, "1", "k", "tok", at(40_000)}, ":1\r\n"},
	})
	n := 0
	for _, m := range mrs {
		if ttl := m.TTL("k"); ttl > 35*time.Second && ttl <= 40*time.Second {
			n++
		}
	}
	if n < 3 {
		t.Fatalf("the extend until the deadline reached %d backends", n)
	}
	// A deadline past is no lock to take: the script runs by vote, as on
	// one Redis (OK, the key gone at once); only recognised scripts: the
	// ttl range error.
	if got := do(d, c, "EVAL", take, "1", "p", "tok", past); got != "+OK\r\n" {
		t.Fatalf("a deadline in the past = %q, want Redis's +OK", got)
	}
	for i, m := range mrs {
		if m.Exists("p") {
			t.Errorf("backend %d holds the key taken until a past deadline", i)
		}
	}
	d.opts.RecognisedOnly = true
	if got := do(d, c, "EVAL", take, "1", "p", "tok", past); !strings.HasPrefix(got, "-ERR ttl -") {
		t.Fatalf("a deadline in the past, only recognised scripts = %q, want the ttl range error", got)
	}
	d.opts.RecognisedOnly = false
	if got := do(d, c, "EVAL", take, "1", "f", "tok", at(10*60_000)); !strings.HasPrefix(got, "-ERR ttl ") {
		t.Fatalf("a deadline beyond max_ttl = %q, want the ttl range error", got)
	}
}
