package relay

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// A session is one long-lived connection to one backend in one role
// (subscriber, key tracking, broadcast tracking), kept up by one goroutine
// that the Relay owns: it dials (with back-off while the backend is
// away), lets the role set the connection up, then serves it until it
// breaks, the role's reconcile fails, or it stops answering, and starts
// over. A connection that reads nothing for pingEvery gets a PING; one
// that reads nothing for stallAfter is closed as stalled, so a backend
// that is stopped (SIGSTOP) or cut off is given up within seconds, and a
// copy it sends late never arrives.

// Session timing.
const (
	pingEvery  = time.Second
	stallAfter = 3 * time.Second
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// role is what a session's connection is for.
type role interface {
	// setup is sent after HELLO 3 on every new connection; each command
	// must succeed.
	setup() [][]any
	// up is called with a new connection, its reader running; it sends
	// what the role wants of the backend (subscriptions again).
	up(c *bconn) error
	// frame is called by the reader with every push, and with every
	// reply that no caller awaited.
	frame(v any)
	// reconcile is called after a kick: bring the backend in line with
	// what the role wants now.
	reconcile(c *bconn) error
	// down is called when the connection ended or a dial failed.
	down()
}

type session struct {
	b    Backend
	i    int // the backend's index
	role role
	kick chan struct{} // buffered: a pending reconcile
	log  hclog.Logger
	up   atomic.Bool
}

func newSession(b Backend, i int, r role, log hclog.Logger) *session {
	return &session{b: b, i: i, role: r, kick: make(chan struct{}, 1), log: log.With("backend", b.Addr())}
}

// poke asks the session to reconcile; it never blocks.
func (s *session) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run keeps the connection up until ctx ends.
func (s *session) run(ctx context.Context) {
	backoff := minBackoff
	failing := false
	for ctx.Err() == nil {
		c, err := dial(ctx, s.b, s.role.frame, s.role.setup()...)
		if err != nil {
			s.role.down()
			if ctx.Err() != nil {
				return
			}
			var se *SetupError
			switch {
			case errors.As(err, &se) && !failing:
				s.log.Warn("relay connection refused by backend", "error", err)
			case !failing:
				s.log.Warn("relay connection failed", "error", err)
			default:
				s.log.Trace("relay connection failed", "error", err)
			}
			failing = true
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		if failing {
			s.log.Info("relay connection up again")
		}
		failing, backoff = false, minBackoff
		err = s.serve(ctx, c)
		s.up.Store(false)
		s.role.down()
		if ctx.Err() == nil {
			s.log.Warn("relay connection lost", "error", err)
			failing = true
		}
	}
}

// serve runs one connection until it ends. Its reader (the engine's) hands
// the frames no write awaits to the role (dial).
func (s *session) serve(ctx context.Context, c *bconn) error {
	stop := func(err error) error {
		c.close()
		<-c.Done() // the reader has stopped: no frame after down
		return err
	}
	s.up.Store(true)
	if err := s.role.up(c); err != nil {
		return stop(err)
	}
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return stop(ctx.Err())
		case <-c.Done():
			return c.Err()
		case <-s.kick:
			if err := s.role.reconcile(c); err != nil {
				return stop(err)
			}
		case now := <-tick.C:
			idle := now.Sub(c.LastRead())
			if idle >= stallAfter {
				return stop(errStalled)
			}
			if idle >= pingEvery {
				if err := c.send(resp.AppendCommand(nil, "PING"), 1); err != nil {
					return stop(err)
				}
			}
		}
	}
}

var errStalled = errors.New("backend stopped answering")

// isPong reports the PING reply of a RESP2-style subscribed connection
// (["pong", ""]), which some servers send as a push.
func isPong(p Push) bool {
	if len(p) != 2 {
		return false
	}
	s, _ := str(p[0])
	return s == "pong"
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
