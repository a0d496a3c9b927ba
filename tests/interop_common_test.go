package tests

// Helpers shared by the client-interop tests (interop_*_test.go): the
// proxy over five backends, direct reads of the backends, the mutual
// exclusion checks, and running the Python and Node clients as subprocesses.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// interopQuorum is the quorum of the five backends every interop test uses.
const interopQuorum = 3

// interopSetup starts five backends and a proxy over them (with the
// harness's node_timeout), and returns go-redis clients that read the
// backends directly.
func interopSetup(t *testing.T) ([]*redisProc, *proxyProc, []*redis.Client) {
	t.Helper()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	bs := make([]*redis.Client, len(rs))
	for i, r := range rs {
		bs[i] = r.Client()
	}
	return rs, p, bs
}

// settled waits until every backend satisfies ok for key. A write
// through the proxy answers once a quorum has it; the others get it a
// moment later, and a test that then changes a backend directly, or needs
// no later invalidation, must wait for them.
func settled(t *testing.T, bs []*redis.Client, what string, ok func(b *redis.Client) bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what+" on every backend", func() bool {
		for _, b := range bs {
			if !ok(b) {
				return false
			}
		}
		return true
	})
}

// holds reports a backend check for key holding value.
func holds(ctx context.Context, key, value string) func(b *redis.Client) bool {
	return func(b *redis.Client) bool {
		v, err := b.Get(ctx, key).Result()
		return err == nil && v == value
	}
}

// backendHolders counts the backends on which key holds value, reading
// each backend directly (not through the proxy).
func backendHolders(ctx context.Context, bs []*redis.Client, key, value string) (int, error) {
	n := 0
	for _, b := range bs {
		got, err := b.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("GET %q on backend %s: %w", key, b.Options().Addr, err)
		}
		if got == value {
			n++
		}
	}
	return n, nil
}

// requireQuorum fails the test unless key holds value on a quorum of the
// backends.
func requireQuorum(ctx context.Context, t testing.TB, bs []*redis.Client, key, value, when string) {
	t.Helper()
	n, err := backendHolders(ctx, bs, key, value)
	if err != nil {
		t.Fatal(err)
	}
	if n < interopQuorum {
		t.Fatalf("%s: key %q holds %q on %d of %d backends, want at least %d", when, key, value, n, len(bs), interopQuorum)
	}
}

// requireNowhere fails the test unless key holds value on no backend. The
// proxy answers a release once a quorum deleted the key and lets the calls
// to the other backends finish in the background: the value must be off a
// quorum at once and off every backend within a node timeout or so.
func requireNowhere(ctx context.Context, t testing.TB, bs []*redis.Client, key, value, when string) {
	t.Helper()
	n, err := backendHolders(ctx, bs, key, value)
	if err != nil {
		t.Fatal(err)
	}
	if n >= interopQuorum {
		t.Fatalf("%s: key %q still holds %q on %d of %d backends, a quorum", when, key, value, n, len(bs))
	}
	deadline := time.Now().Add(2 * time.Second)
	for n != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if n, err = backendHolders(ctx, bs, key, value); err != nil {
			t.Fatal(err)
		}
	}
	if n != 0 {
		t.Fatalf("%s: key %q still holds %q on %d backends 2s later, want 0", when, key, value, n)
	}
}

// waitExpired waits until key is on no backend, for at most 10 s: a test
// of what happens after a lock expired waits for the expiry instead of
// sleeping for the ttl. (A short ttl would not do: each backend call gets
// 5% of it.)
func waitExpired(ctx context.Context, t testing.TB, bs []*redis.Client, key string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("key %q to expire on every backend", key), func() bool {
		for _, b := range bs {
			n, err := b.Exists(ctx, key).Result()
			if err != nil {
				t.Fatalf("EXISTS %q on backend %s: %v", key, b.Options().Addr, err)
			}
			if n != 0 {
				return false
			}
		}
		return true
	})
}

// backendPTTLs are the PTTLs of key on each backend.
func backendPTTLs(ctx context.Context, t testing.TB, bs []*redis.Client, key string) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(bs))
	for i, b := range bs {
		d, err := b.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL %q on backend %s: %v", key, b.Options().Addr, err)
		}
		out[i] = d
	}
	return out
}

// countAbove counts the durations greater than min.
func countAbove(ds []time.Duration, min time.Duration) int {
	n := 0
	for _, d := range ds {
		if d > min {
			n++
		}
	}
	return n
}

// inUse is the shared "I am in the critical section" flag of in-process
// workers: enter must never find it already set.
type inUse struct {
	flag       atomic.Bool
	violations atomic.Int64
	entries    atomic.Int64
}

// enter sets the flag; it returns false (and counts a violation) when
// another worker already holds it.
func (u *inUse) enter() bool {
	u.entries.Add(1)
	if !u.flag.CompareAndSwap(false, true) {
		u.violations.Add(1)
		return false
	}
	return true
}

func (u *inUse) leave() { u.flag.Store(false) }

// window is one critical section of a subprocess worker, in CLOCK_MONOTONIC
// nanoseconds (one clock for every process on Linux).
type window struct {
	worker     int
	start, end int64
}

// checkNoOverlap fails the test when two critical sections overlap.
func checkNoOverlap(t testing.TB, ws []window) {
	t.Helper()
	sort.Slice(ws, func(i, j int) bool { return ws[i].start < ws[j].start })
	for i, w := range ws {
		if w.end < w.start {
			t.Errorf("worker %d window [%d, %d] ends before it starts", w.worker, w.start, w.end)
		}
		if i > 0 && w.start < ws[i-1].end {
			t.Errorf("mutual exclusion violated: worker %d held the lock during [%d, %d] ns and worker %d during [%d, %d] ns (overlap %v)",
				ws[i-1].worker, ws[i-1].start, ws[i-1].end, w.worker, w.start, w.end, time.Duration(ws[i-1].end-w.start))
		}
	}
}

// contendResult is what a subprocess worker prints in "contend" mode.
type contendResult struct {
	Error      string           `json:"error"`
	Windows    [][2]json.Number `json:"windows"`
	MinHolders *int             `json:"min_holders"`
}

// runContenders starts workers subprocesses at once (argv(i) gives the
// command line of worker i, which must end with the start-at time the
// worker waits for), collects their windows and checks mutual exclusion,
// the number of rounds and that every hold sat on a quorum.
func runContenders(t *testing.T, workers, rounds int, limit time.Duration, argv func(i int, startAt string) []string) {
	t.Helper()
	startAt := strconv.FormatInt(time.Now().Add(2*time.Second).UnixMilli(), 10)
	type res struct {
		out string
		err error
	}
	results := make([]res, workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a := argv(i, startAt)
			out, err := runLimited(limit, a[0], a[1:]...)
			results[i] = res{out, err}
		}(i)
	}
	wg.Wait()
	var ws []window
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("worker %d failed: %v\n%s", i, r.err, r.out)
		}
		var cr contendResult
		if err := json.Unmarshal([]byte(lastLine(r.out)), &cr); err != nil {
			t.Fatalf("worker %d printed %q: %v", i, r.out, err)
		}
		if cr.Error != "" {
			t.Fatalf("worker %d: %s", i, cr.Error)
		}
		if len(cr.Windows) != rounds {
			t.Fatalf("worker %d completed %d rounds, want %d", i, len(cr.Windows), rounds)
		}
		if cr.MinHolders == nil || *cr.MinHolders < interopQuorum {
			t.Errorf("worker %d: while held, the lock sat on as few as %v of 5 backends, want at least %d", i, cr.MinHolders, interopQuorum)
		}
		for _, w := range cr.Windows {
			s, err1 := w[0].Int64()
			e, err2 := w[1].Int64()
			if err1 != nil || err2 != nil {
				t.Fatalf("worker %d: bad window %v", i, w)
			}
			ws = append(ws, window{worker: i, start: s, end: e})
		}
	}
	checkNoOverlap(t, ws)
	// The workers really contended: the lock passed between them.
	handoffs := 0
	for i := 1; i < len(ws); i++ {
		if ws[i].worker != ws[i-1].worker {
			handoffs++
		}
	}
	if handoffs < workers-1 {
		t.Errorf("the lock changed hands %d times among %d workers: they did not contend", handoffs, workers)
	}
	t.Logf("%d workers × %d rounds: %d non-overlapping critical sections, %d hand-offs between workers", workers, rounds, len(ws), handoffs)
}

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// runLimited runs a command with a time limit; stdout is returned, and
// stderr is appended to the error.
func runLimited(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s timed out after %v (stderr: %s)", name, limit, stderr.String())
	} else if err != nil {
		err = fmt.Errorf("%s %s: %w; stderr:\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), err
}

// runJSON runs a scenario subprocess and decodes its one JSON object.
func runJSON(t *testing.T, limit time.Duration, name string, args ...string) map[string]any {
	t.Helper()
	out, err := runLimited(limit, name, args...)
	if err != nil {
		t.Fatalf("%v\nstdout: %s", err, out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lastLine(out)), &m); err != nil {
		t.Fatalf("%s printed %q: %v", name, out, err)
	}
	return m
}

// jsonCheck compares observed fields of a scenario's JSON output with
// their expected values, reporting every mismatch with the field name.
func jsonCheck(t *testing.T, what string, got map[string]any, want map[string]any) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: no %q in the output %v", what, k, got)
			continue
		}
		w := want[k]
		if fmt.Sprint(normJSON(g)) != fmt.Sprint(normJSON(w)) {
			t.Errorf("%s: %s = %#v, want %#v", what, k, g, w)
		}
	}
}

// normJSON makes JSON numbers and Go ints compare equal.
func normJSON(v any) any {
	switch x := v.(type) {
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	case int:
		return int64(x)
	}
	return v
}

// jsonInt reads an integer field of a scenario's output.
func jsonInt(t *testing.T, m map[string]any, k string) int64 {
	t.Helper()
	f, ok := m[k].(float64)
	if !ok {
		t.Fatalf("output field %q = %#v, want a number", k, m[k])
	}
	return int64(f)
}

// jsonInts reads an array-of-integers field.
func jsonInts(t *testing.T, m map[string]any, k string) []int64 {
	t.Helper()
	a, ok := m[k].([]any)
	if !ok {
		t.Fatalf("output field %q = %#v, want an array", k, m[k])
	}
	out := make([]int64, len(a))
	for i, v := range a {
		f, ok := v.(float64)
		if !ok {
			t.Fatalf("output field %q[%d] = %#v, want a number", k, i, v)
		}
		out[i] = int64(f)
	}
	return out
}

// requireOffQuorum checks a "holders right after the release" field of a
// scenario's output: the released value must already be off a quorum.
func requireOffQuorum(t *testing.T, got map[string]any, fields ...string) {
	t.Helper()
	for _, k := range fields {
		switch v := got[k].(type) {
		case float64:
			if v >= interopQuorum {
				t.Errorf("%s = %v: right after the release the value still sits on a quorum", k, v)
			}
		case []any:
			for i, x := range v {
				if f, _ := x.(float64); f >= interopQuorum {
					t.Errorf("%s[%d] = %v: right after the release the value still sits on a quorum", k, i, x)
				}
			}
		default:
			t.Errorf("output field %s = %#v, want a number or an array", k, got[k])
		}
	}
}

// countAboveMs counts the values greater than min.
func countAboveMs(vs []int64, min int64) int {
	n := 0
	for _, v := range vs {
		if v > min {
			n++
		}
	}
	return n
}

// allowSkip reports whether a missing client may skip its test instead of
// failing it.
func allowSkip() bool { return os.Getenv("REDLOCK_ALLOW_SKIP") == "1" }

// debianPython is the interpreter with python3-redis; the python3 on PATH
// may be another build without it.
const debianPython = "/usr/bin/python3"

// requirePythonRedis fails (or, with REDLOCK_ALLOW_SKIP=1, skips) unless
// /usr/bin/python3 can import redis.
func requirePythonRedis(t *testing.T) {
	t.Helper()
	out, err := runLimited(20*time.Second, debianPython, "-c", "import redis, redis.lock, sys; sys.stdout.write(redis.__version__)")
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s cannot import redis (install the Debian package python3-redis; `make test` does): %v %s", debianPython, err, out)
	if allowSkip() {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

// pythonScript is the path of a script in tests/python.
func pythonScript(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("python", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	nodeOnce sync.Once
	nodeErr  error
	nodeDir  string
)

// requireNode makes sure node and tests/node/node_modules are there,
// running `npm ci` once when node_modules is missing; it returns the
// directory of the node scripts.
func requireNode(t *testing.T) string {
	t.Helper()
	nodeOnce.Do(func() {
		dir, err := filepath.Abs("node")
		if err != nil {
			nodeErr = err
			return
		}
		nodeDir = dir
		if _, err := exec.LookPath("node"); err != nil {
			nodeErr = errors.New("node is not on PATH (Node.js 20 is needed for the node-redlock and node-redis tests)")
			return
		}
		if nodeModulesComplete(dir) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			nodeErr = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	if nodeErr != nil {
		if allowSkip() {
			t.Skip(nodeErr.Error())
		}
		t.Fatal(nodeErr)
	}
	return nodeDir
}

// nodeModulesComplete reports whether every dependency of dir's
// package.json is installed in its node_modules (a node_modules left from
// an older package.json is not).
func nodeModulesComplete(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return false
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if json.Unmarshal(b, &pkg) != nil || len(pkg.Dependencies) == 0 {
		return false
	}
	for name := range pkg.Dependencies {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", name, "package.json")); err != nil {
			return false
		}
	}
	return true
}

// joinAddrs is "host:port,host:port,…" of the backends.
func joinAddrs(rs []*redisProc) string { return strings.Join(backendAddrs(rs), ",") }
