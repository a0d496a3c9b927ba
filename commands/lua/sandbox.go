package lua

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// The sandbox runs a compiled script against the model. It offers what
// Redis offers scripts, minus what could reach outside the sandbox or make
// one run depend on another: base functions without load*, dofile,
// getfenv/setfenv, getmetatable, rawset, collectgarbage; string, table and
// math (without random); redis.call, pcall, error_reply, status_reply,
// sha1hex, log. Globals and library tables are read-only, as in Redis 7,
// so a sandbox can serve many runs. cjson, cmsgpack, bit and struct are
// not offered: a script that uses them is not recognised (it still runs by
// vote). Numbers become strings and strings numbers as in Lua 5.1, not as
// in gopher-lua (numbers.go).
//
// Every run is bounded: an instruction budget counted by the interpreter's
// own per-instruction context check, a byte budget for strings the script
// builds (".." is compiled as a call to a counting function; string.rep
// and gsub are checked before they run, string.format and table.concat
// pay for each piece before they add it), work charged for
// library functions whose cost grows with their input, a call depth of
// 200, a data stack of 64 Ki slots, and a wall-clock deadline as a last
// resort.

const (
	runSteps     = 1_000_000  // instructions per run
	callSteps    = 100        // a redis.call counts as this many instructions
	totalSteps   = 10_000_000 // instructions per analysis
	runBytes     = 8 << 20    // string bytes a run may build
	evalBytes    = 32 << 20   // … in EvalRead, whose inputs are real values
	analyzeTime  = 2 * time.Second
	evalTime     = 250 * time.Millisecond
	maxReplyNest = 32
)

// concatName is the global the compiled ".." calls. It is not a valid Lua
// name, so no script can spell it.
const concatName = "\x00concat"

var (
	errSteps = errors.New("the script ran past its instruction budget")
	errTotal = errors.New("the analysis ran past its instruction budget")
	errTime  = errors.New("the script ran past its time budget")
	errBytes = errors.New("the script built strings past its memory budget")
	// errReplyForm is a run whose reply is a RESP3 form ({double = …},
	// {big_number = …}, {map = …}, {set = …}): Redis writes it in the
	// client's protocol (a map in Lua 5.1's own table order), which the
	// proxy does not reproduce; such a script runs by vote.
	errReplyForm = fmt.Errorf("the script answers a RESP3 form (double, big_number, map or set): %w", ErrByVote)
)

// patternError is a run's error when one Lua pattern alone would cost
// more than the run's budget (patternCost).
type patternError struct{ subject int }

func (e *patternError) Error() string {
	return fmt.Sprintf("the script used a Lua pattern that may backtrack too long on a subject of %d bytes", e.subject)
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// budget is the context the interpreter checks before every instruction:
// Done counts the instructions.
type budget struct {
	steps, total int64
	bytes        int64
	deadline     time.Time
	tick         uint32
	err          error
}

func (b *budget) Deadline() (time.Time, bool) { return b.deadline, true }
func (b *budget) Value(any) any               { return nil }
func (b *budget) Err() error                  { return b.err }

func (b *budget) Done() <-chan struct{} {
	if b.err != nil {
		return closedCh
	}
	b.steps--
	b.total--
	switch {
	case b.steps < 0:
		b.err = errSteps
		return closedCh
	case b.total < 0:
		b.err = errTotal
		return closedCh
	}
	if b.tick++; b.tick&255 == 0 && time.Now().After(b.deadline) {
		b.err = errTime
		return closedCh
	}
	return nil
}

// charge takes n instructions' worth of work from the budget.
func (sb *sandbox) charge(L *glua.LState, n int64) {
	b := &sb.b
	if b.err == nil {
		switch {
		case n < 0 || n > b.steps:
			b.err = errSteps
		case n > b.total:
			b.err = errTotal
		}
	}
	if b.err != nil {
		L.RaiseError("%s", b.err)
	}
	b.steps -= n
	b.total -= n
}

// spend takes n bytes of strings from the budget.
func (sb *sandbox) spend(L *glua.LState, n int64) {
	if n < 0 || n > sb.b.bytes {
		if sb.b.err == nil {
			sb.b.err = errBytes
		}
		L.RaiseError("%s", sb.b.err)
	}
	sb.b.bytes -= n
	sb.charge(L, n/64)
}

type sandbox struct {
	L      *glua.LState
	b      budget
	st     store
	env    *glua.LTable // the globals, read through genv
	genv   *glua.LTable // what scripts see: empty, read-only
	failed error        // a command the model does not implement
	broken bool         // the interpreter panicked: do not reuse
}

var sandboxes sync.Pool

// getSandbox returns a sandbox with the given total budget and deadline.
func getSandbox(total int64, deadline time.Time) *sandbox {
	sb, _ := sandboxes.Get().(*sandbox)
	if sb == nil {
		sb = newSandbox()
	}
	sb.b = budget{total: total, deadline: deadline}
	sb.st.load, sb.st.loaded, sb.st.err = nil, nil, nil
	return sb
}

func putSandbox(sb *sandbox) {
	if sb.broken {
		sb.L.Close()
		return
	}
	sb.env.RawSetString("KEYS", glua.LNil)
	sb.env.RawSetString("ARGV", glua.LNil)
	sb.st.reset()
	sb.st.load, sb.st.loaded = nil, nil
	sandboxes.Put(sb)
}

func newSandbox() *sandbox {
	L := glua.NewState(glua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       200,
		RegistrySize:        1024,
		RegistryMaxSize:     64 * 1024,
		MinimizeStackMemory: true,
	})
	sb := &sandbox{L: L, st: store{m: map[string]entry{}}}
	for _, lib := range []struct {
		name string
		open glua.LGFunction
	}{{"", glua.OpenBase}, {"table", glua.OpenTable}, {"string", glua.OpenString}, {"math", glua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(glua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetContext(&sb.b)
	G := L.G.Global
	sb.env = L.NewTable()
	for _, name := range []string{"ipairs", "next", "pairs", "pcall", "rawequal",
		"rawget", "select", "setmetatable", "type", "xpcall"} {
		sb.env.RawSetString(name, G.RawGetString(name))
	}
	sb.env.RawSetString("tostring", L.NewFunction(tostring(gfn(G.RawGetString("tostring")))))
	sb.env.RawSetString("tonumber", L.NewFunction(tonumber))
	sb.env.RawSetString("assert", L.NewFunction(assert))
	sb.env.RawSetString("error", L.NewFunction(numberArgs(gfn(G.RawGetString("error")), 1)))
	unpack := gfn(G.RawGetString("unpack"))
	sb.env.RawSetString("unpack", L.NewFunction(func(L *glua.LState) int {
		t := L.CheckTable(1)
		i, j := L.OptInt(2, 1), L.OptInt(3, t.Len())
		sb.charge(L, int64(j)-int64(i)+1)
		return unpack(L)
	}))
	sb.env.RawSetString(concatName, L.NewFunction(sb.concat))

	str := G.RawGetString("string").(*glua.LTable)
	sb.boundStrings(str)
	str.RawSetString("__index", glua.LNil)
	strProxy := sb.readOnly(str)
	strMeta := L.NewTable()
	strMeta.RawSetString("__index", strProxy)
	strMeta.RawSetString("__metatable", glua.LFalse)
	L.SetMetatable(glua.LString(""), strMeta)
	sb.env.RawSetString("string", strProxy)

	tab := G.RawGetString("table").(*glua.LTable)
	sb.boundTables(tab)
	sb.env.RawSetString("table", sb.readOnly(tab))

	m := G.RawGetString("math").(*glua.LTable)
	m.RawSetString("random", glua.LNil)
	m.RawSetString("randomseed", glua.LNil)
	m.RawSetString("huge", glua.LNumber(math.Inf(1))) // gopher-lua's is the largest finite number
	sb.env.RawSetString("math", sb.readOnly(m))
	sb.env.RawSetString("redis", sb.readOnly(sb.redisLib()))

	sb.genv = L.NewTable()
	meta := L.NewTable()
	meta.RawSetString("__index", L.NewFunction(func(L *glua.LState) int {
		k := L.Get(2)
		v := sb.env.RawGet(k)
		if v == glua.LNil {
			L.RaiseError("Script attempted to access nonexistent global variable '%s'", k.String())
		}
		L.Push(v)
		return 1
	}))
	meta.RawSetString("__newindex", L.NewFunction(readOnlyError))
	meta.RawSetString("__metatable", glua.LFalse)
	L.SetMetatable(sb.genv, meta)
	return sb
}

func gfn(v glua.LValue) glua.LGFunction { return v.(*glua.LFunction).GFunction }

func readOnlyError(L *glua.LState) int {
	L.RaiseError("Attempt to modify a readonly table")
	return 0
}

// readOnly returns an empty table that reads t and refuses writes.
func (sb *sandbox) readOnly(t *glua.LTable) *glua.LTable {
	p := sb.L.NewTable()
	meta := sb.L.NewTable()
	meta.RawSetString("__index", t)
	meta.RawSetString("__newindex", sb.L.NewFunction(readOnlyError))
	meta.RawSetString("__metatable", glua.LFalse)
	sb.L.SetMetatable(p, meta)
	return p
}

// redisLib is the redis table scripts see.
func (sb *sandbox) redisLib() *glua.LTable {
	L := sb.L
	r := L.NewTable()
	r.RawSetString("call", L.NewFunction(sb.redisCall(false)))
	r.RawSetString("pcall", L.NewFunction(sb.redisCall(true)))
	r.RawSetString("error_reply", L.NewFunction(func(L *glua.LState) int {
		s, ok := L.Get(1).(glua.LString)
		if L.GetTop() != 1 || !ok {
			L.Push(replyTable(L, "err", "ERR wrong number or type of arguments"))
			return 1
		}
		L.Push(replyTable(L, "err", errorReply(string(s))))
		return 1
	}))
	r.RawSetString("status_reply", L.NewFunction(func(L *glua.LState) int {
		s, ok := L.Get(1).(glua.LString)
		if L.GetTop() != 1 || !ok {
			L.Push(replyTable(L, "err", "ERR wrong number or type of arguments"))
			return 1
		}
		L.Push(replyTable(L, "ok", string(s)))
		return 1
	}))
	r.RawSetString("sha1hex", L.NewFunction(numberArgs(func(L *glua.LState) int {
		s := L.CheckString(1)
		sb.charge(L, int64(len(s))/16)
		sum := sha1.Sum([]byte(s))
		L.Push(glua.LString(hex.EncodeToString(sum[:])))
		return 1
	}, 1)))
	noop := L.NewFunction(func(L *glua.LState) int { return 0 })
	for _, name := range []string{"log", "set_repl", "breakpoint", "debug"} {
		r.RawSetString(name, noop)
	}
	for i, name := range []string{"REPL_NONE", "REPL_AOF", "REPL_SLAVE", "REPL_REPLICA", "REPL_ALL"} {
		r.RawSetString(name, glua.LNumber([]int{0, 1, 2, 2, 3}[i]))
	}
	r.RawSetString("replicate_commands", L.NewFunction(func(L *glua.LState) int {
		L.Push(glua.LTrue)
		return 1
	}))
	for i, name := range []string{"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"} {
		r.RawSetString(name, glua.LNumber(i))
	}
	r.RawSetString("REDIS_VERSION", glua.LString("7.2.0"))
	r.RawSetString("REDIS_VERSION_NUM", glua.LNumber(0x070200))
	return r
}

// errorReply is the err field redis.error_reply(s) makes in Redis 7: "-CODE
// msg" or "CODE msg" keeps its code, a text without a space after a
// leading "-" ("-boom") or without a leading "-" ("boom") gets ERR, and
// line ends around the message go.
func errorReply(s string) string {
	if !strings.HasPrefix(s, "-") {
		s = "-" + s
	}
	code, msg := "ERR", s[1:]
	if i := strings.IndexByte(s, ' '); i >= 0 {
		code, msg = s[1:i], s[i+1:]
	}
	return code + " " + strings.Trim(msg, "\r\n")
}

func replyTable(L *glua.LState, field, s string) *glua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString(field, glua.LString(s))
	return t
}

// redisCall is redis.call (protected: redis.pcall) against the model.
func (sb *sandbox) redisCall(protected bool) glua.LGFunction {
	return func(L *glua.LState) int {
		n := L.GetTop()
		if n == 0 {
			return callError(L, protected, "ERR Please specify at least one argument for this redis lib call")
		}
		args := make([]string, n)
		for i := range args {
			switch v := L.Get(i + 1).(type) {
			case glua.LString:
				args[i] = string(v)
			case glua.LNumber:
				args[i] = numberArg(float64(v))
			default:
				return callError(L, protected, "ERR Lua redis lib command arguments must be strings or integers")
			}
		}
		sb.charge(L, callSteps+int64(n))
		v, err := sb.st.do(args)
		if err == nil {
			err = sb.st.err
		}
		if err != nil {
			if sb.failed == nil {
				sb.failed = fmt.Errorf("%s: %w", strings.ToUpper(args[0]), err)
			}
			L.RaiseError("%s", sb.failed)
		}
		if v.Kind == Err {
			return callError(L, protected, v.Str)
		}
		L.Push(sb.toLua(L, v))
		return 1
	}
}

func callError(L *glua.LState, protected bool, msg string) int {
	t := replyTable(L, "err", msg)
	if !protected {
		L.Error(t, 1)
	}
	L.Push(t)
	return 1
}

// numberArg is how Redis passes a Lua number to a command: an integer when
// it is one, else the shortest decimal that reads back the same.
func numberArg(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// toLua converts a reply to what redis.call returns.
func (sb *sandbox) toLua(L *glua.LState, v Value) glua.LValue {
	switch v.Kind {
	case Int:
		return glua.LNumber(v.Int)
	case Bulk:
		return glua.LString(v.Str)
	case Status:
		return replyTable(L, "ok", v.Str)
	case Err:
		return replyTable(L, "err", v.Str)
	case Array:
		t := L.CreateTable(len(v.Elems), 0)
		for i, e := range v.Elems {
			t.RawSetInt(i+1, sb.toLua(L, e))
		}
		return t
	}
	return glua.LFalse
}

// fromLua converts a script's return value to a reply as Redis does.
func (sb *sandbox) fromLua(L *glua.LState, lv glua.LValue, depth int) Value {
	switch v := lv.(type) {
	case glua.LNumber:
		// Redis casts the double to long long; on amd64 NaN and every
		// value out of range become the minimum.
		f := float64(v)
		if f != f || f >= math.MaxInt64 || f < math.MinInt64 {
			return IntValue(math.MinInt64)
		}
		return IntValue(int64(f))
	case glua.LString:
		return BulkValue(string(v))
	case glua.LBool:
		if v {
			return IntValue(1)
		}
	case *glua.LTable:
		if e, ok := v.RawGetString("err").(glua.LString); ok {
			return ErrorValue(string(e))
		}
		if s, ok := v.RawGetString("ok").(glua.LString); ok {
			return StatusValue(string(s))
		}
		if v.RawGetString("double").Type() == glua.LTNumber || v.RawGetString("big_number").Type() == glua.LTString ||
			v.RawGetString("map").Type() == glua.LTTable || v.RawGetString("set").Type() == glua.LTTable {
			if sb.failed == nil {
				sb.failed = errReplyForm
			}
			return NilValue()
		}
		if depth >= maxReplyNest {
			return ErrorValue("ERR reached lua stack limit")
		}
		out := ArrayValue()
		for i := 1; ; i++ {
			e := v.RawGetInt(i)
			if e == glua.LNil {
				break
			}
			sb.charge(L, 1)
			out.Elems = append(out.Elems, sb.fromLua(L, e, depth+1))
		}
		return out
	}
	return NilValue()
}

// runError is a run that did not produce a reply.
type runError struct {
	raised bool   // the script raised an error: Redis would answer it
	msg    string // that error's text, as Redis would send it
	err    error  // else: the sandbox gave up (budget, unsupported command)
	line   int    // where, when known
}

var whereRE = regexp.MustCompile(chunkName + `:(\d+):`)

// lineOf finds the script line in an interpreter error message.
func lineOf(err error) int {
	if err == nil {
		return 0
	}
	if m := whereRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// run executes proto once with the given KEYS and ARGV against sb.st.
func (sb *sandbox) run(proto *glua.FunctionProto, keys, argv []string, bytes int64) (v Value, re *runError) {
	L := sb.L
	sb.failed, sb.st.err = nil, nil
	sb.b.steps, sb.b.bytes, sb.b.err = runSteps, bytes, nil
	if sb.b.total <= 0 {
		return Value{}, &runError{err: errSteps}
	}
	defer func() {
		if rcv := recover(); rcv != nil {
			sb.broken = true
			v, re = Value{}, &runError{err: fmt.Errorf("interpreter panic: %v", rcv)}
		}
		L.SetTop(0)
	}()
	sb.env.RawSetString("KEYS", strings2table(L, keys))
	sb.env.RawSetString("ARGV", strings2table(L, argv))
	fn := L.NewFunctionFromProto(proto)
	fn.Env = sb.genv
	L.SetTop(0)
	L.Push(fn)
	err := L.PCall(0, 1, nil)
	switch {
	case sb.b.err != nil:
		return Value{}, &runError{err: sb.b.err, line: lineOf(err)}
	case sb.failed != nil:
		return Value{}, &runError{err: sb.failed, line: lineOf(err)}
	case err != nil:
		var ae *glua.ApiError
		if !errors.As(err, &ae) || ae.Type == glua.ApiErrorPanic {
			sb.broken = true
			return Value{}, &runError{err: fmt.Errorf("interpreter panic: %v", err)}
		}
		if t, ok := ae.Object.(*glua.LTable); ok {
			if e, ok := t.RawGetString("err").(glua.LString); ok {
				return Value{}, &runError{raised: true, msg: string(e)}
			}
		}
		return Value{}, &runError{raised: true, msg: "ERR " + ae.Object.String()}
	}
	v = sb.fromLua(L, L.Get(-1), 0)
	switch {
	case sb.b.err != nil:
		return Value{}, &runError{err: sb.b.err}
	case sb.failed != nil:
		return Value{}, &runError{err: sb.failed}
	}
	return v, nil
}

func strings2table(L *glua.LState, ss []string) *glua.LTable {
	t := L.CreateTable(len(ss), 0)
	for i, s := range ss {
		t.RawSetInt(i+1, glua.LString(s))
	}
	return t
}
