package tests

import (
	"path/filepath"
	"testing"
	"time"
)

// wantCounts are the deliveries of each message the pub/sub workers
// (tests/python/pubsub_worker.py, tests/node/pubsub.js) publish: once each,
// on the channel and on the pattern, and twice what is published twice.
var wantCounts = map[string]any{
	"same-proxy": 1, "other-proxy": 1, "script": 1, "twice": 2, "twice-everywhere": 2,
	"p:same-proxy": 1, "p:other-proxy": 1, "p:script": 1, "p:twice": 2, "p:twice-everywhere": 2,
}

// TestInteropPubSubRedisPy: redis-py 4.3 (RESP2) subscribed through one
// proxy, messages published through it, through the other proxy, and on
// every backend.
func TestInteropPubSubRedisPy(t *testing.T) {
	t.Parallel()
	requirePythonRedis(t)
	rs, pa, pb := pubsubSetup(t)
	got := runJSON(t, 60*time.Second, debianPython, pythonScript(t, "pubsub_worker.py"), pa.Addr(), pb.Addr(), joinAddrs(rs))
	jsonCheck(t, "redis-py pub/sub", got, map[string]any{
		"confirms": []any{[]any{"subscribe", "pych", 1}, []any{"psubscribe", "pych*", 2}},
		"pong":     "pong",
		"counts":   wantCounts,
	})
	if n := jsonInt(t, got, "publish_receivers"); n < 1 {
		t.Errorf("PUBLISH through the subscriber's proxy answered %d receivers", n)
	}
}

// TestInteropPubSubIORedis: ioredis 5 in subscriber mode (RESP2): the
// same messages, PING while subscribed, and leaving subscriber mode.
func TestInteropPubSubIORedis(t *testing.T) {
	t.Parallel()
	dir := requireNode(t)
	rs, pa, pb := pubsubSetup(t)
	got := runJSON(t, 60*time.Second, "node", filepath.Join(dir, "pubsub.js"), pa.Addr(), pb.Addr(), joinAddrs(rs))
	jsonCheck(t, "ioredis subscriber mode", got, map[string]any{
		"subscribe":    1,
		"psubscribe":   2,
		"ping":         []any{"pong", ""},
		"counts":       wantCounts,
		"unsubscribe":  1,
		"punsubscribe": 0,
		"get_after":    nil,
	})
}
