package commands

import (
	"context"
	"regexp"
	"strconv"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Every command a script by vote may call (lua.KeyCommands: key-local and
// deterministic) that the table has no row for runs outside a script the
// way it runs inside one: as a fixed script that only calls it, on every
// voting backend by vote (lease.Manager.Vote), under the gates of its
// keys and script_timeout, its reply what a quorum agreed on, compared as
// the command's reply is (unordered replies as multisets). Its keys pass
// the same checks as a script's declared keys (max_key_bytes, the
// reserved prefix, the user's key patterns) and its other arguments the
// value bound. Commands that cannot run by vote, and the forms of served
// ones that each backend would run its own way (lua.KeyCommand.Form), are
// answered with the reason (refusal) instead of "unknown command". COPY
// gives the copy the expiry the proxy answers for its source (copyScript).

// errCannotServe answers a command Redis has that cannot run by vote.
const errCannotServe = "ERR redlock-proxy cannot serve this command: %s. See docs/compatibility.md"

// lockWrites are the keyed commands whose writes are a lock's, not data
// (docs/safety.md, "Locks and data"): MSETNX acquires its keys. They run
// as scripts by vote do, their copies bounded to max_ttl and held beyond.
// A command that sets its key's expiry and keeps its value (GETEX's
// options: lua.KeyCommand.Expires) is a lock's expiry on a lock
// (lease.Manager.VoteExpiry); every other keyed write is data, whatever
// its keys were (lease.Manager.VoteData).
var lockWrites = map[string]bool{"MSETNX": true}

// nullArrays are the commands whose nil is an array's (RESP2 *-1, where
// a script's nil reads as $-1): LMPOP's and ZMPOP's reply, each missing
// member's position in GEOPOS's.
var nullArrays = map[string]bool{"LMPOP": true, "ZMPOP": true, "GEOPOS": true}

// nullAsArray is r with its nil, or its elements' (GEOPOS), as the null
// array.
func nullAsArray(r Reply) Reply {
	if a, ok := r.(Array); ok {
		for i := range a {
			if a[i] == (Null{}) {
				a[i] = NullArray{}
			}
		}
		return a
	}
	if r == (Null{}) {
		return NullArray{}
	}
	return r
}

// keyed is what the handler of one generated row needs.
type keyed struct {
	cmd    lua.KeyCommand
	script *script.Script
}

// keyedRows returns a row for each command of lua.KeyCommands that fixed
// has none for.
func keyedRows(fixed []Command) []Command {
	have := make(map[string]bool, len(fixed))
	for _, c := range fixed {
		have[c.Name] = true
	}
	var rows []Command
	for _, kc := range lua.KeyCommands() {
		if have[kc.Name] {
			continue
		}
		k := &keyed{cmd: kc, script: keyedScript(kc)}
		flags := Reads
		if kc.Writes {
			flags = Writes
		}
		first, last := kc.First, kc.Last
		if last > 0 && last == first {
			last = 0
		}
		rows = append(rows, Command{
			Name: kc.Name, Arity: kc.Arity, Flags: flags, Key: first, LastKey: last, KeyStep: kc.Step, NumKeys: kc.NumKeys, Movable: kc.Movable,
			Group: keyedGroup(kc.Name), Summary: "Runs on every backend by vote, as a script that only calls it",
			run: func(d *Dispatcher, ctx context.Context, c *Client, args [][]byte) Reply {
				return d.keyed(ctx, c, k, args)
			},
			keys:  kc.Keys,
			reply: func(c *Client, args [][]byte, r Reply) Reply { return keyedReply(c, kc, args, r) },
		})
	}
	return rows
}

// maxKeyedArgs is the most arguments a keyed command by vote may carry:
// its script hands them on with unpack(ARGV), and Redis's Lua unpacks at
// most about 8000 values (LUAI_MAXCSTACK).
const maxKeyedArgs = 7900

// copyScript is COPY's: its last ARGV is the expiry the proxy holds the
// source to ("" when none: the copy keeps the source's own), given to the
// copy, so that the clamp holds the copy as it holds the source instead
// of taking the source's lease on the backends for the copy's expiry.
var copyScript = script.New(`local n = #ARGV
local r = redis.pcall('COPY', unpack(ARGV, 1, n - 1))
if r == 1 and ARGV[n] == '-1' then
	redis.call('PERSIST', KEYS[2])
elseif r == 1 and ARGV[n] ~= '' then
	redis.call('PEXPIRE', KEYS[2], ARGV[n])
end
return r`)

// keyedScript is the script that runs kc with the arguments as sent;
// pcall hands a command error (WRONGTYPE, a syntax error) back as the
// reply, as Redis answers it.
func keyedScript(kc lua.KeyCommand) *script.Script {
	if kc.Name == "COPY" {
		return copyScript
	}
	s := script.New("return redis.pcall('" + kc.Name + "', unpack(ARGV))")
	switch {
	case kc.Pairs:
		return s.ForVote(script.Shape{Order: script.PairsAnyOrder}, nil)
	case kc.Unordered:
		return s.ForVote(script.Shape{Order: script.AnyOrder}, nil)
	}
	return s
}

// keyedGroup is the command's group as COMMAND DOCS names it.
func keyedGroup(name string) string {
	switch name {
	case "COPY", "SORT", "SORT_RO":
		return "generic"
	}
	switch {
	case strings.HasPrefix(name, "PF"):
		return "hyperloglog"
	case strings.HasPrefix(name, "GEO"):
		return "geo"
	case name[0] == 'X':
		return "stream"
	case strings.HasPrefix(name, "BIT") || name == "SETBIT" || name == "GETBIT":
		return "bitmap"
	case name[0] == 'H':
		return "hash"
	case name[0] == 'Z':
		return "sorted-set"
	case name[0] == 'S' && !strings.HasPrefix(name, "SET") && name != "SUBSTR" && name != "STRLEN":
		return "set"
	case name[0] == 'L' && name != "LCS" || strings.HasPrefix(name, "RPOP") || strings.HasPrefix(name, "RPUSH"):
		return "list"
	}
	switch name {
	case "UNLINK", "TOUCH", "EXPIREAT", "PEXPIREAT", "EXPIRETIME", "PEXPIRETIME", "DEL", "EXISTS", "TYPE", "EXPIRE", "PEXPIRE", "PERSIST", "TTL", "PTTL":
		return "generic"
	}
	return "string"
}

// keyed runs the generated row k's command by vote. args[0] is the name
// as sent; the script receives every later argument as ARGV and the keys
// among them as KEYS, which the gates and a migration follow.
func (d *Dispatcher) keyed(ctx context.Context, c *Client, k *keyed, args [][]byte) Reply {
	if len(args)-1 > maxKeyedArgs {
		return Errorf("ERR redlock-proxy runs %s by vote as a script, which takes at most %d arguments (the backends' Lua unpacks no more)", k.cmd.Name, maxKeyedArgs)
	}
	if why := k.cmd.Form(args); why != "" {
		return Errorf(errCannotServe, why)
	}
	isKey := make([]bool, len(args))
	var keys []string
	for _, p := range k.cmd.KeyPositions(args) {
		if r := d.checkKey(args[p]); r != nil {
			return r
		}
		isKey[p] = true
		keys = append(keys, string(args[p]))
	}
	argv := make([]string, len(args)-1)
	for i, a := range args[1:] {
		if !isKey[i+1] {
			if r := d.checkValue(a); r != nil {
				return r
			}
		}
		argv[i] = string(a)
	}
	if k.script == copyScript {
		e, err := heldExpiry(ctx, d.leases, keys[0])
		if err != nil {
			return d.lockError(err)
		}
		argv = append(argv, e)
	}
	s := k.script
	if r := pastWriteBudget(k, keys, args); r != nil {
		return r
	}
	if d.checkedAtRun(k) {
		argv = append(argv, enforceArgs(c)...)
		s = d.scripts.enforced(k.script)
	}
	var v any
	var err error
	switch {
	case k.cmd.Writes && k.cmd.Expires && len(args) > 2: // with an expiry option
		v, err = d.leases.VoteExpiry(ctx, s, keys, argv)
	case k.cmd.Writes && !lockWrites[k.cmd.Name]:
		v, err = d.leases.VoteData(ctx, s, keys, argv) // data: the expiry as the command leaves it
	default:
		v, err = d.leases.Vote(ctx, s, keys, argv, k.cmd.Writes || k.cmd.Caches)
	}
	if err != nil {
		return d.lockError(err)
	}
	return keyedReply(c, k.cmd, args, backendReply(v))
}

// keyedReply is the reply r of kc's script as the command alone answers
// it: Redis's own error texts (alone), the null array where Redis sends
// one, and in RESP3 scores as doubles, pairs as a map, a set's members as
// a set.
func keyedReply(c *Client, kc lua.KeyCommand, args [][]byte, r Reply) Reply {
	if e, ok := r.(Error); ok {
		return alone(e, args)
	}
	if nullArrays[kc.Name] {
		r = nullAsArray(r)
	}
	if c.Proto() == 3 && keyedGroup(kc.Name) == "sorted-set" {
		return scoresRESP3(args, r)
	}
	if a, ok := r.(Array); ok && c.Proto() == 3 {
		switch {
		case (kc.Pairs || kc.Name == "LCS") && len(a)%2 == 0: // LCS with IDX: a map in RESP3
			m := make(Map, len(a)/2)
			for i := range m {
				key, _ := a[2*i].(BulkString)
				m[i] = KV{Key: string(key), Value: a[2*i+1]}
			}
			return m
		case kc.Unordered && strings.HasPrefix(kc.Name, "S"):
			return Set(a) // SMEMBERS, SINTER, SUNION, SDIFF; HKEYS and HVALS stay arrays, as Redis sends them
		}
	}
	return r
}

// alone turns the errors a backend gives a command only because it runs
// in a script into those it gives the command sent on its own: a backend
// older than the command (HEXPIRE before Redis 7.4) or than the form sent
// (ZRANK … WITHSCORE before 7.2) refuses it inside a script with texts
// that name the script, and clients match Redis's texts. A refusal of the
// run-time check (SETRANGE past max_value_bytes) loses the place in the
// script Redis appends to it (" script: <sha>, on @user_script:1.").
func alone(e Error, args [][]byte) Error {
	switch {
	case strings.HasPrefix(string(e), "ERR Unknown Redis command called from script"):
		return unknownCommand(args)
	case strings.HasPrefix(string(e), "ERR Wrong number of args calling Redis command from script"):
		return Errorf(errWrongArity, strings.ToLower(string(args[0])))
	}
	return Error(scriptPlace.ReplaceAllString(string(e), ""))
}

// scriptPlace is where in a script Redis 7 says an error was raised.
var scriptPlace = regexp.MustCompile(` script: [0-9a-f]{40}, on @user_script:[0-9]+\.$`)

// checkedAtRun reports whether k's call runs in the wrapper that checks
// it as it runs (script.Script.Enforced), as a script's calls are. Its
// keys were checked here as the wrapper would check them (every key
// position of the same table: the reserved prefix in keyed, the user's
// patterns in permit), every other argument within max_value_bytes and
// the write budget (pastWriteBudget), and a fixed script has no client
// code: what only the wrapper can check is what a command may grow a
// value to past its arguments (SETRANGE, SETBIT, APPEND, BITFIELD:
// script.GrowsValue). The others run without it: a plain call, not a
// wrapper that copies KEYS and ARGV and makes its closures on each run
// (about half the time of a call on the backend: docs/benchmarks.md).
func (d *Dispatcher) checkedAtRun(k *keyed) bool {
	return d.scripts.enforce != nil && script.GrowsValue(k.cmd.Name)
}

// pastWriteBudget refuses a keyed write past one run's write budget
// before it is sent: the keys and bytes a keyed command writes are its
// arguments, known here, and the run-time check would refuse it on every
// backend (counting every key of a write command, as it does in a
// script) after the vote's order locks were taken on all of them.
func pastWriteBudget(k *keyed, keys []string, args [][]byte) Reply {
	if !k.cmd.Writes {
		return nil
	}
	n := 0
	for _, a := range args[1:] {
		n += len(a)
	}
	switch {
	case len(keys) > scriptWriteKeys:
		return Errorf("ERR %s would write more than %d keys, the most one write by vote may (redlock-proxy: see docs/safety.md)", k.cmd.Name, scriptWriteKeys)
	case n > scriptWriteBytes:
		return Errorf("ERR %s would write more than %d bytes, the most one write by vote may (redlock-proxy: see docs/safety.md)", k.cmd.Name, scriptWriteBytes)
	}
	return nil
}

// refusal answers a command the table has no row for: the reason it
// cannot run by vote when Redis has it, else Redis's unknown command.
func refusal(args [][]byte) Reply {
	if why, ok := lua.Refusal(string(args[0])); ok {
		return Errorf(errCannotServe, why)
	}
	return unknownCommand(args)
}

// heldExpiry is the expiry the client gave key when it is held, here or
// through a peer, as copyScript takes it: "-1" for none, ms for a
// deadline, "" when key is not held.
func heldExpiry(ctx context.Context, m *lease.Manager, key string) (string, error) {
	ttl, ok, err := m.HeldExpiry(ctx, key)
	switch {
	case err != nil || !ok:
		return "", err
	case ttl == redlock.PTTLNoExpiry:
		return "-1", nil
	}
	return strconv.FormatInt(max(ttl.Milliseconds(), 1), 10), nil
}
