package tests

// The least-privilege backend user of docs/operations.md, checked: the
// ACL line is read from the doc itself, applied to real backends, and the
// proxies connect as that user; every lock path then runs with no ACL
// denial on any backend (ACL LOG).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// docACL returns the arguments of the first ACL SETUSER line of
// docs/operations.md, the password set to pass.
func docACL(t *testing.T, pass string) []any {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "ACL SETUSER redlock-proxy on ") {
			continue
		}
		var args []any
		for _, f := range strings.Fields(line) {
			if f == ">LONG-RANDOM-PASSWORD" {
				f = ">" + pass
			}
			args = append(args, f)
		}
		return args
	}
	t.Fatal("docs/operations.md has no ACL SETUSER redlock-proxy line")
	return nil
}

// aclCluster starts three backends whose user redlock-proxy has the
// documented ACL (docs/operations.md) plus extra rules, with an empty ACL
// LOG, and returns them and the backend URLs that log in as that user.
func aclCluster(t *testing.T, extra ...any) ([]*redisProc, []string) {
	t.Helper()
	const pass = "acl-test-password"
	backends := startCluster(t, 3)
	urls := make([]string, len(backends))
	for i, b := range backends {
		ctx := testCtx(t, 5*time.Second)
		if err := b.Client().Do(ctx, append(docACL(t, pass), extra...)...).Err(); err != nil {
			t.Fatalf("backend %s: %v", b.Addr(), err)
		}
		if err := b.Client().Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
			t.Fatal(err)
		}
		urls[i] = "redis://redlock-proxy:" + pass + "@" + b.Addr()
	}
	return backends, urls
}

// TestDocumentedACLSuffices: two proxies over three backends whose only
// rights are the documented ones serve native locks with fences and
// sessions, the single-Redis dialect, a recognised release script, a
// hand-off across the proxies (release notices) and the tier's
// heartbeats, and no backend logs a denial.
func TestDocumentedACLSuffices(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server and the proxy binary (not with -short)")
	}
	backends, urls := aclCluster(t)
	a := startProxyURLs(t, urls, "")
	b := startProxyURLs(t, urls, "")
	ca, cb := testkit.Dial(t, a.Addr()), testkit.Dial(t, b.Addr())

	arr, ok := ca.Do("LOCK", "acl:native", "5000", "FENCE").([]any)
	if !ok || len(arr) != 3 || arr[2] == nil {
		t.Fatalf("LOCK FENCE: %v", arr)
	}
	if v := ca.Do("UNLOCK", "acl:native", arr[0].(string)); v != int64(1) {
		t.Fatalf("UNLOCK: %v", v)
	}
	if arr, ok := ca.Do("LOCK", "acl:session", "3000", "SESSION").([]any); !ok || len(arr) != 3 {
		t.Fatalf("LOCK SESSION: %v", arr)
	}
	for _, cmd := range [][]string{
		{"SET", "acl:legacy", "v", "NX", "PX", "5000"},
		{"GET", "acl:legacy"},
		{"PTTL", "acl:legacy"},
		{"PEXPIRE", "acl:legacy", "6000"},
		{"EVAL", ourRelease, "1", "acl:legacy", "v"},
		{"SETNX", "acl:kept", "v"},
		{"DEL", "acl:kept"},
		{"INCR", "acl:counter"},
		{"INFO", "backends"},
	} {
		if v := ca.Do(cmd...); isErrPrefix(v, "") {
			t.Fatalf("%v: %v", cmd, v)
		}
	}

	// A hand-off from a to b: b's waiter subscribes to the key's notices.
	arr, ok = ca.Do("LOCK", "acl:handoff", "10000").([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("LOCK: %v", arr)
	}
	cb.Timeout = 20 * time.Second
	sets := setCalls(t, backends[0])
	cb.SendCmd("LOCK", "acl:handoff", "10000", "WAIT", "15000")
	testkit.Eventually(t, 10*time.Second, "the waiter on b polling", func() bool {
		return setCalls(t, backends[0]) >= sets+3
	})
	if v := ca.Do("UNLOCK", "acl:handoff", arr[0].(string)); v != int64(1) {
		t.Fatalf("UNLOCK: %v", v)
	}
	if got, ok := cb.ReadReply().([]any); !ok || len(got) != 3 {
		t.Fatalf("waiter on b: %v", got)
	}
	// b heard the release through its subscription (which of the notice
	// and the waiter's own retry woke it is a race).
	bInfo := testkit.Dial(t, b.Addr())
	testkit.Eventually(t, 10*time.Second, "b receives the release notice", func() bool {
		return infoInt(t, bInfo, "locks", "release_notices") >= 1
	})

	// The session renews (a third of 3 s) and the heartbeats run (1 s).
	time.Sleep(2500 * time.Millisecond)
	for _, r := range backends {
		log, err := r.Client().Do(testCtx(t, 5*time.Second), "ACL", "LOG").Slice()
		if err != nil {
			t.Fatal(err)
		}
		if len(log) > 0 {
			t.Errorf("backend %s denied the proxy: %v", r.Addr(), log)
		}
	}
}

// TestACLWithoutPublishTurnsNoticesOff: a backend user set up before
// release notices existed (no +publish) must not break releases: the
// proxy finds out at start, says so, and releases without notices.
func TestACLWithoutPublishTurnsNoticesOff(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server and the proxy binary (not with -short)")
	}
	_, urls := aclCluster(t, "-publish")
	p := startProxyURLs(t, urls, "")
	c := testkit.Dial(t, p.Addr())
	arr, ok := c.Do("LOCK", "acl:k", "5000").([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("LOCK: %v", arr)
	}
	if v := c.Do("UNLOCK", "acl:k", arr[0].(string)); v != int64(1) {
		t.Fatalf("UNLOCK: %v", v)
	}
	if v := c.Do("SET", "acl:k", "v", "NX", "PX", "5000"); v != "OK" {
		t.Fatalf("SET NX: %v", v)
	}
	if v := c.Do("DEL", "acl:k"); v != int64(1) {
		t.Fatalf("DEL: %v", v)
	}
	if log := p.Log(); !strings.Contains(log, "release notices are off") {
		t.Fatalf("the proxy did not say that release notices are off; log:\n%s", log)
	}
}
