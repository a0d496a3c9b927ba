package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Config is what the server needs to know about its listener and clients.
type Config struct {
	Listen        string
	MaxClients    int
	IdleTimeout   time.Duration // 0: never close idle clients
	WriteTimeout  time.Duration // a write to a client stuck this long fails (at most ×3/2: lazyDeadline)
	ProtectedMode bool          // with no password, serve loopback clients only
	RequirePass   bool          // whether a password (requirepass or a user) is configured
	MaxPipeline   int           // commands in flight per connection (conn.go); 0: 1024
	Limits        Limits

	// TLS, when set, makes the listener serve TLS only (see tlsListener);
	// ClientAuth in it decides whether clients need a certificate.
	// Protected mode ignores client certificates: it only asks whether a
	// password is set.
	TLS *tls.Config
}

const (
	errMaxClients = "ERR max number of clients reached"
	errProtected  = "DENIED redlock-proxy is running in protected mode because no password is set: only loopback clients are served. Set requirepass, or protected_mode = false."
	maxKeptBuffer = 64 << 10
)

// Server serves RESP clients on one listener: an accept loop, and one
// goroutine per connection that reads its commands and runs them (conn.go).
type Server struct {
	cfg  Config
	disp *commands.Dispatcher
	log  hclog.Logger

	ln     net.Listener
	ctx    context.Context // cancelled when a shutdown runs out of time
	cancel context.CancelFunc

	closing   atomic.Bool
	inflight  redlock.Tracker // commands being served
	work      *workers        // goroutines of pipelined commands
	conns     redlock.Tracker // connection goroutines
	count     atomic.Int64    // connected clients
	maxConns  atomic.Int64    // cfg.MaxClients, changed by SetMaxClients
	mu        sync.Mutex
	open      map[net.Conn]struct{} // to close at shutdown
	serveDone chan struct{}
	closeOnce sync.Once
}

// New builds a server; call Listen (optional) then Serve.
func New(cfg Config, disp *commands.Dispatcher, logger hclog.Logger) *Server {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, disp: disp, log: logger, serveDone: make(chan struct{}), open: map[net.Conn]struct{}{}, work: newWorkers()}
	s.maxConns.Store(int64(cfg.MaxClients))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Listen binds the listening socket, so Addr is known before Serve.
func (s *Server) Listen() error {
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return err
	}
	if s.cfg.TLS != nil {
		// The guard reads plaintext: TLS goes between it and the socket.
		ln = newTLSListener(ln, s.cfg.TLS, handshakeTimeout, s.log)
	}
	s.ln = newGuardListener(ln, s.cfg.Limits, s.cfg.WriteTimeout)
	return nil
}

// Addr is the bound address; nil before Listen.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve accepts clients until Shutdown. It returns nil after a shutdown.
func (s *Server) Serve() error {
	defer close(s.serveDone)
	if err := s.Listen(); err != nil {
		return err
	}
	s.log.Info("listening", "addr", s.ln.Addr().String(), "tls", s.cfg.TLS != nil)
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			s.log.Warn("accept failed", "error", err)
			time.Sleep(10 * time.Millisecond) // a full file table: let it drain
			continue
		}
		s.conns.Go(func() { s.serveConn(nc) })
	}
}

// Shutdown stops accepting clients, lets commands in flight finish, then
// closes every connection. It returns ctx.Err() when the commands did not
// finish in time (they are then cancelled). It is safe to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	if s.ln != nil {
		s.closeOnce.Do(func() {
			if err := s.ln.Close(); err != nil {
				s.log.Debug("closing listener", "error", err)
			}
		})
	}
	err := s.inflight.Wait(ctx)
	s.cancel()
	s.work.close()
	s.mu.Lock()
	for nc := range s.open {
		if g, ok := nc.(*guardConn); ok {
			g.hangUp() // its goroutine closes it (Close would wait for its reader)
		} else {
			_ = nc.Close()
		}
	}
	s.mu.Unlock()
	if s.ln == nil {
		return err
	}
	if werr := s.conns.Wait(ctx); err == nil {
		err = werr
	}
	if werr := s.work.running.Wait(ctx); err == nil {
		err = werr
	}
	select {
	case <-s.serveDone:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return err
}

// SetMaxClients changes the client limit for connections accepted from
// now on; clients beyond a lowered limit stay connected.
func (s *Server) SetMaxClients(n int) { s.maxConns.Store(int64(n)) }

// serveConn admits one connection (protected mode, max_clients), serves
// it, and forgets it.
func (s *Server) serveConn(nc net.Conn) {
	defer nc.Close()
	remote := nc.RemoteAddr().String()
	if s.cfg.ProtectedMode && !s.cfg.RequirePass && !isLoopback(remote) {
		s.log.Warn("refused client in protected mode", "remote-addr", remote)
		_, _ = nc.Write([]byte("-" + errProtected + "\r\n"))
		return
	}
	if n, limit := s.count.Add(1), s.maxConns.Load(); limit > 0 && n > limit {
		s.count.Add(-1)
		s.log.Warn("refused client: max clients reached", "remote-addr", remote, "max-clients", limit)
		_, _ = nc.Write([]byte("-" + errMaxClients + "\r\n"))
		return
	}
	defer s.count.Add(-1)
	if !s.track(nc) {
		return
	}
	defer s.untrack(nc)

	client := s.disp.NewClient(remote, nc.LocalAddr().String())
	c := newConn(s, nc, client)
	c.g.SetAuthenticated(client.Authenticated())
	client.SetHooks(commands.Hooks{Push: c.pushOutOfBand})
	c.serve()
	defer c.stopPushes()
	// The client left (or QUIT, or a bad frame): its waits give up, its
	// SESSION locks are released, a grant it can no longer read is given
	// back; then what is still queued is written, as far as it goes.
	s.disp.CloseClient(client)
	c.drain()
	if perr := c.g.ProtocolErr(); perr != nil {
		s.log.Debug("client sent bad input", "client-id", client.ID, "error", perr)
	}
}

// track records an open connection for Shutdown; false when shutting down.
func (s *Server) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.open[nc] = struct{}{}
	return true
}

func (s *Server) untrack(nc net.Conn) {
	s.mu.Lock()
	delete(s.open, nc)
	s.mu.Unlock()
}

// run executes one command; a panic is logged with its stack and answered
// with an error, and the connection lives on.
func (s *Server) run(client *commands.Client, p commands.Plan, args [][]byte) (reply commands.Reply) {
	defer func() {
		if r := recover(); r != nil {
			name := ""
			if len(args) > 0 {
				name = string(args[0][:min(len(args[0]), 32)])
			}
			s.log.Error("command panicked", "client-id", client.ID, "command", name,
				"panic", r, "stack", string(debug.Stack()))
			reply = commands.Error("ERR internal error")
		}
	}()
	return s.disp.DoPlanned(s.ctx, client, p, args)
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
