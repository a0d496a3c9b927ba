package redlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// DialConn opens a new connection of its own to the backend, as the
// node's other connections are made (TCP or TLS as the URL says, the
// node's credentials, its database), for callers that speak to the
// backend themselves: package relay's subscriber, tracking and blocking
// connections. It returns once AUTH and SELECT succeeded; the caller owns
// the connection and closes it. The connection never votes: it does not
// run the connect check that reports restarts (the node's own connections
// do).
func (n *RedisNode) DialConn(ctx context.Context) (net.Conn, error) {
	o := n.opts
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialTimeout)
		defer cancel()
	}
	nc, err := o.Dialer(ctx, o.Network, o.Addr)
	if err != nil {
		return nil, err
	}
	if _, err := connSetup(ctx, nc, o); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// hasErrorPrefix reports a backend's error reply that starts with prefix,
// after an "ERR " some servers put before every error (KVRocks).
func hasErrorPrefix(err error, prefix string) bool {
	var re RedisError
	return errors.As(err, &re) && strings.HasPrefix(strings.TrimPrefix(string(re), "ERR "), prefix)
}

// authCommand is the AUTH that o's credentials call for, or nil.
func authCommand(o *redis.Options) []any {
	switch {
	case o.Password == "":
		return nil
	case o.Username != "":
		return []any{"AUTH", o.Username, o.Password}
	}
	return []any{"AUTH", o.Password}
}

// connSetup is the start of every connection of a node's own: AUTH and
// SELECT as o says, then more, in one write, before ctx's deadline (or
// within dialTimeout). An error reply to AUTH or SELECT fails it; more's
// replies are returned, error replies as RedisError values, for the
// caller to judge. Nothing else was sent, so nothing may follow the
// replies, and a reader of the caller's takes the connection over without
// losing buffered bytes. With nothing to send it sends nothing.
func connSetup(ctx context.Context, nc net.Conn, o *redis.Options, more ...[]any) ([]any, error) {
	var cmds [][]any
	if auth := authCommand(o); auth != nil {
		cmds = append(cmds, auth)
	}
	if o.DB != 0 {
		cmds = append(cmds, []any{"SELECT", o.DB})
	}
	own := len(cmds)
	cmds = append(cmds, more...)
	if len(cmds) == 0 {
		return nil, nil
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(dialTimeout)
	}
	_ = nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	var buf []byte
	for _, c := range cmds {
		buf = resp.AppendCommand(buf, c...)
	}
	if _, err := nc.Write(buf); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 4096)
	replies := make([]any, 0, len(more))
	for i := range cmds {
		v, err := resp.Read(br)
		if e, isErr := v.(RedisError); isErr && i < own {
			err = e
		}
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		if i >= own {
			replies = append(replies, v)
		}
	}
	if br.Buffered() > 0 {
		return nil, fmt.Errorf("connect: %d unexpected bytes after the setup replies", br.Buffered())
	}
	return replies, nil
}
