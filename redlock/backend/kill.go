package backend

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// OpenAhead opens ahead of need the connections a busy backend (at
// maxclients, or running a runaway script) must not have to accept then:
// KillScript's (the calls' connection is stuck behind the script), and
// the reads by vote's (bulk).
func (n *RedisNode) OpenAhead() { n.kill.Prime(); n.bulk.Prime() }

// SetScriptLimit makes every new pipelined connection set the backend's
// busy-script threshold to d (lua-time-limit, 5 s by default: until then
// a backend running a script reads no other connection).
func (n *RedisNode) SetScriptLimit(d time.Duration) { n.scriptLimit.Store(Millis(d)) }

// scriptLimitCmd is the command that sets the backend's busy-script
// threshold, or nil when none was asked for. lua-time-limit is the name
// every Redis and Valkey version accepts (7.0 renamed it
// busy-reply-threshold and kept the old name as an alias).
func (n *RedisNode) scriptLimitCmd() []any {
	ms := n.scriptLimit.Load()
	if ms <= 0 {
		return nil
	}
	return []any{"CONFIG", "SET", "lua-time-limit", strconv.FormatInt(ms, 10)}
}

// ApplyScriptLimit sets the backend's busy-script threshold now, on the
// side connection; a backend without CONFIG (miniredis) has none to set.
func (n *RedisNode) ApplyScriptLimit(ctx context.Context) error {
	cmd := n.scriptLimitCmd()
	if cmd == nil {
		return nil
	}
	_, err := n.side.Do(ctx, func(b []byte) []byte { return resp.AppendCommand(b, cmd...) })
	if HasErrorPrefix(err, "unknown command") {
		return nil // a backend without CONFIG (miniredis) has no such threshold
	}
	return err
}

// KillScript sends SCRIPT KILL and returns the backend's answer: nil for
// OK, or the error reply (NOTBUSY, UNKILLABLE…) as a resp.Error. It goes
// on the kill line, a pipelined connection of its own kept open ahead (see
// RedisNode); when that is gone or stale, on a new connection, which then
// becomes the kill line.
func (n *RedisNode) KillScript(ctx context.Context) error {
	defer n.kill.Prime() // a line lost on the way is opened again ahead of the next kill
	kill := func(b []byte) []byte { return resp.AppendCommand(b, "SCRIPT", "KILL") }
	if c := n.kill.Ready(); c != nil {
		// Half of what is left at most: a line gone silent must leave the
		// new connection time to be dialed.
		kctx := ctx
		if d, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			kctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(d)/2))
			defer cancel()
		}
		_, err := c.Do(kctx, kill)
		if err == nil || isErrorReply(err, "") {
			return err
		}
		c.Fail(err) // closed by the backend (a restart, its timeout) or silent: dial anew
		if ctx.Err() != nil {
			return fmt.Errorf("script kill: %w", err)
		}
	}
	c, err := n.kill.Get(ctx)
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, kill)
	if err != nil && !isErrorReply(err, "") {
		c.Fail(err)
		return fmt.Errorf("script kill: %w", err)
	}
	return err
}

// setupKill starts the kill line: authenticated as the URL says, and
// nothing else (SELECT is refused while a script runs; SCRIPT KILL needs
// no database).
func (n *RedisNode) setupKill(ctx context.Context, nc net.Conn) error {
	auth := &redis.Options{Username: n.opts.Username, Password: n.opts.Password}
	if _, err := connSetup(ctx, nc, auth); err != nil {
		return fmt.Errorf("script kill connection: %w", err)
	}
	return nil
}
