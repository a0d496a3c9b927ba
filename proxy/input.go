package proxy

import (
	"errors"
	"io"
	"syscall"

	"github.com/tidwall/redcon"
)

// A connection's commands are read by a commandReader: the socket's bytes
// go straight into the guard's buffer (frameScanner.space), are checked
// there, and each complete command is handed on as its arguments, which
// point into that buffer: a multibulk frame's as the scanner located them,
// an inline line's as redcon parses it. Nothing is copied unless a command
// outlives the read (conn.dispatch copies what it hands to a worker).
//
// A plain socket is read from inside one RawConn.Read for as long as the
// client keeps it busy: after a read that did not fill the buffer the
// socket is known to be empty, so the reader waits for the poller at once
// instead of reading again to be told so (EAGAIN). Go's own Read must try
// that read, because each call clears the readiness the poller recorded;
// within one RawConn.Read nothing clears it, and data that arrives after
// the short read marks the socket ready again. That saves one system call
// per command on a request/response connection. A TLS connection is read
// with its own Read, a call per read.

// reasonUnbalancedQuotes is redcon's reason for an inline line it cannot
// split, answered as Redis words it.
const reasonUnbalancedQuotes = "unbalanced quotes in request"

// commandReader reads one connection's commands through its guard.
type commandReader struct {
	g    *guardConn
	raw  syscall.RawConn // the socket's, nil: read through g.Conn.Read (TLS)
	args [][]byte        // reused for each multibulk command's arguments
	// recheck: a command that may block was read (LOCK … WAIT, BLPOP):
	// after a short read the socket is read once more before the reader
	// waits. A close that came with the commands (send, then close) was
	// signalled with them, and no new readiness comes for it: without the
	// read, the close went unseen until the blocking command ended, and
	// the commands queued behind it were granted to a client that had
	// left (TestPipelineCloseGivesBack, one run in three to eight).
	recheck bool
}

func newCommandReader(g *guardConn) *commandReader {
	r := &commandReader{g: g}
	if sc, ok := g.Conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw = raw
		}
	}
	return r
}

// run reads commands and hands each to fn, with last true for the last
// complete command read so far, until fn returns false (run returns nil),
// the socket fails or reaches its read deadline (that error), or the client
// sends a bad frame (a *ProtocolError, after fn had the commands before
// it). beforeWait runs before every wait for the client. The arguments fn
// gets are valid until fn returns.
func (r *commandReader) run(fn func(args [][]byte, last bool) bool, beforeWait func()) error {
	sc := r.g.sc
	var stop bool
	var rerr error
	// read is one read and what it completed: false when run must return.
	read := func(n int, err error) (more bool) {
		if n > 0 {
			sc.scanned(n)
			if !r.deliver(fn) {
				stop = true
				return false
			}
			if sc.err != nil { // after the commands before the bad frame
				rerr = sc.err
				return false
			}
		}
		switch {
		case err != nil:
			rerr = err
			return false
		case n == 0:
			rerr = io.EOF
			return false
		}
		return true
	}
	if r.raw == nil {
		for {
			sc.idle()
			beforeWait()
			p := sc.space()
			if n, err := r.g.Conn.Read(p); !read(n, err) {
				if stop {
					return nil
				}
				return rerr
			}
		}
	}
	for {
		beforeWait()
		err := r.raw.Read(func(fd uintptr) bool {
			for {
				p := sc.space()
				n, err := readFD(fd, p)
				if errors.Is(err, syscall.EAGAIN) {
					sc.idle()
					beforeWait()
					return false // wait for the poller
				}
				if !read(n, err) {
					return true
				}
				if n < len(p) && r.recheck {
					r.recheck = false
					continue // EAGAIN, or the close
				}
				if n < len(p) { // the socket is empty now
					sc.idle()
					beforeWait()
					return false
				}
			}
		})
		switch {
		case stop:
			return nil
		case rerr != nil:
			return rerr
		case err != nil:
			return err
		}
	}
}

// readFD is one read(2), retried when a signal interrupted it.
func readFD(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if n < 0 {
			n = 0
		}
		return n, err
	}
}

// deliver hands every complete command to fn; false when fn did.
func (r *commandReader) deliver(fn func(args [][]byte, last bool) bool) bool {
	sc := r.g.sc
	for {
		raw, args, ok := sc.next(r.args)
		if !ok {
			return true
		}
		if args != nil {
			r.args = args
		} else {
			cmd, err := redcon.Parse(raw)
			if err != nil {
				// The only error redcon finds in a line the guard passed;
				// the commands after it are not run.
				sc.fail(&ProtocolError{Reason: reasonUnbalancedQuotes})
				return true
			}
			args = cmd.Args
		}
		if !fn(args, len(sc.frames) == 0) {
			return false
		}
	}
}
