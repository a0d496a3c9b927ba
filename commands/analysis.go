package commands

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Each new script text is analysed once (scripts.go), and an analysis
// costs proxy CPU and memory: up to its instruction and time budgets for
// a hostile text (package lua). So analyses are bounded: at most
// maxAnalyses run at once for all clients, a new text waits for a turn at
// most analysisWait (or its command's deadline), and one connection may
// have at most newScriptsPerSecond new texts analysed each second. A text
// already analysed costs nothing and is never refused here.
const (
	maxAnalyses         = 1
	analysisWait        = time.Second
	newScriptsPerSecond = 50
)

// Limit names of the refusals here, as in Refusals and the metric
// redlock_proxy_limit_refusals_total.
const (
	LimitNewScripts = "new_scripts_per_client"
	LimitAnalyses   = "script_analyses_total"
)

const (
	errTooManyNewScripts = "ERR too many new scripts: more than %d new script texts per second from this connection; redlock-proxy analyses each new text once: send it again later, or reuse the scripts already loaded"
	errAnalysesBusy      = "ERR redlock-proxy is busy analysing other new scripts (%d at once): try again"
)

// rateWindow counts events in the current one-second window.
type rateWindow struct {
	mu    sync.Mutex
	start time.Time
	n     int
}

// allow counts one event at now, unless limit were counted in its window.
func (w *rateWindow) allow(now time.Time, limit int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.start) >= time.Second || now.Before(w.start) {
		w.start, w.n = now, 0
	}
	if w.n >= limit {
		return false
	}
	w.n++
	return true
}

// analyse returns s's analysis, made now within the bounds above when no
// one made it yet, and the cache's entry for s (scriptCache.lookup): a
// new text is kept once analysed, unless it does not compile; one the
// bounds refuse is not. c may be nil (no rate then). A shebang Redis
// refuses (script.ShebangFlags) is refused first, in Redis's words, and
// the text is neither analysed nor kept, as Redis keeps no such text.
func (d *Dispatcher) analyse(ctx context.Context, c *Client, s *cachedScript) (*cachedScript, *lua.Analysis, Reply) {
	if s.analysed.Load() {
		return d.keepValid(s), s.a, nil
	}
	if _, _, err := script.ShebangFlags(s.src); err != nil {
		return s, nil, Error("ERR " + err.Error())
	}
	if c != nil && !c.newScripts.allow(d.now(), newScriptsPerSecond) {
		d.refusedNew.Add(1)
		return s, nil, Errorf(errTooManyNewScripts, newScriptsPerSecond)
	}
	if d.analyses != nil {
		timer := time.NewTimer(analysisWait)
		defer timer.Stop()
		select {
		case d.analyses <- struct{}{}:
			defer func() { <-d.analyses }()
		case <-timer.C:
			d.refusedBusy.Add(1)
			return s, nil, Errorf(errAnalysesBusy, maxAnalyses)
		case <-ctx.Done():
			d.refusedBusy.Add(1)
			return s, nil, Errorf(errAnalysesBusy, maxAnalyses)
		}
	}
	a := s.analysis()
	return d.keepValid(s), a, nil
}

// keepValid keeps analysed s in the cache unless it does not compile (as
// Redis keeps no such text), and returns the cache's entry for it.
func (d *Dispatcher) keepValid(s *cachedScript) *cachedScript {
	if s.a.Invalid {
		return s
	}
	return d.scripts.keep(s)
}

// Refusals counts the new scripts refused by the bounds above since New,
// by limit name.
func (d *Dispatcher) Refusals() map[string]uint64 {
	return map[string]uint64{LimitNewScripts: d.refusedNew.Load(), LimitAnalyses: d.refusedBusy.Load()}
}
