package tests

import (
	"cmp"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestInteropSimpleRedisMutex: simple-redis-mutex 3.0 over node-redis 6.
// It acquires with SET NX PX, takes a fencing token from INCR (a counter
// that only grows across the backends), extends with GET and PEXPIRE, and
// releases with a script that deletes the key and PUBLISHes the release
// (run by vote: it fires on every backend, and the relay delivers it
// once); a waiter is woken by that message, its polling set to 30 s.
func TestInteropSimpleRedisMutex(t *testing.T) {
	t.Parallel()
	dir := requireNode(t)
	rs := startCluster(t, 5)
	pa, pb := startProxy(t, rs, ""), startProxy(t, rs, "")
	script := filepath.Join(dir, "srmutex.js")
	backends := joinAddrs(rs)

	t.Run("scenario", func(t *testing.T) {
		got := runJSON(t, 40*time.Second, "node", script, "scenario", pa.Addr(), backends, "scenario")
		jsonCheck(t, "simple-redis-mutex", got, map[string]any{
			"acquired":              true,
			"second":                false,
			"holders_after_release": 0,
			"exists_after_release":  0,
			"again":                 true,
			"short_expired":         true,
			"next":                  true,
			"exists_at_end":         0,
		})
		for _, k := range []string{"holders", "short_holders", "next_holders_after_stale_release"} {
			if n := jsonInt(t, got, k); n < interopQuorum {
				t.Errorf("%s = %d: the held lock sits on %d of 5 backends, want at least %d", k, n, n, interopQuorum)
			}
		}
		requireOffQuorum(t, got, "holders_after_release_now")
		// refreshTimeout after 1.5 s of a 3 s lock set the ttl back to 3 s.
		if n := countAboveMs(jsonInts(t, got, "pttls_after_refresh"), 2000); n < interopQuorum {
			t.Errorf("after refreshTimeout, backend pttls are %v; want at least %d above 2000 ms", got["pttls_after_refresh"], interopQuorum)
		}
		if f := jsonInts(t, got, "fences"); len(f) != 2 || f[1] <= f[0] {
			t.Errorf("fencing tokens of two holders = %v, want increasing", f)
		}
	})

	// Workers on both proxies: a release through one wakes a waiter on
	// the other, whose polling (30 s) cannot explain a prompt hand-off.
	for _, tc := range []struct {
		name    string
		proxies []*proxyProc
	}{
		{"one-proxy", []*proxyProc{pa}},
		{"two-proxies", []*proxyProc{pa, pb}},
	} {
		t.Run("contention-"+tc.name, func(t *testing.T) {
			const workers, rounds = 4, 4
			ws := runSRMutexWorkers(t, script, backends, "contended-"+tc.name, workers, rounds, func(i int) *proxyProc {
				return tc.proxies[i%len(tc.proxies)]
			})
			requirePrompt(t, "simple-redis-mutex, "+tc.name, handoffGaps(t, ws), workers*rounds/2, 5*time.Second)
		})
	}
}

// srMutexResult is what srmutex.js prints in contend mode.
type srMutexResult struct {
	Windows    [][2]json.Number `json:"windows"`
	Waits      []json.Number    `json:"waits"`
	Fences     []int64          `json:"fences"`
	MinHolders *int             `json:"min_holders"`
}

// runSRMutexWorkers runs workers srmutex.js processes, worker i on
// proxyOf(i), each holding the lock rounds times for 300 ms and pausing
// 50 ms between (so the others are waiting at each release); it checks
// every hold sat on a quorum and the fencing tokens grow in the order of
// the holds, and returns the windows.
func runSRMutexWorkers(t *testing.T, script, backends, name string, workers, rounds int, proxyOf func(int) *proxyProc) []heldWindow {
	t.Helper()
	startAt := strconv.FormatInt(time.Now().Add(2*time.Second).UnixMilli(), 10)
	outs := make([]string, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = runLimited(90*time.Second, "node", script, "contend", proxyOf(i).Addr(), backends, name, strconv.Itoa(rounds), "300", "50", startAt)
		}()
	}
	wg.Wait()
	var ws []heldWindow
	type held struct {
		start int64
		fence int64
	}
	var fences []held
	for i := range workers {
		if errs[i] != nil {
			t.Fatalf("worker %d: %v\n%s", i, errs[i], outs[i])
		}
		var r srMutexResult
		if err := json.Unmarshal([]byte(lastLine(outs[i])), &r); err != nil {
			t.Fatalf("worker %d printed %q: %v", i, outs[i], err)
		}
		if len(r.Windows) != rounds || len(r.Waits) != rounds || len(r.Fences) != rounds {
			t.Fatalf("worker %d: %d windows, %d waits, %d fences; want %d each", i, len(r.Windows), len(r.Waits), len(r.Fences), rounds)
		}
		if r.MinHolders == nil || *r.MinHolders < interopQuorum {
			t.Errorf("worker %d: while held, the lock sat on as few as %v of 5 backends, want at least %d", i, r.MinHolders, interopQuorum)
		}
		for j, w := range r.Windows {
			s, err1 := w[0].Int64()
			e, err2 := w[1].Int64()
			wait, err3 := r.Waits[j].Int64()
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatalf("worker %d: bad window %v (wait %v)", i, w, r.Waits[j])
			}
			ws = append(ws, heldWindow{worker: i, wait: wait, start: s, end: e})
			fences = append(fences, held{s, r.Fences[j]})
		}
	}
	slices.SortFunc(fences, func(a, b held) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(fences); i++ {
		if fences[i].fence <= fences[i-1].fence {
			t.Errorf("fencing token %d after %d: the tokens do not grow in the order of the holds", fences[i].fence, fences[i-1].fence)
		}
	}
	return ws
}
