package redlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// With ReleaseNotices, each backend that deletes a released key publishes
// the token's tag on the key's notice channel; a delete publishes "" (no
// token known).
func TestReleaseNotices(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{ReleaseNotices: true})
	sub := redis.NewClient(&redis.Options{Addr: c.mrs[1].Addr()}).PSubscribe(ctx, NoticePrefix+"*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()
	next := func() string {
		t.Helper()
		select {
		case m := <-msgs:
			key, ok := strings.CutPrefix(m.Channel, NoticePrefix)
			if !ok {
				t.Fatalf("notice on %q", m.Channel)
			}
			return key + " " + m.Payload
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
		if got, want := next(), k+" "+TokenTag("t2"); got != want {
			t.Fatalf("notice of ReleaseKeys = %q, want %q", got, want)
		}
	}
	if err := c.r.Write(ctx, "w", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, err := c.r.Delete(ctx, []string{"w", "absent"}); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	if got := next(); got != "w " {
		t.Fatalf("notice of Delete = %q, want %q", got, "w ")
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
