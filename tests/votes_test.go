package tests

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestVoteUnorderedReplies: replies whose order is each backend's own hash
// table order (a set or hash past its small encoding, with each process's
// own hash seed) are compared as sets and maps, so backends holding the
// same members agree; an ordered reply stays ordered.
func TestVoteUnorderedReplies(t *testing.T) {
	t.Parallel()
	_, p, bs := interopSetup(t)
	ctx := testCtx(t, 60*time.Second)
	c := p.Client(nil)
	var members, fields []any
	for i := range 300 {
		members = append(members, fmt.Sprintf("m%d", i))
		fields = append(fields, fmt.Sprintf("f%d", i), fmt.Sprintf("v%d", i))
	}
	orders := map[string]bool{}
	for _, b := range bs {
		if err := b.SAdd(ctx, "set", members...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.HSet(ctx, "hash", fields...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.RPush(ctx, "list", members...).Err(); err != nil {
			t.Fatal(err)
		}
		orders[fmt.Sprint(b.SMembers(ctx, "set").Val())] = true
	}
	if len(orders) < 3 {
		t.Fatalf("only %d orders of SMEMBERS among five backends: the test needs them to differ", len(orders))
	}
	smembers, err := c.Eval(ctx, "return redis.call('SMEMBERS', KEYS[1])", []string{"set"}).StringSlice()
	if err != nil || len(smembers) != 300 {
		t.Fatalf("SMEMBERS by vote = %d members, %v", len(smembers), err)
	}
	hgetall, err := c.Eval(ctx, "local h = redis.call('HGETALL', KEYS[1]) return h", []string{"hash"}).StringSlice()
	if err != nil || len(hgetall) != 600 {
		t.Fatalf("HGETALL by vote = %d elements, %v", len(hgetall), err)
	}
	for i := 0; i < len(hgetall); i += 2 {
		if "v"+hgetall[i][1:] != hgetall[i+1] {
			t.Fatalf("HGETALL pair %q %q", hgetall[i], hgetall[i+1])
		}
	}
	both, err := c.Eval(ctx, "return {redis.call('HKEYS', KEYS[1]), redis.call('SINTER', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, 2)}", []string{"hash", "set", "list"}).Slice()
	if err != nil || len(both) != 3 || len(both[0].([]any)) != 300 || len(both[1].([]any)) != 300 ||
		!slices.Equal(both[2].([]any), []any{"m0", "m1", "m2"}) {
		t.Fatalf("a table of unordered replies by vote = %v", err)
	}
	// A set copied into a table in a loop is compared in order: the
	// wrapper on each backend sorts SMEMBERS's reply before the script
	// walks it, so every backend copies the same order.
	copied := "local out = {} for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do out[#out+1] = m end return out"
	got, err := c.Eval(ctx, copied, []string{"set"}).StringSlice()
	if err != nil || len(got) != 300 || !slices.IsSorted(got) {
		t.Fatalf("a set copied in a loop = %d members (sorted %v), %v; want all 300, sorted", len(got), slices.IsSorted(got), err)
	}
}

// TestPipelineOrdersBuiltKeys: a script that writes a key it builds from
// its declared key (KEYS[1] .. ':x') is ordered against the commands
// around it in one pipelined write: the GET before it reads the previous
// value, the GET after it the value it wrote (0 stale reads in 200
// rounds; 178 of 200 read the previous value when such scripts were
// ordered by their declared keys only).
func TestPipelineOrdersBuiltKeys(t *testing.T) {
	t.Parallel()
	_, p, _ := interopSetup(t)
	c := testkit.Dial(t, p.Addr())
	const script = "redis.call('set', KEYS[1] .. ':x', ARGV[1]) return redis.call('incr', KEYS[1])"
	var prev any
	stale := 0
	for i := range 200 {
		v := fmt.Sprintf("v%d", i)
		var b []byte
		b = testkit.AppendCmd(b, "GET", "dk:x")
		b = testkit.AppendCmd(b, "EVAL", script, "1", "dk", v)
		b = testkit.AppendCmd(b, "GET", "dk:x")
		c.Send(b)
		before, n, after := c.ReadReply(), c.ReadReply(), c.ReadReply()
		if n != int64(i+1) {
			t.Fatalf("round %d: EVAL = %v", i, n)
		}
		if before != prev || after != v {
			stale++
			t.Errorf("round %d: GET before the script = %v (want %v), after = %v (want %v)", i, before, prev, after, v)
		}
		prev = v
	}
	if stale > 0 {
		t.Fatalf("%d of 200 rounds read around the script out of order", stale)
	}
}
