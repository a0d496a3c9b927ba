package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

const (
	// handshakeTimeout bounds a client's TLS handshake; a client that
	// connects and says nothing (or speaks plaintext in fragments shorter
	// than a TLS record header) is dropped after it.
	handshakeTimeout = 10 * time.Second

	// maxHandshakes bounds the handshakes in progress. Beyond it the
	// listener stops accepting until one ends; the kernel's backlog
	// holds the rest.
	maxHandshakes = 256

	// errPlaintext answers a client whose first bytes are not TLS, so
	// that redis-cli without --tls reports why rather than "connection
	// reset". It is written in clear text and carries nothing secret.
	// plaintextLinger bounds the wait for a plaintext client to read
	// errPlaintext and hang up.
	plaintextLinger = 250 * time.Millisecond

	errPlaintext = "-ERR this port speaks TLS only: connect with TLS (redis-cli --tls, rediss://)\r\n"
)

// tlsListener accepts TCP connections and completes each TLS handshake on
// its own goroutine, under handshakeTimeout, before Accept returns it. So
// redcon, the guard and the sessions only ever see established TLS
// connections (plaintext underneath the guard), and a client that stalls
// its handshake holds neither redcon's accept loop (which writes refusals,
// max_clients and protected mode, on its own goroutine) nor a client slot.
//
// The accept loop and the handshakes belong to the listener: Close stops
// the loop, aborts the handshakes and waits for them.
type tlsListener struct {
	net.Listener // the TCP listener: Addr; Close is overridden
	config       *tls.Config
	timeout      time.Duration
	log          hclog.Logger

	ready chan net.Conn   // handshaken connections for Accept
	errc  chan error      // accept errors for Accept
	slots chan struct{}   // one per handshake in progress
	ctx   context.Context // cancelled by Close: aborts the handshakes
	stop  context.CancelFunc
	wg    sync.WaitGroup // the accept loop and the handshakes
	once  sync.Once
}

// newTLSListener serves TLS with config on the TCP listener ln.
func newTLSListener(ln net.Listener, config *tls.Config, timeout time.Duration, logger hclog.Logger) *tlsListener {
	l := &tlsListener{
		Listener: ln,
		config:   config,
		timeout:  timeout,
		log:      logger,
		ready:    make(chan net.Conn),
		errc:     make(chan error),
		slots:    make(chan struct{}, maxHandshakes),
	}
	l.ctx, l.stop = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// Accept returns the next connection whose handshake succeeded.
func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.ctx.Done():
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	}
}

// Close stops accepting, aborts the handshakes in progress and waits for
// the listener's goroutines. Connections already returned by Accept stay
// open. It is safe to call twice.
func (l *tlsListener) Close() error {
	var err error
	l.once.Do(func() {
		l.stop()
		err = l.Listener.Close()
		l.wg.Wait()
	})
	return err
}

func (l *tlsListener) acceptLoop() {
	defer l.wg.Done()
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.ctx.Done():
			return
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case l.errc <- err:
			case <-l.ctx.Done():
				return
			}
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

// handshake runs the server side of the TLS handshake on c and hands the
// connection to Accept, or closes it.
func (l *tlsListener) handshake(c net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.slots }()
	tc := tls.Server(c, l.config)
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		l.refuse(c, err)
		return
	}
	select {
	case l.ready <- tc:
	case <-l.ctx.Done():
		_ = tc.Close()
	}
}

// refuse logs a failed handshake and closes the connection. A client that
// spoke plaintext gets errPlaintext first.
func (l *tlsListener) refuse(c net.Conn, err error) {
	defer c.Close()
	remote := c.RemoteAddr().String()
	var rhe tls.RecordHeaderError
	switch {
	case errors.As(err, &rhe) && rhe.Conn != nil:
		l.log.Info("refused plaintext client on the TLS listener", "remote-addr", remote)
		_ = c.SetWriteDeadline(time.Now().Add(errorWriteTimeout))
		if _, werr := io.WriteString(c, errPlaintext); werr == nil {
			// Read what the client sent on, briefly: closing with
			// unread input resets the connection, and the reset may
			// overtake the reply.
			if tcp, ok := c.(*net.TCPConn); ok {
				_ = tcp.CloseWrite()
			}
			_ = c.SetReadDeadline(time.Now().Add(plaintextLinger))
			_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
		}
	case errors.Is(err, io.EOF), l.ctx.Err() != nil:
		// A TCP health check, or a shutdown.
		l.log.Debug("tls handshake ended", "remote-addr", remote, "error", err)
	default:
		l.log.Info("tls handshake failed", "remote-addr", remote, "error", err)
	}
}
