package redlock

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

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
	if o == nil {
		o = n.c.Options()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialTimeout)
		defer cancel()
	}
	nc, err := o.Dialer(ctx, o.Network, o.Addr)
	if err != nil {
		return nil, err
	}
	var cmds [][]any
	if o.Password != "" {
		if o.Username != "" {
			cmds = append(cmds, []any{"AUTH", o.Username, o.Password})
		} else {
			cmds = append(cmds, []any{"AUTH", o.Password})
		}
	}
	if o.DB != 0 {
		cmds = append(cmds, []any{"SELECT", o.DB})
	}
	if len(cmds) == 0 {
		return nc, nil
	}
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	var buf []byte
	for _, c := range cmds {
		buf = resp.AppendCommand(buf, c...)
	}
	if _, err := nc.Write(buf); err != nil {
		nc.Close()
		return nil, err
	}
	// Nothing else was sent: the replies are exactly these, and a reader
	// of the caller's may take over the connection afterwards without
	// losing buffered bytes.
	br := bufio.NewReaderSize(nc, 4096)
	for range cmds {
		if _, err := readReply(br); err != nil {
			nc.Close()
			return nil, fmt.Errorf("connect: %w", err)
		}
	}
	if br.Buffered() > 0 {
		nc.Close()
		return nil, fmt.Errorf("connect: %d unexpected bytes after the setup replies", br.Buffered())
	}
	_ = nc.SetDeadline(time.Time{})
	return nc, nil
}
