package commands

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Lock libraries send Lua scripts (EVAL, or SCRIPT LOAD then EVALSHA).
// The proxy never forwards a script blindly: each text it sees is analysed
// once by package lua, which recognises the lock operation it performs
// (meaning.go carries that out as a quorum operation, in the library's
// reply convention), or finds it safe to run on each master (run by vote:
// redlock.Vote), or refuses it with the line and the reason. With
// Options.RecognisedOnly (scripts = "recognised") only recognised scripts
// run.

const (
	errNoScript = Error("NOSCRIPT No matching script. Please use EVAL.")
	// errNotRecognised answers a script that is not a recognised lock
	// operation when only those run (scripts = "recognised").
	errNotRecognised = "ERR redlock-proxy runs only scripts it recognises as lock operations (scripts = \"recognised\"); this script (sha1 %s) is not one: %s. See docs/compatibility.md"
	// errRefused answers a script that can run neither way.
	errRefused = "ERR redlock-proxy cannot run this script (sha1 %s): %s. See docs/compatibility.md"
	// errCompiling answers SCRIPT LOAD or EVAL of a text that is not Lua.
	errCompiling = "ERR Error compiling script (new function): user_script:%d: %s"
	// EVAL_RO and EVALSHA_RO of a script that may write (roRefusal), in
	// Redis's words: its shebang does not declare no-writes; a call may
	// write (the script's sha1, the call's line).
	errROWriteFlag = Error("ERR Can not execute a script with write flag using *_ro command.")
	errROWrite     = "ERR Write commands are not allowed from read-only scripts. script: %s, on @user_script:%d."

	// Bounds of the script cache: scripts and bytes of source.
	maxScripts      = 4096
	maxScriptsBytes = 32 << 20
)

// cachedScript is one script text the proxy has seen, analysed on first use.
type cachedScript struct {
	sha  string
	src  string
	once sync.Once
	a    *lua.Analysis
	run  *script.Script // for a vote: EVALSHA, EVAL on NOSCRIPT
	// analysed is set once a is (for Plan, which must not wait for it).
	analysed atomic.Bool

	voteLogged sync.Once
	refusedLog sync.Once

	// After a run past script_timeout (cool): unix nanoseconds until
	// which the script is refused, and how many times it ran past.
	coolUntil atomic.Int64
	timeouts  atomic.Int32
}

// A script by vote that ran past script_timeout held every backend for
// that long, and another run would do it again: its text is refused for
// scriptCooldown, doubled with each further time up to scriptCooldownMax,
// and the connection that sent it runs no script by vote for
// scriptCooldown (a client that changes a comment sends a new text).
const (
	scriptCooldown    = 10 * time.Second
	scriptCooldownMax = 5 * time.Minute
)

// cooling refuses a script by vote while it, or its connection, cools
// down after a run past script_timeout.
func (d *Dispatcher) cooling(c *Client, s *cachedScript) Reply {
	now := d.now().UnixNano()
	if left := s.coolUntil.Load() - now; left > 0 {
		return Errorf(errRefused, s.sha, fmt.Sprintf("it ran past script_timeout and is refused for %v more", wholeSeconds(left)))
	}
	if left := c.scriptsCoolUntil.Load() - now; left > 0 {
		return Errorf(errRefused, s.sha, fmt.Sprintf("a script of this connection ran past script_timeout: no script runs by vote from it for %v more", wholeSeconds(left)))
	}
	return nil
}

// cool starts the cooldowns after s, sent by c (nil: a recognised
// script the proxy ran by vote), ran past script_timeout.
func (d *Dispatcher) cool(c *Client, s *cachedScript) {
	now := d.now()
	n := min(s.timeouts.Add(1)-1, 5)
	until := min(scriptCooldown<<n, scriptCooldownMax)
	s.coolUntil.Store(now.Add(until).UnixNano())
	addr := ""
	if c != nil {
		c.scriptsCoolUntil.Store(now.Add(scriptCooldown).UnixNano())
		addr = c.Addr
	}
	d.log.Warn("script by vote ran past script_timeout: refused for a while", "sha1", s.sha, "client", addr, "times", n+1, "refused_for", until)
}

// roundUp is ns as a duration in whole seconds, at least one.
func wholeSeconds(ns int64) time.Duration {
	return max(time.Duration(ns).Round(time.Second), time.Second)
}

// analysis analyses the script once, and readies run for a vote: how its
// replies compare, and the keys it builds.
func (s *cachedScript) analysis() *lua.Analysis {
	s.once.Do(func() {
		s.a = lua.Analyze([]byte(s.src))
		if v := s.a.Vote; v != nil {
			var builds []string
			if v.DerivedKeys {
				builds = append([]string{""}, v.KeyPrefixes...)
			}
			s.run = s.run.ForVote(replyShape(v.Reply), builds)
			if v.CapsReplies {
				s.run = s.run.CapReplies(lua.ReplyCap)
			}
		}
		s.analysed.Store(true)
	})
	return s.a
}

var replyOrders = map[lua.ReplyOrder]script.Order{
	lua.InOrder: script.InOrder, lua.AnyOrder: script.AnyOrder, lua.PairsAnyOrder: script.PairsAnyOrder,
}

// replyShape is the analysis's reply shape as redlock takes it.
func replyShape(s lua.ReplyShape) script.Shape {
	out := script.Shape{Order: replyOrders[s.Order]}
	for _, e := range s.Elems {
		out.Elems = append(out.Elems, replyShape(e))
	}
	return out
}

// scriptCache holds the scripts seen, by SHA1, forgetting the oldest past
// its bounds (a client whose script was forgotten gets NOSCRIPT and sends
// it again, as after a Redis restart).
type scriptCache struct {
	mu    sync.Mutex
	bySHA map[string]*cachedScript
	order []string // oldest first
	bytes int
	// enforce is the run-time check every script by vote runs under
	// (enforcement); nil only in tests that build a cache by hand.
	enforce *script.Enforcement
	fixed   sync.Map // *script.Script → the same enforced (enforced)
}

// The write budget of one script by vote, enforced by its wrapper on each
// backend: distinct keys written, and bytes of its write commands'
// arguments. And the most a string function (string.rep, gsub,
// table.concat) may build, at least max_value_bytes.
const (
	scriptWriteKeys  = 1_000
	scriptWriteBytes = 16 << 20
	scriptString     = 1 << 20
)

// enforcement is the run-time check of scripts by vote
// (script.Script.Enforced): the commands package lua allows, and the
// bounds.
func enforcement(maxValue int, selectZero bool) *script.Enforcement {
	var cmds []script.Command
	for _, c := range lua.RunCommands() {
		cmds = append(cmds, script.Command{Name: c.Name, First: c.First, Last: c.Last, Step: c.Step,
			NumKeys: c.NumKeys, Write: c.Write, Store: c.Store || c.Name == "SORT_RO", NoDB: c.Name == "COPY",
			Sorted: c.Unordered && !c.Pairs, SortedPairs: c.Unordered && c.Pairs, Channel: c.Publish})
	}
	return script.NewEnforcement(script.Enforcement{Commands: cmds, MaxValue: maxValue,
		MaxString: max(scriptString, maxValue), WriteKeys: scriptWriteKeys, WriteBytes: scriptWriteBytes,
		SelectZero: selectZero})
}

// recognisedOnly reports whether c's user runs only recognised scripts
// (User.Scripts).
func recognisedOnly(c *Client) bool {
	if c == nil {
		return false
	}
	u := c.user.Load()
	return u != nil && u.recognisedOnly
}

// enforced is s under the cache's run-time check, made once per s (a
// keyed command's fixed script).
func (c *scriptCache) enforced(s *script.Script) *script.Script {
	if c.enforce == nil {
		return s
	}
	if e, ok := c.fixed.Load(s); ok {
		return e.(*script.Script)
	}
	e, _ := c.fixed.LoadOrStore(s, s.Enforced(c.enforce))
	return e.(*script.Script)
}

// enforceArgs is what a script by vote sent by c takes after its ARGV
// (script.EnforceArgs): the key patterns of c's user, "*" for a user
// without any limit.
func enforceArgs(c *Client) []string {
	pats := []string{"*"}
	if c != nil {
		if u := c.user.Load(); u != nil && !u.allKeys {
			pats = u.keys
		}
	}
	return script.EnforceArgs(pats)
}

// hashScript is a script's SHA1 in hex, as Redis names scripts.
var hashScript = func(src []byte) string {
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// lookup returns src's entry, whose SHA1 is sha ("": not computed yet),
// or a new one the cache does not hold yet (keep): a new text is kept
// only once the new-script bounds let it be analysed (analyse), so that
// the texts they refuse neither take the cache's room nor evict others.
func (c *scriptCache) lookup(src []byte, sha string) *cachedScript {
	if sha == "" {
		sha = hashScript(src)
	}
	if s := c.get(sha); s != nil {
		return s
	}
	s := &cachedScript{sha: sha, src: string(src)}
	s.run = script.NewWithHash(s.src, sha)
	if c.enforce != nil {
		s.run = s.run.Enforced(c.enforce).LocksByRead() // its writes are a lock's only where it read the key first
	}
	return s
}

// keep remembers s, and returns the entry of its SHA1: s, or the one
// kept before it.
func (c *scriptCache) keep(s *cachedScript) *cachedScript {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.bySHA[s.sha]; k != nil {
		return k
	}
	if c.bySHA == nil {
		c.bySHA = make(map[string]*cachedScript)
	}
	c.bySHA[s.sha] = s
	c.order = append(c.order, s.sha)
	c.bytes += len(s.src)
	for len(c.order) > maxScripts || c.bytes > maxScriptsBytes {
		old := c.order[0]
		c.order = c.order[1:]
		c.bytes -= len(c.bySHA[old].src)
		delete(c.bySHA, old)
	}
	return s
}

// get finds a script by SHA1 (any case).
func (c *scriptCache) get(sha string) *cachedScript {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bySHA[strings.ToLower(sha)]
}

func (c *scriptCache) flush() {
	c.mu.Lock()
	c.bySHA, c.order, c.bytes = nil, nil, 0
	c.mu.Unlock()
}

// EVAL script numkeys [key ...] [arg ...]; keys: scriptKeys; the script's
// SHA1 as Plan computed it, if it did.
func (d *Dispatcher) eval(ctx context.Context, c *Client, args [][]byte, p parsedCall) Reply {
	return d.runScript(ctx, c, d.scripts.lookup(args[1], p.sha), args[2:], p.keys, asEval)
}

// EVALSHA sha1 numkeys [key ...] [arg ...]; keys: scriptKeys.
func (d *Dispatcher) evalsha(ctx context.Context, c *Client, args [][]byte, p parsedCall) Reply {
	s := d.scripts.get(string(args[1]))
	if s == nil {
		return errNoScript
	}
	return d.runScript(ctx, c, s, args[2:], p.keys, asEval)
}

// EVAL_RO script numkeys [key ...] [arg ...]: EVAL of a script that must
// not write (roRefusal).
func (d *Dispatcher) evalRO(ctx context.Context, c *Client, args [][]byte, p parsedCall) Reply {
	return d.runScript(ctx, c, d.scripts.lookup(args[1], p.sha), args[2:], p.keys, readOnly)
}

// EVALSHA_RO sha1 numkeys [key ...] [arg ...]: EVALSHA of a script that
// must not write (roRefusal).
func (d *Dispatcher) evalshaRO(ctx context.Context, c *Client, args [][]byte, p parsedCall) Reply {
	s := d.scripts.get(string(args[1]))
	if s == nil {
		return errNoScript
	}
	return d.runScript(ctx, c, s, args[2:], p.keys, readOnly)
}

// roRefusal is the refusal of EVAL_RO or EVALSHA_RO of s, analysed as a,
// whose run would carry out the recognised operation carry (nil: none)
// or run by vote: before it runs, where Redis refuses while it runs. A
// shebang without no-writes is refused as Redis refuses it. A recognised
// operation other than a read, or a script by vote whose analysis finds
// a call that may write or publish (Writes, Publishes: a command named
// by ARGV counts, a call in a branch not taken too), is refused with the
// error Redis gives when the write runs, at the line of the first such
// call. Anything else runs as EVAL would, as a read: carried out as a
// recognised read, or sent to the backends as EVALSHA_RO.
func roRefusal(s *cachedScript, a *lua.Analysis, carry *lua.Meaning) Reply {
	if s.run.DeclaresWrites() {
		return errROWriteFlag
	}
	v := a.Vote
	switch {
	case carry != nil && carry.Op == lua.OpRead:
		return nil
	case carry != nil: // an acquire, extend or release
	case v == nil:
		return nil // it cannot run by vote: refused as by EVAL
	case !v.Writes && !v.Publishes:
		return nil
	}
	line := 1
	if v != nil && v.WriteLine > 0 {
		line = v.WriteLine
	}
	return Errorf(errROWrite, s.sha, line)
}

// buildsKeys reports whether the script an EVAL or EVALSHA (or its _RO
// form) runs may touch keys it builds from its declared keys (KEYS[1] ..
// ':x'), which no plan can name: Plan makes such a command a barrier. A
// script analysed already answers exactly; one not yet analysed (Plan
// must not wait for an analysis) is judged by its text, since keys are
// built only with Lua's '..' operator. An unknown SHA1 builds nothing: it
// is NOSCRIPT.
// bySource: args[1] is the script (EVAL, EVAL_RO), else its SHA1; sha
// is then the script's SHA1.
func (d *Dispatcher) buildsKeys(bySource bool, args [][]byte, sha string) bool {
	var s *cachedScript
	if bySource {
		s = d.scripts.get(sha)
		if s == nil {
			return bytes.Contains(args[1], []byte(".."))
		}
	} else if s = d.scripts.get(string(args[1])); s == nil {
		return false
	}
	if !s.analysed.Load() {
		return strings.Contains(s.src, "..")
	}
	v := s.a.Vote
	return v != nil && v.DerivedKeys
}

// scriptKeys is the key list of EVAL and EVALSHA (script numkeys key …),
// the table's keys column: nil when numkeys is not a count that fits, and
// the handler then refuses the command before any I/O (numkeysError).
func scriptKeys(args [][]byte) [][]byte {
	if len(args) < 3 {
		return nil
	}
	n, err := strconv.Atoi(string(args[2]))
	if err != nil || n < 0 || n > len(args)-3 {
		return nil
	}
	return args[3 : 3+n]
}

// numkeysError is the error of an EVAL whose numkeys (rest[0]) is not a
// count of keys that fits in rest.
func numkeysError(rest [][]byte) Reply {
	n, err := strconv.Atoi(string(rest[0]))
	switch {
	case err != nil:
		return errNotInteger
	case n < 0:
		return Error("ERR Number of keys can't be negative")
	}
	return Error("ERR Number of keys can't be greater than number of args")
}

// How runScript runs a script: as EVAL, as EVAL_RO (a script that may
// write is refused), or by vote whatever it is recognised as (a
// transaction's script, whose reply is the array of its commands').
type runMode int

const (
	asEval runMode = iota
	readOnly
	byVote
)

// runScript runs the script as its analysis says; rest is numkeys, the
// keys and argv, and declared the keys scriptKeys parsed from them. A
// null or non-positive reply is a refusal (scriptReply): held when the
// script's meaning is an acquire, else not_held.
func (d *Dispatcher) runScript(ctx context.Context, c *Client, s *cachedScript, rest, declared [][]byte, mode runMode) (r Reply) {
	refusal := ResultNotHeld
	defer func() { r = scriptReply(r, refusal) }()
	if declared == nil {
		return numkeysError(rest)
	}
	numKeys := len(declared)
	keys, r := d.keyList(declared)
	if r != nil {
		return r
	}
	argv, r := argStrings(rest[1+numKeys:], d.checkValue)
	if r != nil {
		return r
	}
	s, a, r := d.analyse(ctx, c, s)
	if r != nil {
		return r
	}
	if a.Invalid {
		return Errorf(errCompiling, a.Problem.Line, a.Problem.Reason)
	}
	// A recognised script satisfies the vote rules too, so a.Vote holds
	// what every run must check: the database a SELECT names.
	if v := a.Vote; v != nil {
		if v.Selects && d.opts.OtherDB != "" {
			return Errorf(errRefused, s.sha, v.SelectProblem(d.opts.OtherDB).Error())
		}
		if p := v.CheckRun(numKeys, argv); p != nil {
			return Errorf(errRefused, s.sha, p.Error())
		}
	}
	var carry *lua.Meaning // the recognised operation to carry out
	if m := a.Meaning; m != nil {
		if m = m.Select(argv); m != nil {
			if m.Op == lua.OpAcquire {
				// Carried out or run by vote, a refusal means another
				// owner holds the lock.
				refusal = ResultHeld
			}
			if len(argv) >= m.Args && len(keys) > 0 && mode != byVote {
				carry = m
			}
		}
	}
	if mode == readOnly {
		if r := roRefusal(s, a, carry); r != nil {
			return r
		}
	}
	if carry != nil {
		return d.runRecognised(ctx, s, carry, keys, argv)
	}
	switch {
	case d.opts.RecognisedOnly || recognisedOnly(c):
		return Errorf(errNotRecognised, s.sha, a.NotRecognised)
	case a.Vote == nil:
		s.refusedLog.Do(func() {
			d.log.Info("script refused: it cannot run by vote", "sha1", s.sha, "line", a.Problem.Line, "why", a.Problem.Reason)
		})
		return Errorf(errRefused, s.sha, a.Problem.Error())
	}
	if a.Vote.DerivedKeys {
		if r := builtKeysAllowed(c, s, a.Vote.KeyPrefixes, keys); r != nil {
			return r
		}
	}
	if r := d.cooling(c, s); r != nil {
		return r
	}
	return d.vote(ctx, c, s, keys, argv)
}

// builtKeysAllowed checks the keys a script builds from its declared keys:
// each starts with a declared key, or with one of prefixes (string
// literals) and then a declared key. None may reach the proxy's own keys,
// and a user restricted by key patterns must be allowed each start
// (prefix + key; the declared keys themselves were checked with the
// command).
func builtKeysAllowed(c *Client, s *cachedScript, prefixes []string, keys []string) Reply {
	u := c.user.Load()
	for _, p := range append([]string{""}, prefixes...) {
		for _, k := range keys {
			start := p + k
			if strings.HasPrefix(redlock.ReservedPrefix, start) || strings.HasPrefix(start, redlock.ReservedPrefix) {
				return Errorf(errRefused, s.sha, "a key built from KEYS could start with '"+redlock.ReservedPrefix+"', reserved by redlock-proxy")
			}
			if p != "" && u != nil && !u.allKeys && !u.keyAllowed([]byte(start)) {
				return errNoPermKey
			}
		}
	}
	return nil
}

// vote runs s on every backend and answers what a quorum agreed on.
func (d *Dispatcher) vote(ctx context.Context, c *Client, s *cachedScript, keys, argv []string) Reply {
	s.voteLogged.Do(func() {
		d.log.Info("script runs by vote on every backend", "sha1", s.sha, "why", s.a.NotRecognised)
	})
	return d.runVote(ctx, c, s, keys, argv)
}

// runVote is vote without its log line.
func (d *Dispatcher) runVote(ctx context.Context, c *Client, s *cachedScript, keys, argv []string) Reply {
	if s.run.IsEnforced() {
		argv = append(slices.Clone(argv), enforceArgs(c)...)
	}
	// A script that publishes is not a read: a read by vote runs read-only
	// (EVALSHA_RO), where Redis refuses PUBLISH as it refuses writes.
	writes := s.a.Vote.Writes || s.a.Vote.Publishes
	v, err := d.leases.Vote(ctx, s.run, keys, argv, writes) // a release by script wakes the keys' waiters
	if err != nil {
		if errors.Is(err, redlock.ErrScriptTimeout) {
			d.cool(c, s)
		}
		return d.lockError(err)
	}
	return backendReply(v)
}

// backendReply turns a reply redlock read from a backend into a Reply.
func backendReply(v any) Reply {
	switch v := v.(type) {
	case nil:
		return Null{}
	case int64:
		return Int(v)
	case redlock.Status:
		return Simple(v)
	case string:
		return BulkString(v)
	case redlock.RedisError:
		return Error(v)
	case []any:
		out := make(Array, len(v))
		for i, e := range v {
			out[i] = backendReply(e)
		}
		return out
	}
	return errInternal
}

// scriptSubArity is the arity of each SCRIPT subcommand (name included).
var scriptSubArity = map[string]int{"LOAD": 3, "EXISTS": -3, "FLUSH": -2, "KILL": 2, "HELP": 2}

// SCRIPT LOAD script | EXISTS sha1 [sha1 ...] | FLUSH [ASYNC|SYNC] | KILL
func (d *Dispatcher) scriptCmd(ctx context.Context, c *Client, args [][]byte) Reply {
	sub := strings.ToUpper(string(args[1]))
	switch {
	case sub == "LOAD" && len(args) == 3:
		s, a, r := d.analyse(ctx, c, d.scripts.lookup(args[2], ""))
		if r != nil {
			return r
		}
		if a.Invalid {
			return Errorf(errCompiling, a.Problem.Line, a.Problem.Reason)
		}
		return BulkString(s.sha)
	case sub == "EXISTS" && len(args) >= 3:
		out := make(Array, len(args)-2)
		for i, sha := range args[2:] {
			out[i] = boolInt(d.scripts.get(string(sha)) != nil)
		}
		return out
	case sub == "FLUSH" && len(args) <= 3:
		if r := requireAdmin(c, "script|flush"); r != nil {
			return r
		}
		d.scripts.flush()
		return OK
	case sub == "KILL" && len(args) == 2:
		return Error("NOTBUSY No scripts in execution right now.")
	case sub == "LOAD" || sub == "EXISTS" || sub == "FLUSH" || sub == "KILL":
		return Errorf(errWrongArity, "script|"+strings.ToLower(sub))
	}
	return Errorf(errUnknownSubcmd, args[1], "SCRIPT")
}
