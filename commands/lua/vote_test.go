package lua

import (
	"strings"
	"testing"
)

// Lock shapes outside the catalog, written for these tests: they must run
// by vote, unrecognised.
func TestUnknownShapesRunByVote(t *testing.T) {
	cases := []struct {
		name, src string
		check     func(t *testing.T, v *Vote)
	}{
		{"sorted-set lock with TIME (like Symfony's)", `
local key = KEYS[1]
local now = redis.call('TIME')
local ms = now[1] * 1000 + math.floor(now[2] / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', ms)
if redis.call('ZSCORE', key, ARGV[1]) then
  redis.call('ZADD', key, ms + ARGV[2], ARGV[1])
  redis.call('PEXPIREAT', key, ms + ARGV[2])
  return 1
end
if redis.call('ZCOUNT', key, '-inf', '+inf') > 0 then
  return nil
end
redis.call('ZADD', key, ms + ARGV[2], ARGV[1])
redis.call('PEXPIREAT', key, ms + ARGV[2])
return 1`, func(t *testing.T, v *Vote) {
			if !v.ReadsTime || !v.Writes || v.Publishes || v.DerivedKeys {
				t.Errorf("vote flags %+v", v)
			}
		}},
		{"re-entrant hash lock, acquire (like Redisson's)", `
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`, nil},
		{"re-entrant hash lock, unlock with a publish named by ARGV[4] and a latch key built from KEYS[3]", `
local latch = KEYS[3] .. ':' .. ARGV[3]
local done = redis.call('get', latch)
if done ~= false then return tonumber(done) end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
local result
if count > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  result = 0
else
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  result = 1
end
redis.call('set', latch, result, 'px', ARGV[5])
return result`, func(t *testing.T, v *Vote) {
			if len(v.ArgCommands) != 1 || v.ArgCommands[0] != 4 || !v.DerivedKeys {
				t.Errorf("vote %+v", v)
			}
			for _, name := range []string{"publish", "SPUBLISH", "lpush"} {
				if p := v.CheckRun(1, []string{"m", "30000", "id", name, "5000"}); p != nil {
					t.Errorf("ARGV[4] = %s refused: %v", name, p)
				}
			}
			p := v.CheckRun(1, []string{"m", "30000", "id", "flushall", "5000"})
			if p == nil || p.Line != 13 || !strings.Contains(p.Reason, "FLUSHALL empties the database") {
				t.Errorf("ARGV[4] = flushall: %v", p)
			}
			if p := v.CheckRun(1, []string{"m", "30000", "id", "del", "5000"}); p == nil || !strings.Contains(p.Reason, "argument 2 is a key of DEL") {
				t.Errorf("ARGV[4] = del: %v", p)
			}
			if p := v.CheckRun(1, []string{"m", "30000", "id"}); p != nil {
				t.Errorf("ARGV[4] missing: %v", p)
			}
		}},
		{"release that also pushes a signal (like python-redis-lock's)", `
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 1 end
redis.call('del', KEYS[2])
redis.call('lpush', KEYS[2], 1)
redis.call('pexpire', KEYS[2], ARGV[2])
redis.call('del', KEYS[1])
return 0`, nil},
		{"release that also writes another declared key", `
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('set', KEYS[2], 'released')
  return redis.call('del', KEYS[1])
end
return 0`, nil},
		{"multi-key acquire that is not all-or-nothing", `
for _, k in ipairs(KEYS) do
  if not redis.call('set', k, ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
end
return #KEYS`, nil},
		{"release of a key that holds ARGV[1] or ARGV[2]", `
local v = redis.call('get', KEYS[1])
if v == ARGV[1] or v == ARGV[2] then return redis.call('del', KEYS[1]) end
return 0`, nil},
		{"release with a backdoor token", `
local v = redis.call('get', KEYS[1])
if v == ARGV[1] or ARGV[1] == 'admin' then return redis.call('del', KEYS[1]) end
return 0`, nil},
		{"release with a backdoor on two arguments together", `
local v = redis.call('get', KEYS[1])
if v == ARGV[1] or (ARGV[2] == 'a' and ARGV[3] == 'b') then return redis.call('del', KEYS[1]) end
return 0`, nil},
		{"release that keeps keys holding a special value", `
local v = redis.call('get', KEYS[1])
if v == ARGV[1] and v ~= 'pinned' then return redis.call('del', KEYS[1]) end
return 0`, nil},
		{"extend that caps the ttl", `
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('pexpire', KEYS[1], math.min(tonumber(ARGV[2]), 60000))`, nil},
		{"switch on a number, compared loosely", `
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[2])
if tonumber(ARGV[3]) == 0 then ttl = ttl + redis.call('pttl', KEYS[1]) end
return redis.call('pexpire', KEYS[1], ttl)`, nil},
		{"release that also deletes a fourth key when there is one", `
if KEYS[4] then redis.call('del', KEYS[4]) end
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0`, nil},
		{"release that deletes any value when given more than ten keys", `
local v = redis.call('get', KEYS[1])
if v == ARGV[1] or #KEYS > 10 then return redis.call('del', KEYS[1]) end
return 0`, nil},
		{"read of an absolute expiry time", `
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpiretime', KEYS[1]) end
return 0`, nil},
		{"release, counting with INCR", `
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('incr', KEYS[2])
  return redis.call('del', KEYS[1])
end
return 0`, nil},
		{"aliases of redis.call and redis", `
local call, r = redis.call, redis
local k = KEYS[1]
if call('GET', k) == ARGV[1] then return r.pcall('HDEL', k, 'owner') end
return 0`, nil},
		{"keys through locals, loops, and/or, function parameters, unpack", `
local function drop(key) return redis.call('UNLINK', key) end
local first = #KEYS > 1 and KEYS[2] or KEYS[1]
for i = 1, #KEYS do redis.call('HSET', KEYS[i], 'seen', 1) end
for _, k in pairs(KEYS) do drop(k) end
redis.call('DEL', unpack(KEYS))
redis.call('ZUNIONSTORE', first, #KEYS, unpack(KEYS))
redis.call('ZINTERSTORE', KEYS[1], 2, KEYS[2], KEYS[3], 'WEIGHTS', ARGV[1], ARGV[2])
redis.call('MSET', KEYS[1], ARGV[1], KEYS[2], ARGV[2])
return drop(first)`, nil},
		{"pcall of redis.call, and PUBLISH to a channel from ARGV", `
local ok, v = pcall(redis.call, 'GET', KEYS[1])
redis.call('PUBLISH', ARGV[1] .. ':released', v or '')
return ok and 1 or 0`, func(t *testing.T, v *Vote) {
			if !v.Publishes || v.Writes {
				t.Errorf("vote flags %+v", v)
			}
		}},
		{"keys built with a literal before KEYS (a hash tag), through locals", `
local lock_key = '{' .. KEYS[1] .. '}'
local count_key = lock_key .. ':count:' .. ARGV[1]
local n = tonumber(redis.call('GET', count_key) or '0')
if n > 0 then
	redis.call('INCR', count_key)
	redis.call('PEXPIRE', lock_key, ARGV[2])
	return 'OK'
end
if redis.call('SET', lock_key, ARGV[1], 'NX', 'PX', ARGV[2]) then
	redis.call('SET', count_key, 1, 'PX', ARGV[2])
	return 'OK'
end
return nil`, func(t *testing.T, v *Vote) {
			if !v.DerivedKeys || len(v.KeyPrefixes) != 1 || v.KeyPrefixes[0] != "{" {
				t.Errorf("DerivedKeys %v, KeyPrefixes %q; want true, [{]", v.DerivedKeys, v.KeyPrefixes)
			}
		}},
		{"values and channels built from KEYS are not keys", `
redis.call('SET', KEYS[1], 'x:' .. KEYS[1])
return redis.call('PUBLISH', 'chan:' .. KEYS[1], ARGV[1])`, func(t *testing.T, v *Vote) {
			if v.DerivedKeys || len(v.KeyPrefixes) != 0 {
				t.Errorf("DerivedKeys %v, KeyPrefixes %q; want false, none", v.DerivedKeys, v.KeyPrefixes)
			}
		}},
		{"old replication controls", "redis.replicate_commands()\nredis.set_repl(redis.REPL_ALL)\nreturn redis.call('hdel', KEYS[1], ARGV[1])", nil},
		{"shebang with flags", "#!lua flags=no-writes\nreturn redis.call('HGET', KEYS[1], 'owner')", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := analyze(t, c.src)
			if a.Vote == nil || a.Problem != nil {
				t.Fatalf("not eligible for vote: %v", a.Problem)
			}
			if a.Meaning != nil {
				t.Fatalf("recognised as %v; want vote", a.Meaning)
			}
			if a.Verdict() != ByVote {
				t.Fatalf("verdict %v", a.Verdict())
			}
			t.Logf("not recognised: %s", a.NotRecognised)
			if c.check != nil {
				c.check(t, a.Vote)
			}
		})
	}
}

// Scripts that cannot run by vote, refused with their line and reason.
func TestRefused(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		reason    string
	}{
		{"KEYS", "local v = 1\nlocal ks = redis.call(\"KEYS\", \"lock:*\")\nreturn #ks", 2,
			`redis.call("KEYS", …): KEYS scans the whole keyspace and cannot run by vote`},
		{"SCAN through pcall", "return redis.pcall('scan', 0)", 1, `redis.pcall("scan", …): SCAN scans the whole keyspace`},
		{"FLUSHALL", "\n\nredis.call('FlushAll')", 3, "FLUSHALL empties the database"},
		{"CONFIG", "redis.call('config', 'set', 'maxmemory', '1')", 1, "CONFIG administers or inspects the server"},
		{"EVAL", "return redis.call('eval', 'return 1', 0)", 1, "EVAL runs other scripts"},
		{"SELECT", "redis.call('select', 1)", 1, "SELECT reaches another database"},
		{"SORT", "return redis.call('sort', KEYS[1], 'BY', 'w_*')", 1, "SORT with BY or GET reads keys named by patterns"},
		{"BLPOP", "return redis.call('blpop', KEYS[1], 0)", 1, "BLPOP blocks"},
		{"stream command", "return redis.call('xadd', KEYS[1], '*', 'f', 'v')", 1, "XADD with the id * takes its id from each backend's clock"},
		{"XADD id from ARGV", "return redis.call('XADD', KEYS[1], ARGV[1], 'f', 'v')", 1, "XADD's options and id must be string literals"},
		{"XTRIM strategy from ARGV", "return redis.call('XTRIM', KEYS[1], ARGV[1], '~', 10)", 1, "XTRIM's options must be string literals"},
		{"XADD approximate trim", "return redis.call('XADD', KEYS[1], 'MAXLEN', '~', 10, '1-1', 'f', 'v')", 1, "XADD with ~ trims where each backend's stream nodes end"},
		{"XTRIM approximate", "return redis.call('XTRIM', KEYS[1], 'MINID', '~', ARGV[1])", 1, "XTRIM with ~ trims"},
		{"XTRIM modifier from ARGV", "return redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[1])", 1, "an argument could be ~"},
		{"COPY DB", "return redis.call('COPY', KEYS[1], KEYS[2], 'DB', 1)", 1, "COPY with DB reaches another database"},
		{"backtracking pattern", "local s = string.rep('a-', 500)\nreturn string.find(s, '(.-)-(.-)-(.-)-c')", 2, "Lua pattern that may backtrack too long on a subject of 1000 bytes on a probe"},
		{"COPY options from ARGV", "return redis.call('COPY', KEYS[1], KEYS[2], unpack(ARGV))", 1, "an argument could be DB"},
		{"SORT GET", "return redis.call('SORT', KEYS[1], 'LIMIT', 0, 5, 'GET', '#')", 1, "SORT with BY or GET"},
		{"SORT STORE to ARGV", "return redis.call('SORT', KEYS[1], 'STORE', ARGV[1])", 1, "argument 3 is a key of SORT"},
		{"SORT ALPHA STORE", "return redis.call('SORT', KEYS[1], 'ALPHA', 'STORE', KEYS[2])", 1, "ALPHA and STORE orders by each backend's locale"},
		{"XREAD", "return redis.call('XREAD', 'STREAMS', KEYS[1], '0')", 1, "XREAD"},
		{"key built with ARGV before KEYS", "return redis.call('SET', ARGV[2] .. KEYS[1], ARGV[1])", 1, "does not come from KEYS"},
		{"a local built with two different prefixes", "local k = '{' .. KEYS[1] .. '}'\nif ARGV[1] == 'x' then k = 'other:' .. KEYS[1] end\nreturn redis.call('DEL', k)", 3, "argument 1 is a key of DEL"},
		{"key from ARGV", "if true then\n  redis.call('DEL', ARGV[1])\nend", 2,
			`redis.call("DEL", …): argument 1 is a key of DEL but does not come from KEYS`},
		{"literal key", "return redis.call('get', 'config:lock')", 1, "argument 1 is a key of GET"},
		{"key built from ARGV only", "return redis.call('get', 'lock:' .. ARGV[1])", 1, "argument 1 is a key of GET"},
		{"MSET value in a key position", "redis.call('MSET', KEYS[1], ARGV[1], ARGV[2], ARGV[3])", 1, "argument 3 is a key of MSET"},
		{"LMOVE destination", "return redis.call('LMOVE', KEYS[1], ARGV[1], 'LEFT', 'RIGHT')", 1, "argument 2 is a key of LMOVE"},
		{"numkeys literal", "return redis.call('ZUNIONSTORE', KEYS[1], 2, KEYS[2], ARGV[1])", 1, "argument 4 is a key of ZUNIONSTORE"},
		{"numkeys computed", "return redis.call('ZUNION', ARGV[1], KEYS[1], 'WITHSCORES')", 1, "argument 3 is a key of ZUNION"},
		{"unpack(ARGV) as keys", "return redis.call('DEL', unpack(ARGV))", 1, "argument 1 is a key of DEL"},
		{"loop over ARGV as keys", "for _, k in ipairs(ARGV) do\n redis.call('DEL', k)\nend", 2, "argument 1 is a key of DEL"},
		{"function parameter fed from ARGV", "local function drop(k) return redis.call('DEL', k) end\ndrop(KEYS[1])\nreturn drop(ARGV[1])", 1, "argument 1 is a key of DEL"},
		{"escaped function", "local function drop(k) return redis.call('DEL', k) end\nreturn pcall(drop, KEYS[1])", 1, "argument 1 is a key of DEL"},
		{"shadowed KEYS", "local KEYS = {'x'}\nreturn redis.call('DEL', KEYS[1])", 2, "argument 1 is a key of DEL"},
		{"table of keys", "local t = {KEYS[1]}\nreturn redis.call('DEL', t[1])", 2, "argument 1 is a key of DEL"},
		{"computed command name", "return redis.call('DE' .. 'L', KEYS[1])", 1, "computes its command name"},
		{"command name from a table", "local c = {'DEL'}\nreturn redis.call(c[1], KEYS[1])", 2, "computes its command name"},
		{"no command", "return redis.call()", 1, "redis.call() needs a command name"},
		{"loadstring", "local f = loadstring('return 1')\nreturn f()", 1, "loadstring loads code at run time"},
		{"_G", "local g = _G\nreturn g['redis'].call('flushall')", 1, "_G reaches the globals table"},
		{"getfenv", "return getfenv(1).redis", 1, "getfenv reaches the globals table"},
		{"setfenv", "setfenv(1, {})", 1, "setfenv changes a function's globals"},
		{"the wrapper's names", "local __rp_f = 1\nfor w in string.gmatch('a', '%a') do return __rp_f end", 2, "names that begin with __rp_ are redlock-proxy's"},
		{"string.dump", "return string.dump(function() end)", 1, "string.dump is not available"},
		{"dump as a method", "local s = 'x'\nreturn s:dump()", 2, "string.dump is not available"},
		{"debug", "return debug.getinfo(1)", 1, "debug reaches the interpreter's internals"},
		{"os.execute", "os.execute('true')", 1, "os reaches the operating system"},
		{"redis.call in a table", "local t = {redis.call}\nreturn t[1]('flushall')", 1, "passes redis.call on as a value"},
		{"redis.call as an argument", "return string.gsub('KEYS', '.*', redis.call)", 1, "passes redis.call on as a value"},
		{"broken alias", "local call = redis.call\ncall = print\nreturn call('flushall')", 1, "passes redis.call on as a value"},
		{"redis table as a value", "local t = setmetatable({}, {__index = redis})\nreturn t.call('flushall')", 1, "uses the redis table as a value"},
		{"computed redis field", "return redis['ca' .. 'll']('flushall')", 1, "redis.a computed field is not available"},
		{"redis.setresp", "redis.setresp(3)\nreturn 1", 1, "redis.setresp is not available"},
		{"method call on redis", "return redis:call('get', KEYS[1])", 1, "redis:call(…) passes the redis table"},
		{"assigns KEYS", "KEYS = {'a'}\nreturn 1", 1, "assigns to KEYS"},
		{"changes KEYS", "KEYS[1] = 'other'\nreturn redis.call('del', KEYS[1])", 1, "changes KEYS"},
		{"changes KEYS through an alias", "local k = KEYS\nk[1] = 'other'\nreturn redis.call('del', KEYS[1])", 2, "changes KEYS"},
		{"table.insert on KEYS", "table.insert(KEYS, 'x')\nreturn redis.call('del', KEYS[2])", 1, "passes KEYS on as a value"},
		{"changes redis", "redis.call = function() end", 1, "changes the redis table"},
		{"goto", "for i = 1, 3 do\n  goto continue\n  ::continue::\nend", 2, "goto and labels are Lua 5.2"},
		{"endless while", "local n = 0\nwhile true do\n  n = n + 1\nend", 2, "a while loop has no bound"},
		{"endless repeat", "repeat\n  redis.call('incr', KEYS[1])\nuntil false", 1, "a repeat loop has no bound"},
		{"xpcall of redis.call", "return xpcall(redis.call, print)", 1, "xpcall(redis.call, …) calls it without arguments"},
		{"does not parse", "local x = 1\nif x then\n  return )\nend", 3, "the script does not parse"},
		{"unterminated", "local x = 1\nif x then\n  return 1\n", 4, "the script does not parse"},
		{"break outside a loop", "local x = 1\nbreak", 2, "the script does not compile"},
		{"other engine", "#!js\nreturn 1", 1, "engine other than lua"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := analyze(t, c.src)
			if a.Problem == nil || a.Vote != nil || a.Meaning != nil || a.Verdict() != Refused {
				t.Fatalf("not refused: meaning %v, vote %+v, problem %v", a.Meaning, a.Vote, a.Problem)
			}
			if a.Problem.Line != c.line || !strings.Contains(a.Problem.Reason, c.reason) {
				t.Fatalf("refused with %q; want line %d and %q", a.Problem, c.line, c.reason)
			}
		})
	}
}

// A recognised script reports what it would fall back to.
func TestRecognisedFallsBackToVote(t *testing.T) {
	a := analyze(t, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
	if a.Verdict() != Recognised || a.Fallback() != ByVote || a.Vote == nil || !a.Vote.Writes {
		t.Fatalf("verdict %v, fallback %v, vote %+v", a.Verdict(), a.Fallback(), a.Vote)
	}
	if got := a.Problem; got != nil {
		t.Fatalf("problem %v", got)
	}
	if !strings.Contains((&Problem{Line: 4, Reason: "x"}).Error(), "line 4: x") {
		t.Fatal("Problem.Error")
	}
}

func TestAllowed(t *testing.T) {
	for name, want := range map[string]bool{"get": true, "PUBLISH": true, "spublish": true, "Set": true,
		"KEYS": false, "flushall": false, "eval": false, "": false, "config": false, "hset": true, "time": true} {
		if got := Allowed(name); got != want {
			t.Errorf("Allowed(%q) = %v", name, got)
		}
	}
}

// Allowed reports whether a script run by vote may call command (any case).
// It is the run-time check for command names a script takes from ARGV;
// Vote.CheckRun does it and also checks those calls' key arguments.
func Allowed(command string) bool {
	_, ok := allowed[strings.ToUpper(command)]
	return ok
}
