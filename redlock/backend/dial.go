package backend

import (
	"bufio"
	"context"
	"crypto/tls"
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
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DialTimeout)
		defer cancel()
	}
	return dialer(n.opts, n.setupQuiet)(ctx)
}

// HasErrorPrefix reports a backend's error reply that starts with prefix,
// after an "ERR " some servers put before every error (KVRocks).
func HasErrorPrefix(err error, prefix string) bool {
	var re resp.Error
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
// within DialTimeout). An error reply to AUTH or SELECT fails it; more's
// replies are returned, error replies as resp.Error values, for the
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
		deadline = time.Now().Add(DialTimeout)
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
		if e, isErr := v.(resp.Error); isErr && i < own {
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

// mergeTLS returns a copy of tc completed from the URL's config: its
// ServerName when tc has none, and the stricter of the minimum versions.
// InsecureSkipVerify from either (the URL's skip_verify=true, or tc) holds.
func mergeTLS(fromURL, tc *tls.Config) *tls.Config {
	out := tc.Clone()
	if out.ServerName == "" {
		out.ServerName = fromURL.ServerName
	}
	out.MinVersion = max(out.MinVersion, fromURL.MinVersion, tls.VersionTLS12)
	out.InsecureSkipVerify = out.InsecureSkipVerify || fromURL.InsecureSkipVerify
	return out
}

// dialer dials the backend as o says (o.Dialer: backendDialer) and
// starts each new connection with setup; one whose setup fails is closed.
func dialer(o *redis.Options, setup func(context.Context, net.Conn) error) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		nc, err := o.Dialer(ctx, o.Network, o.Addr)
		if err != nil {
			return nil, err
		}
		if err := setup(ctx, nc); err != nil {
			nc.Close()
			return nil, err
		}
		return nc, nil
	}
}

// setupQuiet starts the bulk connection and DialConn's: authenticated
// and in the URL's database, without the INFO the calls' connection
// reports (the calls' and the probes' connections see a restart; the bulk
// carries reads and long commands of nodes the health loop lets vote).
func (n *RedisNode) setupQuiet(ctx context.Context, nc net.Conn) error {
	_, err := connSetup(ctx, nc, n.opts)
	return err
}

// backendDialer dials a backend for every connection of a node: TCP (or
// a Unix socket), then TLS when opts has a TLS config. It refuses a TCP
// connection to itself: dialling a loopback port that nothing listens on
// can connect the socket to itself (TCP simultaneous open), and that
// socket would then both pass for the backend, echoing our commands as
// replies, and hold the port the restarting backend needs.
func backendDialer(opts *redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: DialTimeout}
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if selfConnected(nc) {
			nc.Close()
			return nil, fmt.Errorf("dial %s %s: the socket connected to itself (nothing listens there)", network, addr)
		}
		if opts.TLSConfig == nil {
			return nc, nil
		}
		tc := tls.Client(nc, opts.TLSConfig.Clone())
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	}
}

// selfConnected reports a TCP connection whose two ends are one address.
func selfConnected(nc net.Conn) bool {
	l, ok1 := nc.LocalAddr().(*net.TCPAddr)
	r, ok2 := nc.RemoteAddr().(*net.TCPAddr)
	return ok1 && ok2 && l.Port == r.Port && l.IP.Equal(r.IP)
}

// setupPipe starts a fresh pipelined connection (the calls', the side)
// as connSetup does (AUTH, SELECT), sets the script limit and runs the
// connect check before the connection carries its first command: INFO,
// reported to the observer.
func (n *RedisNode) setupPipe(ctx context.Context, nc net.Conn) error {
	more := [][]any{{"INFO"}}
	if c := n.scriptLimitCmd(); c != nil {
		more = [][]any{c, {"INFO"}}
	}
	replies, err := connSetup(ctx, nc, n.opts, more...)
	if err != nil {
		return err
	}
	// A backend that refuses the script limit (CONFIG renamed or not
	// allowed) still serves: CheckBackends reports it.
	info := replies[len(replies)-1]
	if e, isErr := info.(resp.Error); isErr {
		return fmt.Errorf("connect: %w", e)
	}
	s, _ := info.(string)
	p := parseInfo(s)
	n.native.Store(int32(p.native))
	n.report(p)
	return nil
}

// redact drops the userinfo part of a URL for error messages.
func redact(rawurl string) string {
	scheme, rest, ok := strings.Cut(rawurl, "://")
	if !ok {
		scheme, rest = "", rawurl
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = "***@" + rest[i+1:]
	}
	if scheme == "" {
		return rest
	}
	return scheme + "://" + rest
}
