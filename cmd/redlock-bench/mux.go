package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// proxy-mux: the proxy-setnx cycle (SET NX PX, then releaseScript by
// EVALSHA) from every client over ONE shared connection, as
// StackExchange.Redis, rueidis, Lettuce and auto-pipelining ioredis send
// all of a process's commands: rueidis multiplexes the clients'
// concurrent commands onto it, pipelined.
type muxLocker struct {
	c     rueidis.Client
	rel   *rueidis.Lua
	ttl   time.Duration
	value string
	done  func() // this locker no longer uses c
}

// openProxyMux opens one rueidis client with one connection, shared by
// every locker; the last close closes it.
func openProxyMux(t targets, ttl time.Duration, clients int) ([]locker, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{t.proxy},
		PipelineMultiplex: -1, // one connection
		DisableCache:      true,
		DisableRetry:      true,
		ForceSingleClient: true,
	})
	if err != nil {
		return nil, fmt.Errorf("rueidis: %w", err)
	}
	var once sync.Once
	var wg sync.WaitGroup
	wg.Add(clients)
	go func() { wg.Wait(); once.Do(c.Close) }()
	rel := rueidis.NewLuaScript(releaseSource)
	out := make([]locker, clients)
	for i := range out {
		out[i] = &muxLocker{c: c, rel: rel, ttl: ttl, done: wg.Done}
	}
	return out, nil
}

func (l *muxLocker) acquire(ctx context.Context, key string) (bool, error) {
	l.value = newValue()
	err := l.c.Do(ctx, l.c.B().Set().Key(key).Value(l.value).Nx().PxMilliseconds(l.ttl.Milliseconds()).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	return err == nil, err
}

func (l *muxLocker) release(ctx context.Context, key string) error {
	n, err := l.rel.Exec(ctx, l.c, []string{key}, []string{l.value}).AsInt64()
	return released("release script", n, err)
}

func (l *muxLocker) close() { l.done() }
