package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// The -handoff measurement: how long a lock takes to pass from its holder
// to a client waiting for it, on the same proxy and, with a second proxy
// over the same backends, from a holder on one proxy to a waiter on the
// other (the release notice's path). A holder takes the key; a waiter
// sends LOCK key ttl WAIT 5000 and, once LOCKINFO on its proxy shows it
// queued, the holder sends UNLOCK. The hand-off is the time from sending
// the UNLOCK to the waiter's LOCK reply, both seen by this process (from
// the UNLOCK's reply would flatter the hand-off across proxies, whose
// notice is published before that reply leaves); the waiter then unlocks
// and the round repeats.

// handoffKey is the key the measurement locks.
const handoffKey = "bench:handoff"

// handoffResult is a -handoff line of the report.
type handoffResult struct {
	Across   bool    `json:"across_proxies"` // holder and waiter on different proxies
	N        int     `json:"n"`
	MedianMS float64 `json:"median_ms"`
	P90MS    float64 `json:"p90_ms"`
	MaxMS    float64 `json:"max_ms"`
}

func (r *handoffResult) String() string {
	where := "one proxy"
	if r.Across {
		where = "across proxies"
	}
	return fmt.Sprintf("handoff (%s): %d hand-offs, UNLOCK sent → next waiter's grant: median %.3f ms, p90 %.3f ms, max %.3f ms",
		where, r.N, r.MedianMS, r.P90MS, r.MaxMS)
}

// measureHandoff runs n hand-offs from a holder on the proxy at from to
// a waiter on the proxy at to (the same address or not).
func measureHandoff(ctx context.Context, from, to string, n int, ttl time.Duration) (*handoffResult, error) {
	holder, waiter := newClient(from), newClient(to)
	defer holder.Close()
	defer waiter.Close()
	info := newClient(to)
	defer info.Close()
	ms := ttlMS(ttl)

	lat := make([]time.Duration, 0, n)
	for range n {
		tok, err := proxyLock(ctx, holder, handoffKey, ms)
		if err != nil {
			return nil, fmt.Errorf("-handoff: holder: %w", err)
		}
		type grant struct {
			at    time.Time
			token string
			err   error
		}
		got := make(chan grant, 1)
		go func() {
			t, err := proxyLock(ctx, waiter, handoffKey, ms, "WAIT", 5000)
			got <- grant{time.Now(), t, err}
		}()
		if err := waitQueued(ctx, info); err != nil {
			return nil, err
		}
		unlocked := time.Now()
		if err := holder.Do(ctx, "UNLOCK", handoffKey, tok).Err(); err != nil {
			return nil, fmt.Errorf("-handoff: UNLOCK: %w", err)
		}
		g := <-got
		if g.err != nil {
			return nil, fmt.Errorf("-handoff: waiter: %w", g.err)
		}
		lat = append(lat, g.at.Sub(unlocked))
		if err := waiter.Do(ctx, "UNLOCK", handoffKey, g.token).Err(); err != nil {
			return nil, fmt.Errorf("-handoff: waiter's UNLOCK: %w", err)
		}
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(int(q*float64(len(lat))), len(lat)-1)]) / float64(time.Millisecond)
	}
	return &handoffResult{Across: from != to, N: n, MedianMS: at(0.5), P90MS: at(0.9), MaxMS: at(1)}, nil
}

// proxyLock sends LOCK key ttl [extra…] and returns the token.
func proxyLock(ctx context.Context, c *redis.Client, key, ttl string, extra ...any) (string, error) {
	v, err := c.Do(ctx, append([]any{"LOCK", key, ttl}, extra...)...).Slice()
	if err != nil {
		return "", err
	}
	tok, ok := v[0].(string)
	if !ok || len(v) != 3 {
		return "", fmt.Errorf("unexpected LOCK reply %v", v)
	}
	return tok, nil
}

// waitQueued polls LOCKINFO until one waiter is queued for handoffKey.
func waitQueued(ctx context.Context, info *redis.Client) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := info.Do(ctx, "LOCKINFO", handoffKey).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("-handoff: LOCKINFO: %w (does the proxy support LOCKINFO?)", err)
		}
		switch m := v.(type) {
		case map[any]any: // RESP3
			if m["waiters"] == int64(1) {
				return nil
			}
		case []any: // RESP2: a flat list of pairs
			for i := 0; i+1 < len(m); i += 2 {
				if m[i] == "waiters" && m[i+1] == int64(1) {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return errors.New("-handoff: the waiter did not queue within 5s")
		}
		time.Sleep(200 * time.Microsecond)
	}
}
