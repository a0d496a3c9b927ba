package tests

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/anishathalye/porcupine"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// The linearizability checker: clients through three proxies do SET, GET,
// DEL, SET NX, SET … IFEQ and DELIFEQ on a few keys while backends are
// stopped, restarted empty (and quarantined) and the links between proxies
// and backends are slowed or cut (toxiproxy, in this process). Porcupine
// then checks the history against a register per key.

// linearHCL: a small max_ttl, so that a backend restarted empty is
// quarantined for seconds and votes again within the run; keys are
// written without expiry (leases of default_ttl, renewed), so that no key
// expires during the run; a short node_timeout keeps operations flowing
// while a backend is stopped.
const linearHCL = `max_ttl = "4s"
default_ttl = "4s"
node_timeout = "300ms"
health_interval = "100ms"`

var linearKeys = []string{"lin:a", "lin:b", "lin:c"}

// absent is the register's value for a key that does not exist.
const absent = "\x00absent"

type linOp uint8

const (
	opGet linOp = iota
	opSet
	opDel
	opSetNX
	opCAS
	opCAD
)

var opNames = [...]string{"GET", "SET", "DEL", "SET NX", "SET IFEQ", "DELIFEQ"}

type linInput struct {
	op       linOp
	key      string
	val, old string
}

type linOutput struct {
	ok      bool   // SET NX, IFEQ, DELIFEQ: it took effect
	val     string // GET
	unknown bool   // no answer: the effect may or may not have happened
}

// registerModel is one key's register. A conditional write (SET NX, SET
// IFEQ, DELIFEQ) that succeeds must have found its condition; one that is
// refused (nil, 0) found it false, or found it true and may or may not
// have taken effect: Redlock refuses whenever fewer than a quorum applied
// it, and a compare-and-set or compare-and-delete that reached some
// backends is not undone (two releases of one token at once can both be
// refused while together deleting the key).
var registerModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range h {
			k := o.Input.(linInput).key
			if by[k] == nil {
				keys = append(keys, k)
			}
			by[k] = append(by[k], o)
		}
		out := make([][]porcupine.Operation, len(keys))
		for i, k := range keys {
			out[i] = by[k]
		}
		return out
	},
	Init: func() []any { return []any{absent} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(string), input.(linInput), output.(linOutput)
		if in.op == opGet {
			if out.val != s {
				return nil
			}
			return []any{s}
		}
		next, cond := in.val, true
		switch in.op {
		case opDel:
			next = absent
		case opSetNX:
			cond = s == absent
		case opCAS:
			cond = s == in.old
		case opCAD:
			next, cond = absent, s == in.old
		}
		unconditional := in.op == opSet || in.op == opDel
		switch {
		case !cond:
			if out.ok && !out.unknown {
				return nil
			}
			return []any{s}
		case out.unknown, !unconditional && !out.ok:
			return []any{s, next}
		}
		return []any{next}
	},
	Equal: func(a, b any) bool { return a.(string) == b.(string) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		res := "ok"
		switch {
		case out.unknown:
			res = "?"
		case in.op == opGet:
			res = show(out.val)
		case in.op != opSet && in.op != opDel && !out.ok:
			res = "refused"
		}
		return fmt.Sprintf("%s %s %s %s → %s", opNames[in.op], in.key, show(in.val), show(in.old), res)
	},
	DescribeState: func(state any) string { return show(state.(string)) },
}

func show(v string) string {
	if v == absent {
		return "(absent)"
	}
	return v
}

// linHistory records operations with times from one origin.
type linHistory struct {
	origin time.Time
	mu     sync.Mutex
	ops    []porcupine.Operation
	counts map[string]int
}

func (h *linHistory) add(client int, in linInput, out linOutput, call, ret time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := ret.Sub(h.origin).Nanoseconds()
	if out.unknown {
		r = math.MaxInt64 // may take effect at any time until the end
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call.Sub(h.origin).Nanoseconds(), Return: r})
	kind := "ok"
	if out.unknown {
		kind = "indeterminate"
	}
	h.counts[opNames[in.op]+" "+kind]++
}

// toxics is an in-process toxiproxy with one link per proxy and backend.
type toxics struct {
	srv *toxiproxy.ApiServer
}

func newToxics() *toxics {
	m := toxiproxy.NewMetricsContainer(prometheus.NewRegistry())
	return &toxics{srv: toxiproxy.NewServer(m, zerolog.Nop())}
}

// link starts a toxiproxy from a free loopback port to upstream.
func (x *toxics) link(t *testing.T, name, upstream string) *toxiproxy.Proxy {
	t.Helper()
	p := toxiproxy.NewProxy(x.srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy %s: %v", name, err)
	}
	t.Cleanup(p.Stop)
	return p
}

func addToxic(t *testing.T, p *toxiproxy.Proxy, json string) {
	t.Helper()
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(json)); err != nil {
		t.Fatalf("toxic on %s: %v", p.Name, err)
	}
}

func clearToxics(p *toxiproxy.Proxy) { p.Toxics.ResetToxics(context.Background()) }

func TestLinearizable(t *testing.T) {
	t.Parallel()
	d := chaosDuration(t)
	rs := startCluster(t, 5)
	tox := newToxics()
	const nproxies, perProxy = 3, 2
	links := make([][]*toxiproxy.Proxy, nproxies)
	ps := make([]*proxyProc, nproxies)
	for i := range ps {
		urls := make([]string, len(rs))
		for b, r := range rs {
			l := tox.link(t, fmt.Sprintf("p%d-b%d", i, b), r.Addr())
			links[i] = append(links[i], l)
			urls[b] = "redis://" + l.Listen
		}
		ps[i] = startProxyURLs(t, urls, linearHCL)
	}
	ctx := testCtx(t, d+3*time.Minute)
	h := &linHistory{origin: time.Now(), counts: map[string]int{}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for c := range nproxies * perProxy {
		cl := ps[c%nproxies].Client(&redis.Options{PoolSize: 1, MaxRetries: -1, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
		wg.Go(func() { linClient(ctx, c, cl, h, &stop) })
	}

	var faults []string
	fault := func(name string, hold time.Duration, begin, end func()) {
		faults = append(faults, fmt.Sprintf("%s at %.1fs", name, time.Since(h.origin).Seconds()))
		begin()
		time.Sleep(hold)
		end()
		time.Sleep(700 * time.Millisecond) // the workload rewrites the keys before the next fault
	}
	end := h.origin.Add(d)
	for n := 0; n == 0 || time.Until(end) > 0; n++ {
		fault("latency 40±30ms on every link of proxy 1", 1500*time.Millisecond, func() {
			for _, l := range links[1] {
				addToxic(t, l, `{"name":"lat-down","type":"latency","stream":"downstream","attributes":{"latency":40,"jitter":30}}`)
				addToxic(t, l, `{"name":"lat-up","type":"latency","stream":"upstream","attributes":{"latency":10,"jitter":10}}`)
			}
		}, func() {
			for _, l := range links[1] {
				clearToxics(l)
			}
		})
		fault("SIGSTOP backend 2", 1500*time.Millisecond, rs[2].Stop, rs[2].Cont)
		fault("partition of proxy 0 from backends 0 and 1", 1500*time.Millisecond, func() {
			for _, l := range links[0][:2] {
				addToxic(t, l, `{"name":"cut-up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
				addToxic(t, l, `{"name":"cut-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
			}
		}, func() {
			for _, l := range links[0][:2] {
				clearToxics(l)
			}
		})
		fault("kill -9 and empty restart of backend 4 (quarantined)", 0, rs[4].Restart, func() {})
	}
	stop.Store(true)
	wg.Wait()

	h.mu.Lock()
	ops := h.ops
	h.mu.Unlock()
	t.Logf("%d operations checked over %v: %v", len(ops), time.Since(h.origin).Round(time.Second), h.counts)
	t.Logf("%d faults injected: %s", len(faults), strings.Join(faults, "; "))
	model := registerModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 2*time.Minute)
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Logf("porcupine gave up within its time limit; nothing found")
		return
	}
	f, err := os.CreateTemp("", "redlock-linear-*.html")
	if err != nil {
		t.Fatalf("history not linearizable (and no file for the visualisation: %v)", err)
	}
	f.Close()
	if err := porcupine.VisualizePath(model, info, f.Name()); err != nil {
		t.Fatalf("history not linearizable (visualisation failed: %v)", err)
	}
	t.Fatalf("history not linearizable: see %s", f.Name())
}

// linClient does random operations on linearKeys until stop; the old
// value of a compare is the last value it saw of that key, so compares
// succeed often.
func linClient(ctx context.Context, id int, c *redis.Client, h *linHistory, stop *atomic.Bool) {
	seen := map[string]string{}
	rng := rand.New(rand.NewPCG(uint64(id), 23))
	for n := 0; !stop.Load(); n++ {
		key := linearKeys[rng.IntN(len(linearKeys))]
		in := linInput{key: key, val: fmt.Sprintf("c%d-%d", id, n)}
		switch p := rng.IntN(100); {
		case p < 35:
			in.op = opGet
		case p < 60:
			in.op = opSet
		case p < 68:
			in.op = opDel
		case p < 78:
			in.op = opSetNX
		case p < 90:
			in.op = opCAS
		default:
			in.op = opCAD
		}
		if in.op == opCAS || in.op == opCAD {
			in.old = seen[key]
			if in.old == "" || in.old == absent {
				in.op = opSetNX
			}
		}
		if in.op == opCAD {
			in.val = ""
		}
		call := time.Now()
		out, err := linDo(ctx, c, in)
		ret := time.Now()
		if err != nil {
			if in.op == opGet { // a read without an answer has no effect
				h.mu.Lock()
				h.counts["GET unanswered (dropped)"]++
				h.mu.Unlock()
				continue
			}
			out = linOutput{unknown: true}
		}
		switch {
		case out.unknown:
		case in.op == opGet:
			seen[key] = out.val
		case in.op == opSet, out.ok && in.op != opCAD:
			seen[key] = in.val
		}
		h.add(id, in, out, call, ret)
		time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
	}
}

func linDo(ctx context.Context, c *redis.Client, in linInput) (linOutput, error) {
	switch in.op {
	case opGet:
		v, err := c.Get(ctx, in.key).Result()
		if errors.Is(err, redis.Nil) {
			return linOutput{val: absent}, nil
		}
		return linOutput{val: v}, err
	case opSet:
		return linOutput{ok: true}, c.Set(ctx, in.key, in.val, 0).Err()
	case opDel:
		return linOutput{ok: true}, c.Del(ctx, in.key).Err()
	case opSetNX:
		ok, err := c.SetNX(ctx, in.key, in.val, 0).Result()
		return linOutput{ok: ok}, err
	case opCAS:
		err := c.Do(ctx, "SET", in.key, in.val, "IFEQ", in.old).Err()
		if errors.Is(err, redis.Nil) {
			return linOutput{}, nil
		}
		return linOutput{ok: err == nil}, err
	}
	n, err := c.Do(ctx, "DELIFEQ", in.key, in.old).Int()
	return linOutput{ok: n == 1}, err
}
