package relay

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// A NOLOOP client's own command that reads keys and may write them (a
// script: rueidislock's lock attempt). Redis does not tell the client of
// its own changes and still tracks what the command read; the proxy sees
// neither who caused an invalidation nor whether a script wrote, so it
// brackets the command (BeginOwn, End):
//
//  1. before it runs, each key's serialised value (DUMP) is read on every
//     backend whose tracking connection is up, on that connection, so any
//     invalidation a backend sent before is handled first; the watcher
//     then stops tracking the keys, and hears nothing while it runs;
//  2. after it ran, the keys are tracked again (registered as by Track),
//     their values read again the same way, and every key whose value
//     changed on some backend in between is invalidated for the watcher.
//
// So a change of a key's value by anyone between the two reads reaches
// the client, its own included (what that costs: docs/compatibility.md,
// NOLOOP). When fewer backends than a tracked key needs (track.go)
// answered both reads, the key is invalidated, as for a read the backends
// cannot cover.

// Own is a NOLOOP client's command in progress on keys (BeginOwn).
type Own struct {
	w      *Watcher
	keys   []string
	before [][]dump // [backend][key]
}

// dump is one backend's serialised value of a key: ok when it answered,
// v nil when the key is absent.
type dump struct {
	ok bool
	v  any
}

// BeginOwn starts w's own command on keys: it reads their values (step 1
// above) and stops tracking them for w. Errors: ctx's, or ErrClosed.
func (w *Watcher) BeginOwn(ctx context.Context, keys []string) (*Own, error) {
	t := w.t
	t.mu.Lock()
	if w.closed || t.r.closed.Load() {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	t.startLocked()
	t.mu.Unlock()
	if err := t.awaitStarted(ctx); err != nil {
		return nil, err
	}
	before, err := t.dumps(ctx, keys)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	for _, k := range keys {
		t.untrackLocked(w, k)
	}
	t.mu.Unlock()
	return &Own{w: w, keys: keys, before: before}, nil
}

// End finishes the command (step 2 above): the keys are tracked again and
// those whose value changed are invalidated. It reports, as Track does,
// whether the keys are registered on enough live backends; when not, the
// caller invalidates them itself.
func (o *Own) End(ctx context.Context) (bool, error) {
	covered, err := o.w.Track(ctx, o.keys)
	if err != nil {
		return false, err
	}
	t := o.w.t
	after, err := t.dumps(ctx, o.keys)
	if err != nil {
		return false, err
	}
	var changed []string
	for j, k := range o.keys {
		compared, differ := 0, false
		for i := range after {
			b, a := o.before[i][j], after[i][j]
			if b.ok && a.ok {
				compared++
				differ = differ || b.v != a.v
			}
		}
		if differ || compared < t.need {
			changed = append(changed, k)
		}
	}
	if len(changed) > 0 {
		t.mu.Lock()
		closed := o.w.closed
		t.mu.Unlock()
		if !closed {
			o.w.invalidate(changed)
		}
	}
	return covered, nil
}

// dumps reads DUMP of each key on every backend whose tracking connection
// is up, on that connection: out[i][j] is backend i's value of keys[j],
// not ok where the backend did not answer within ConfirmWait. A reply on
// the tracking connection comes after every invalidation the backend sent
// on it before, so those are handled by the time it is read.
func (t *tracker) dumps(ctx context.Context, keys []string) ([][]dump, error) {
	type target struct {
		i int
		c *bconn
	}
	var conns []target
	t.mu.Lock()
	out := make([][]dump, len(t.roles))
	for i, tr := range t.roles {
		out[i] = make([]dump, len(keys))
		if tr.state == stateUp && tr.conn != nil {
			conns = append(conns, target{i, tr.conn})
		}
	}
	t.mu.Unlock()

	var mu sync.Mutex
	finished := false
	done := make(chan struct{}, len(conns)*len(keys))
	sent := 0
	for _, c := range conns {
		for j, k := range keys {
			err := c.c.callFunc(resp.AppendStrings(nil, "DUMP", []string{k}), 1, func(v any, ok bool) {
				defer func() { done <- struct{}{} }()
				if _, isErr := v.(ServerError); !ok || isErr {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if !finished {
					out[c.i][j] = dump{ok: true, v: v}
				}
			})
			if err == nil {
				sent++
			}
		}
	}
	timer := time.NewTimer(t.r.confirmWait)
	defer timer.Stop()
	var err error
wait:
	for range sent {
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-timer.C:
			break wait // the rest count as not answered
		}
	}
	mu.Lock()
	finished = true
	mu.Unlock()
	return out, err
}
