package lua

import (
	"errors"
	"fmt"
	"time"
)

// KeyView is one key as the quorum sees it.
type KeyView struct {
	Exists bool
	Value  string
	PTTL   time.Duration // remaining time to live; -1 for no expiry
}

// ErrNotRead is EvalRead's error for an analysis whose meaning is not
// OpRead.
var ErrNotRead = errors.New("lua: the script is not a recognised read-only script")

// ErrByVote is EvalRead's error for a run whose reply the sandbox does not
// reproduce as Redis writes it (a RESP3 form): run the script by vote.
var ErrByVote = errors.New("lua: only the backends answer this run as Redis does")

// EvalRead runs a read-only script (Meaning.Op == OpRead) in the sandbox
// against a model holding exactly the views of its keys, and returns the
// reply Redis would give for that data. view is called at most once per
// key, only for keys in keys, and only for keys the script reads, from
// inside the script's run (its time does not count against the run's
// limit); the model's clock stands still, so the script sees each PTTL as
// given.
// A Lua error the script raises is an error Value (its text is "ERR "
// and the interpreter's message, close to but not exactly Redis's); err is
// for the sandbox giving up: a budget, a read of an undeclared key, or
// ErrByVote.
func (a *Analysis) EvalRead(keys, argv []string, view func(key string) KeyView) (Value, error) {
	if a == nil || a.Meaning == nil || a.Meaning.Op != OpRead || a.proto == nil {
		return Value{}, ErrNotRead
	}
	declared := make(map[string]bool, len(keys))
	for _, k := range keys {
		declared[k] = true
	}
	sb := getSandbox(runSteps, time.Now().Add(evalTime))
	defer putSandbox(sb)
	sb.st.reset()
	sb.st.loaded = map[string]bool{}
	sb.st.load = func(k string) (entry, bool, error) {
		if !declared[k] {
			return entry{}, false, fmt.Errorf("the script read %q, which is not one of its KEYS", k)
		}
		start := time.Now()
		kv := view(k)
		sb.b.deadline = sb.b.deadline.Add(time.Since(start)) // the caller's time is not the script's
		if !kv.Exists {
			return entry{}, false, nil
		}
		e := entry{val: kv.Value}
		if kv.PTTL >= 0 {
			e.exp = modelNow + kv.PTTL.Milliseconds()
		}
		return e, true, nil
	}
	v, re := sb.run(a.proto, keys, argv, evalBytes)
	if re != nil {
		if re.raised {
			return ErrorValue(re.msg), nil
		}
		return Value{}, re.err
	}
	return v, nil
}
