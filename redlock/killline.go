package redlock

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// The kill line: one connection per backend kept open, authenticated,
// for SCRIPT KILL (scriptkill.go). SCRIPT KILL is needed exactly when the
// backend is in trouble: busy with a runaway script, and perhaps at
// maxclients because callers piled up behind it, when a new connection
// may be refused or slow to be served. So it is dialled ahead, when the
// Redlock starts with a script timeout, and again in the background after
// each use that lost it; a kill that finds it gone or stale (the backend
// restarted) dials a new one within its own deadline.

// killLine holds a node's kill connection.
type killLine struct {
	dial func(ctx context.Context) (net.Conn, error) // dials and authenticates

	mu      sync.Mutex
	nc      net.Conn // nil: none idle (being dialled, in use, or lost)
	br      *bufio.Reader
	dialing bool
	closed  bool
	dials   sync.WaitGroup
}

// prime dials in the background unless a connection is idle, in use or
// being dialled.
func (l *killLine) prime() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.dialing || l.nc != nil || l.dial == nil {
		return
	}
	l.dialing = true
	l.dials.Add(1)
	go func() {
		defer l.dials.Done()
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		nc, err := l.dial(ctx)
		cancel()
		l.mu.Lock()
		l.dialing = false
		l.mu.Unlock()
		if err == nil {
			l.put(nc, bufio.NewReaderSize(nc, 512))
		}
	}()
}

// take returns the idle connection, or nil.
func (l *killLine) take() (net.Conn, *bufio.Reader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nc, br := l.nc, l.br
	l.nc, l.br = nil, nil
	return nc, br
}

// put keeps nc as the idle connection, or closes it if there is one.
func (l *killLine) put(nc net.Conn, br *bufio.Reader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.nc != nil {
		nc.Close()
		return
	}
	l.nc, l.br = nc, br
}

// close closes the idle connection and waits for a dial in progress.
func (l *killLine) close() {
	l.mu.Lock()
	l.closed = true
	if l.nc != nil {
		l.nc.Close()
		l.nc, l.br = nil, nil
	}
	l.mu.Unlock()
	l.dials.Wait()
}

// dialKill dials the backend and authenticates, as the URL says. It sends
// nothing else (SELECT is refused while a script runs; SCRIPT KILL needs
// no database).
func (n *RedisNode) dialKill(ctx context.Context) (net.Conn, error) {
	o := n.opts
	if o == nil {
		o = n.c.Options()
	}
	nc, err := o.Dialer(ctx, o.Network, o.Addr)
	if err != nil {
		return nil, err
	}
	auth := authCommand(o)
	if auth == nil {
		return nc, nil
	}
	_, err = killRoundTrip(ctx, nc, bufio.NewReaderSize(nc, 512), resp.AppendCommand(nil, auth...))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("script kill connection: %w", err)
	}
	return nc, nil
}

// killRoundTrip writes cmd and reads its reply within ctx; an error
// reply is returned as the error (a RedisError).
func killRoundTrip(ctx context.Context, nc net.Conn, br *bufio.Reader, cmd []byte) (any, error) {
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer func() {
		if stop() {
			_ = nc.SetDeadline(time.Time{})
		}
	}()
	if _, err := nc.Write(cmd); err != nil {
		return nil, err
	}
	return readReply(br)
}
