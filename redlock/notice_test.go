package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// With ReleaseChannel, each backend that deletes a released key publishes
// "key tag" there; a delete publishes "key " (no token known).
func TestReleaseNotices(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{ReleaseChannel: "released"})
	sub := redis.NewClient(&redis.Options{Addr: c.mrs[1].Addr()}).Subscribe(ctx, "released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()
	next := func() string {
		t.Helper()
		select {
		case m := <-msgs:
			return m.Payload
		case <-time.After(5 * time.Second):
			t.Fatal("no release notice")
			return ""
		}
	}
	if _, err := c.r.Acquire(ctx, "k", "tok", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.r.Release(ctx, "k", "tok"); err != nil {
		t.Fatal(err)
	}
	if got, want := next(), "k "+TokenTag("tok"); got != want {
		t.Fatalf("notice = %q, want %q", got, want)
	}
	if _, err := c.r.AcquireKeys(ctx, []string{"a", "b"}, "t2", time.Minute, IfAbsent); err != nil {
		t.Fatal(err)
	}
	if _, err := c.r.ReleaseKeys(ctx, []string{"a", "b"}, "t2"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if key, tag, ok := ParseNotice(next()); !ok || key != k || tag != TokenTag("t2") {
			t.Fatalf("notice of ReleaseKeys = %q %q %v", key, tag, ok)
		}
	}
	if err := c.r.Write(ctx, "w", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, err := c.r.Delete(ctx, []string{"w", "absent"}); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	if key, tag, ok := ParseNotice(next()); !ok || key != "w" || tag != "" {
		t.Fatalf("notice of Delete = %q %q %v", key, tag, ok)
	}
	// A release that deletes nothing publishes nothing.
	if err := c.r.Release(ctx, "k", "tok"); err == nil {
		t.Fatal("second Release succeeded")
	}
	select {
	case m := <-msgs:
		t.Fatalf("a release of a free key published %q", m.Payload)
	case <-time.After(100 * time.Millisecond): // nothing arrives; this only bounds the wait
	}
}
