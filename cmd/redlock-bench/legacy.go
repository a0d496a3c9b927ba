package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The legacy cycles: how lock code written for one Redis takes and gives
// back a lock without a script (issue 36's table), each run through the
// proxy (legacy-…) and on the first backend (single-…), so that every
// cycle has its own single-Redis row to be compared with (vs-single).
//
//	setnx-del      SETNX key value / DEL key (no expiry: a kept lock)
//	set-nx-del     SET key value NX / DEL key (no expiry: a kept lock)
//	set-nx-px-del  SET key value NX PX ttl / DEL key
//	set-get        SET key value / GET key (a plain write and its read)

// legacyCycle is one cycle's two commands.
type legacyCycle struct {
	name    string
	acquire func(key, value, ttl string) []any // OK or 1: taken; null or 0: busy
	release func(key string) []any             // DEL: 1; GET: the value
}

var legacyCycles = []legacyCycle{
	{"setnx-del", func(k, v, _ string) []any { return []any{"SETNX", k, v} }, del},
	{"set-nx-del", func(k, v, _ string) []any { return []any{"SET", k, v, "NX"} }, del},
	{"set-nx-px-del", func(k, v, ttl string) []any { return []any{"SET", k, v, "NX", "PX", ttl} }, del},
	{"set-get", func(k, v, _ string) []any { return []any{"SET", k, v} }, func(k string) []any { return []any{"GET", k} }},
}

func del(key string) []any { return []any{"DEL", key} }

// legacyModes are the modes of legacyCycles, through the proxy and on one
// backend.
func legacyModes() []*mode {
	var ms []*mode
	for _, lc := range legacyCycles {
		ms = append(ms, &mode{name: "legacy-" + lc.name, needsProxy: true,
			open: func(t targets, ttl time.Duration) locker { return openLegacy(lc, t.proxy, ttl) }})
	}
	for _, lc := range legacyCycles {
		ms = append(ms, &mode{name: "single-" + lc.name, needsBackends: true,
			open: func(t targets, ttl time.Duration) locker { return openLegacy(lc, t.backends[0], ttl) }})
	}
	return ms
}

// legacyLocker runs one legacyCycle on one connection.
type legacyLocker struct {
	cycle legacyCycle
	c     *redis.Client
	ttl   string
	value string
}

func openLegacy(lc legacyCycle, addr string, ttl time.Duration) locker {
	return &legacyLocker{cycle: lc, c: newClient(addr), ttl: ttlMS(ttl)}
}

func (l *legacyLocker) acquire(ctx context.Context, key string) (bool, error) {
	l.value = newValue()
	v, err := l.c.Do(ctx, l.cycle.acquire(key, l.value, l.ttl)...).Result()
	switch {
	case errors.Is(err, redis.Nil), v == int64(0):
		return false, nil
	case err != nil:
		return false, err
	case v == "OK", v == int64(1):
		return true, nil
	}
	return false, fmt.Errorf("%s: unexpected reply %v", l.cycle.name, v)
}

func (l *legacyLocker) release(ctx context.Context, key string) error {
	v, err := l.c.Do(ctx, l.cycle.release(key)...).Result()
	switch {
	case err != nil:
		return err
	case v == int64(1), v == l.value:
		return nil
	}
	return fmt.Errorf("%s: release replied %v: the lock was lost before its release", l.cycle.name, v)
}

func (l *legacyLocker) close() { _ = l.c.Close() }
