package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Config is what the server needs to know about its listener and clients.
type Config struct {
	Listen        string
	MaxClients    int
	IdleTimeout   time.Duration // 0: never close idle clients
	WriteTimeout  time.Duration // deadline for each write to a client
	ProtectedMode bool          // with no password, serve loopback clients only
	RequirePass   bool          // whether a password (requirepass or a user) is configured
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

// Server serves RESP clients on one listener with redcon.
type Server struct {
	cfg  Config
	disp *commands.Dispatcher
	log  hclog.Logger

	srv    *redcon.Server
	ln     net.Listener
	ctx    context.Context // cancelled when a shutdown runs out of time
	cancel context.CancelFunc

	closing   atomic.Bool
	inflight  redlock.Tracker // commands being served
	conns     atomic.Int64
	maxConns  atomic.Int64 // cfg.MaxClients, changed by SetMaxClients
	serveDone chan struct{}
	closeOnce sync.Once
}

// session is the per-connection state redcon carries for us.
type session struct {
	client *commands.Client
	guard  *guardConn
	buf    []byte
}

// New builds a server; call Listen (optional) then Serve.
func New(cfg Config, disp *commands.Dispatcher, logger hclog.Logger) *Server {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, disp: disp, log: logger, serveDone: make(chan struct{})}
	s.maxConns.Store(int64(cfg.MaxClients))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = redcon.NewServer(cfg.Listen, s.serveCommand, s.accept, s.closed)
	s.srv.SetIdleClose(cfg.IdleTimeout)
	s.srv.AcceptError = func(err error) { s.log.Warn("accept failed", "error", err) }
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
	return s.srv.Serve(s.ln)
}

// Shutdown stops accepting clients, lets commands in flight finish, then
// closes every connection. It returns ctx.Err() when the commands did not
// finish in time (they are then cancelled). It is safe to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	err := s.inflight.Wait(ctx)
	s.cancel()
	if s.ln == nil {
		return err
	}
	s.closeOnce.Do(func() {
		if cerr := s.srv.Close(); cerr != nil {
			s.log.Debug("closing listener", "error", cerr)
		}
	})
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

func (s *Server) accept(conn redcon.Conn) bool {
	if s.closing.Load() {
		return false
	}
	if s.cfg.ProtectedMode && !s.cfg.RequirePass && !isLoopback(conn.RemoteAddr()) {
		s.log.Warn("refused client in protected mode", "remote-addr", conn.RemoteAddr())
		conn.WriteError(errProtected)
		return false
	}
	if n, limit := s.conns.Add(1), s.maxConns.Load(); limit > 0 && n > limit {
		s.conns.Add(-1)
		s.log.Warn("refused client: max clients reached", "remote-addr", conn.RemoteAddr(), "max-clients", limit)
		conn.WriteError(errMaxClients)
		return false
	}
	nc := conn.NetConn()
	g, _ := nc.(*guardConn)
	c := s.disp.NewClient(conn.RemoteAddr(), nc.LocalAddr().String())
	if g != nil {
		g.SetAuthenticated(c.Authenticated())
	}
	sess := &session{client: c, guard: g}
	if g != nil {
		c.SetHooks(commands.Hooks{Push: sess.push, WatchClose: g.watchClose})
	}
	conn.SetContext(sess)
	return true
}

// push writes an out-of-band RESP3 message (a lock-lost notice) from any
// goroutine. guardConn.Write is atomic, and redcon writes each batch of
// replies with one Write, so the push lands between replies, never inside
// one.
func (s *session) push(r commands.Reply) bool {
	_, err := s.guard.Write(commands.AppendReply(nil, r, 3))
	return err == nil
}

// closed runs under redcon's server lock: keep it O(1). CloseClient only
// wakes the client's waits and starts releasing its SESSION locks in the
// background.
func (s *Server) closed(conn redcon.Conn, err error) {
	sess, ok := conn.Context().(*session)
	if !ok {
		return
	}
	s.conns.Add(-1)
	s.disp.CloseClient(sess.client)
	if sess.guard != nil {
		if perr := sess.guard.ProtocolErr(); perr != nil {
			s.log.Debug("client sent bad input", "client-id", sess.client.ID, "error", perr)
		}
	}
}

func (s *Server) serveCommand(conn redcon.Conn, cmd redcon.Command) {
	sess, ok := conn.Context().(*session)
	if !ok {
		conn.Close()
		return
	}
	s.inflight.Add()
	defer s.inflight.Done()
	if s.closing.Load() {
		conn.WriteError("ERR server is shutting down")
		conn.Close()
		return
	}
	reply := s.run(sess, cmd.Args)
	sess.buf = commands.AppendReply(sess.buf[:0], reply, sess.client.Proto())
	conn.WriteRaw(sess.buf)
	if cap(sess.buf) > maxKeptBuffer {
		sess.buf = nil
	}
	if sess.guard != nil {
		sess.guard.SetAuthenticated(sess.client.Authenticated())
	}
	if sess.client.CloseRequested() {
		conn.Close()
	}
}

// run executes one command; a panic is logged with its stack and answered
// with an error, and the connection lives on.
func (s *Server) run(sess *session, args [][]byte) (reply commands.Reply) {
	defer func() {
		if r := recover(); r != nil {
			name := ""
			if len(args) > 0 {
				name = string(args[0][:min(len(args[0]), 32)])
			}
			s.log.Error("command panicked", "client-id", sess.client.ID, "command", name,
				"panic", r, "stack", string(debug.Stack()))
			reply = commands.Error("ERR internal error")
		}
	}()
	return s.disp.Do(s.ctx, sess.client, args)
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
