package proxy

// The input guard sits between the socket and redcon. redcon's reader trusts
// declared lengths, has no limits, and while a command is incomplete it
// re-scans its buffer from the start and recurses once per Read, so a client
// trickling one large command byte by byte costs O(n²) CPU and a deep stack.
//
// The guard reads the socket itself and hands redcon only whole commands
// (complete frames), after checking them against Limits. Its core,
// frameScanner, is an incremental state machine that examines every input
// byte exactly once, whatever the chunking, and keeps no socket state, so
// tests and the fuzz target drive it directly.

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bounds what a client may send before redcon parses it.
// A zero or negative field takes its default (see defaultLimits).
type Limits struct {
	MaxArgs        int // multibulk count, authenticated
	MaxBulkBytes   int // one bulk argument, authenticated
	MaxInlineBytes int // one inline (telnet-style) line, authenticated
}

// Before authentication stricter fixed limits apply (like Redis). They never
// exceed the authenticated ones.
const (
	preAuthMaxArgs   = 16
	preAuthMaxBulk   = 16 << 10
	preAuthMaxInline = 16 << 10
)

// defaultLimits fills the zero fields of a Limits. The proxy's commands are
// small (keys, tokens, short scripts), so the defaults are far below Redis's
// 512 MiB bulk limit; the inline limit is Redis's.
var defaultLimits = Limits{
	MaxArgs:        1024,
	MaxBulkBytes:   1 << 20,
	MaxInlineBytes: 64 << 10,
}

const (
	// commandSlack is added to 4×MaxBulkBytes to form the cap on the
	// total bytes of one multibulk command (headers included). MaxArgs ×
	// MaxBulkBytes alone would let one command hold gigabytes; no command
	// of the proxy needs more than a few large arguments, and the slack
	// leaves room for many small ones.
	commandSlack = 64 << 10

	// errorWriteTimeout bounds the write of the final -ERR reply.
	errorWriteTimeout = time.Second

	// initialBufSize is the size of a connection's buffer, taken from a
	// pool while it holds bytes; keepBufSize is the largest grown buffer
	// a connection keeps once it has drained.
	initialBufSize = 4 << 10
	keepBufSize    = 8 << 10
)

// Reasons of a ProtocolError, worded as Redis words them.
const (
	reasonMultibulkLen       = "invalid multibulk length"
	reasonBulkLen            = "invalid bulk length"
	reasonInlineTooBig       = "too big inline request"
	reasonUnauthMultibulkLen = "unauthenticated multibulk length"
	reasonUnauthBulkLen      = "unauthenticated bulk length"
	reasonCommandTooBig      = "too big command"
)

// ProtocolError is a violation of the wire protocol or of the Limits. Its
// text is a single line, safe to send to the client after "-ERR ".
type ProtocolError struct {
	Reason string
}

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Reason }

// unexpectedByte is the error for a byte other than '$' where a bulk header
// must start. Non-printable bytes are shown as \xNN so that the reply stays
// on one line.
func unexpectedByte(c byte) *ProtocolError {
	shown := string(rune(c))
	if c < 0x20 || c >= 0x7f {
		shown = fmt.Sprintf(`\x%02x`, c)
	}
	return &ProtocolError{Reason: "expected '$', got '" + shown + "'"}
}

// limitSet is one set of limits in force for a frame.
type limitSet struct {
	args, bulk, inline, command int
}

// scanLimits derives the authenticated and pre-authentication limit sets.
func scanLimits(lim Limits) (auth, pre limitSet) {
	if lim.MaxArgs <= 0 {
		lim.MaxArgs = defaultLimits.MaxArgs
	}
	if lim.MaxBulkBytes <= 0 {
		lim.MaxBulkBytes = defaultLimits.MaxBulkBytes
	}
	if lim.MaxInlineBytes <= 0 {
		lim.MaxInlineBytes = defaultLimits.MaxInlineBytes
	}
	auth = limitSet{
		args:    lim.MaxArgs,
		bulk:    lim.MaxBulkBytes,
		inline:  lim.MaxInlineBytes,
		command: commandCap(lim.MaxBulkBytes),
	}
	pre = limitSet{
		args:    min(preAuthMaxArgs, auth.args),
		bulk:    min(preAuthMaxBulk, auth.bulk),
		inline:  min(preAuthMaxInline, auth.inline),
		command: min(commandCap(preAuthMaxBulk), auth.command),
	}
	return auth, pre
}

// commandCap is 4×maxBulk + commandSlack, saturating instead of overflowing.
func commandCap(maxBulk int) int {
	if maxBulk > (math.MaxInt-commandSlack)/4 {
		return math.MaxInt
	}
	return 4*maxBulk + commandSlack
}

type scanState uint8

const (
	stFrame     scanState = iota // at the first byte of a frame
	stInline                     // inside an inline line, up to '\n'
	stCount                      // inside "*<count>\r\n", after the '*'
	stBulkStart                  // expecting the '$' of a bulk header
	stBulkLen                    // inside "$<len>\r\n", after the '$'
	stBulkData                   // inside a bulk's payload
	stBulkCR                     // expecting the '\r' after a payload
	stBulkLF                     // expecting the '\n' after a payload
)

// frameScanner splits a byte stream into frames (whole commands) and checks
// them. It keeps the kept bytes in buf: buf[off:ready] are complete frames
// not yet taken, buf[ready:] is the frame in progress. Frames redcon would
// ignore (a multibulk count <= 0, an inline line of only spaces) are
// swallowed: dropped from buf, never released.
//
// A frame's header fixes its limits: the authenticated flag is read when a
// count or bulk header (or an inline line's first byte) is checked. So
// commands pipelined after AUTH in the same packet can still meet the
// pre-authentication limits, as the scan runs before AUTH executes.
type frameScanner struct {
	authed    *atomic.Bool
	auth, pre limitSet

	buf        []byte
	off, ready int
	err        *ProtocolError

	state scanState
	// number being parsed in a count or bulk header
	num    int64
	digits int
	neg    bool
	cr     bool
	// multibulk progress
	args   int64 // bulks still expected
	remain int   // payload bytes still expected
	// inline progress
	inlineMax int // inline limit chosen at the line's first byte
	lineLen   int // bytes before '\n' so far ('\r' included)
	nonBlank  int // bytes other than ' ' so far
	lastCR    bool

	// counters for tests: bytes consumed by the state machine, and bytes
	// moved when compacting the buffer.
	examined, moved int
}

func newFrameScanner(authed *atomic.Bool, auth, pre limitSet) *frameScanner {
	return &frameScanner{authed: authed, auth: auth, pre: pre}
}

// scan consumes data (appended to any held partial frame) and returns how
// many bytes at the front of the scanner's buffer (see pending) form
// complete frames that may be released. After a violation it returns the
// complete frames that preceded it together with a *ProtocolError, and
// every later call returns the same error without consuming anything.
func (s *frameScanner) scan(data []byte) (int, error) {
	if s.err != nil {
		return s.ready - s.off, s.err
	}
	s.compact()
	for len(data) > 0 {
		n, err := s.step(data)
		s.examined += n
		data = data[n:]
		if err != nil {
			s.err = err
			s.buf = s.buf[:s.ready] // drop the bad frame
			return s.ready - s.off, err
		}
	}
	return s.ready - s.off, nil
}

// take copies released bytes into p and drops them from the buffer.
func (s *frameScanner) take(p []byte) int {
	n := copy(p, s.buf[s.off:s.ready])
	s.off += n
	if s.off == len(s.buf) {
		s.reset()
	}
	return n
}

// scanBufs holds drained buffers of initialBufSize, so that an idle
// connection holds none.
var scanBufs = sync.Pool{New: func() any { return new([initialBufSize]byte) }}

// reset empties the buffer. One of the first size goes back to the pool;
// one that a pipelining client made grow is kept up to keepBufSize, and
// dropped beyond (a large command made it grow).
func (s *frameScanner) reset() {
	switch c := cap(s.buf); {
	case c == initialBufSize:
		scanBufs.Put((*[initialBufSize]byte)(s.buf[:initialBufSize]))
		s.buf = nil
	case c <= keepBufSize:
		s.buf = s.buf[:0]
	default:
		s.buf = nil
	}
	s.off, s.ready = 0, 0
}

// compact moves the held bytes to the front of the buffer. Between two
// compactions at least one frame is taken, and what is moved arrived in the
// same scan as that frame's end, so the moves total at most the input.
func (s *frameScanner) compact() {
	if s.off == 0 {
		return
	}
	if s.off == len(s.buf) {
		s.reset()
		return
	}
	n := copy(s.buf, s.buf[s.off:])
	s.moved += n
	s.buf = s.buf[:n]
	s.ready -= s.off
	s.off = 0
}

func (s *frameScanner) keep(b []byte) {
	if s.buf == nil {
		if len(b) <= initialBufSize {
			s.buf = scanBufs.Get().(*[initialBufSize]byte)[:0]
		} else {
			s.buf = make([]byte, 0, len(b))
		}
	}
	s.buf = append(s.buf, b...)
}

// frameDone marks the frame in progress complete.
func (s *frameScanner) frameDone() {
	s.ready = len(s.buf)
	s.state = stFrame
}

// frameSwallow drops the frame in progress.
func (s *frameScanner) frameSwallow() {
	s.buf = s.buf[:s.ready]
	s.state = stFrame
}

// isAuthed reads the connection's authenticated flag.
func (s *frameScanner) isAuthed() bool { return s.authed != nil && s.authed.Load() }

// limits returns the limit set in force for the given state.
func (s *frameScanner) limits(authed bool) *limitSet {
	if authed {
		return &s.auth
	}
	return &s.pre
}

// step consumes a prefix of data (possibly empty, when only the state
// changes) and returns its length.
func (s *frameScanner) step(data []byte) (int, *ProtocolError) {
	switch s.state {
	case stFrame:
		if data[0] == '*' {
			s.keep(data[:1])
			s.startNumber()
			s.state = stCount
			return 1, nil
		}
		s.inlineMax = s.limits(s.isAuthed()).inline
		s.lineLen, s.nonBlank, s.lastCR = 0, 0, false
		s.state = stInline
		return 0, nil

	case stInline:
		return s.stepInline(data)

	case stCount, stBulkLen:
		for i, c := range data {
			done, ok := s.numberByte(c, s.state == stCount)
			if !ok {
				if s.state == stCount {
					return i + 1, &ProtocolError{Reason: reasonMultibulkLen}
				}
				return i + 1, &ProtocolError{Reason: reasonBulkLen}
			}
			if done {
				s.keep(data[:i+1])
				if s.state == stCount {
					return i + 1, s.countDone()
				}
				return i + 1, s.bulkLenDone()
			}
		}
		s.keep(data)
		return len(data), nil

	case stBulkStart:
		if data[0] != '$' {
			return 1, unexpectedByte(data[0])
		}
		s.keep(data[:1])
		s.startNumber()
		s.state = stBulkLen
		return 1, nil

	case stBulkData:
		n := min(s.remain, len(data))
		s.keep(data[:n])
		s.remain -= n
		if s.remain == 0 {
			s.state = stBulkCR
		}
		return n, nil

	case stBulkCR:
		if data[0] != '\r' {
			return 1, &ProtocolError{Reason: reasonBulkLen}
		}
		s.keep(data[:1])
		s.state = stBulkLF
		return 1, nil

	default: // stBulkLF
		if data[0] != '\n' {
			return 1, &ProtocolError{Reason: reasonBulkLen}
		}
		s.keep(data[:1])
		s.args--
		if s.args == 0 {
			s.frameDone()
		} else {
			s.state = stBulkStart
		}
		return 1, nil
	}
}

// stepInline consumes an inline line up to and including its '\n'. The
// limit applies to the line without its "\n" or "\r\n".
func (s *frameScanner) stepInline(data []byte) (int, *ProtocolError) {
	line := data
	end := bytes.IndexByte(data, '\n')
	if end >= 0 {
		line = data[:end]
	}
	if len(line) > 0 {
		s.nonBlank += len(line) - bytes.Count(line, []byte{' '})
		s.lastCR = line[len(line)-1] == '\r'
		s.lineLen += len(line)
	}
	// One byte beyond the limit may be the '\r' of "\r\n".
	if s.lineLen > s.inlineMax+1 || (end >= 0 && s.lineLen > s.inlineMax && !s.lastCR) {
		return len(line), &ProtocolError{Reason: reasonInlineTooBig}
	}
	if end < 0 {
		s.keep(data)
		return len(data), nil
	}
	s.keep(data[:end+1])
	// redcon splits inline lines on spaces only; a line of spaces (and a
	// final '\r') yields no command, so redcon would read again for
	// nothing: drop it here.
	if s.nonBlank == 0 || (s.nonBlank == 1 && s.lastCR) {
		s.frameSwallow()
	} else {
		s.frameDone()
	}
	return end + 1, nil
}

func (s *frameScanner) startNumber() {
	s.num, s.digits, s.neg, s.cr = 0, 0, false, false
}

// numberByte feeds one byte of "<digits>\r\n" to the number parser: digits
// only, no leading zeros, an optional leading '-' when signed, no overflow.
// A valid header is at most 23 bytes, well under Redis's 32-byte bound.
func (s *frameScanner) numberByte(c byte, signed bool) (done, ok bool) {
	switch {
	case s.cr:
		return c == '\n', c == '\n'
	case c == '\r':
		s.cr = true
		return false, s.digits > 0
	case c == '-':
		ok = signed && !s.neg && s.digits == 0
		s.neg = true
		return false, ok
	case c >= '0' && c <= '9':
		if s.digits > 0 && s.num == 0 || s.neg && s.digits == 0 && c == '0' {
			return false, false // leading zero, or "-0"
		}
		d := int64(c - '0')
		if s.num > (math.MaxInt64-d)/10 {
			return false, false
		}
		s.num = s.num*10 + d
		s.digits++
		return false, true
	default:
		return false, false
	}
}

// countDone checks a complete "*<count>\r\n". A value beyond the
// authenticated limit is invalid whatever the state (as Redis does for bulk
// lengths); one within it but beyond the pre-authentication limit is
// refused as unauthenticated.
func (s *frameScanner) countDone() *ProtocolError {
	if s.neg || s.num == 0 {
		s.frameSwallow() // Redis ignores "*0" and "*-1"
		return nil
	}
	if s.num > int64(s.auth.args) {
		return &ProtocolError{Reason: reasonMultibulkLen}
	}
	if !s.isAuthed() && s.num > int64(s.pre.args) {
		return &ProtocolError{Reason: reasonUnauthMultibulkLen}
	}
	s.args = s.num
	s.state = stBulkStart
	return nil
}

// bulkLenDone checks a complete "$<len>\r\n" and the command's total size.
func (s *frameScanner) bulkLenDone() *ProtocolError {
	authed := s.isAuthed()
	if s.num > int64(s.auth.bulk) {
		return &ProtocolError{Reason: reasonBulkLen}
	}
	if !authed && s.num > int64(s.pre.bulk) {
		return &ProtocolError{Reason: reasonUnauthBulkLen}
	}
	// Written as a difference, so that huge configured limits cannot
	// overflow it; the frame so far is never far above the cap.
	if int(s.num) > s.limits(authed).command-(len(s.buf)-s.ready)-2 {
		return &ProtocolError{Reason: reasonCommandTooBig}
	}
	s.remain = int(s.num)
	s.state = stBulkData
	if s.remain == 0 {
		s.state = stBulkCR
	}
	return nil
}

// newGuardListener wraps ln: Accept returns *guardConn values. Wrap the
// listener that yields plaintext (for TLS, the tls.Listener).
func newGuardListener(ln net.Listener, lim Limits, writeTimeout time.Duration) net.Listener {
	auth, pre := scanLimits(lim)
	return &guardListener{Listener: ln, auth: auth, pre: pre, writeTimeout: writeTimeout}
}

type guardListener struct {
	net.Listener
	auth, pre    limitSet
	writeTimeout time.Duration
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newGuardConn(c, l.auth, l.pre, l.writeTimeout), nil
}

// guardConn is an accepted connection whose Read yields only whole,
// checked commands. Deadlines and Close pass through to the embedded conn.
type guardConn struct {
	net.Conn
	wdl     *lazyDeadline // write deadline; nil without a write timeout
	authed  atomic.Bool
	sc      *frameScanner
	perr    atomic.Pointer[ProtocolError]
	replied bool // the -ERR reply has been written
	wmu     sync.Mutex
	// beforeError, when set, runs before the -ERR reply is written: the
	// connection's replies to the commands before the bad frame go first
	// (set by the owner before the first Read).
	beforeError func()
}

func newGuardConn(c net.Conn, auth, pre limitSet, writeTimeout time.Duration) *guardConn {
	g := &guardConn{Conn: c}
	if writeTimeout > 0 {
		g.wdl = newLazyDeadline(writeTimeout)
	}
	g.sc = newFrameScanner(&g.authed, auth, pre)
	return g
}

// SetAuthenticated switches between the pre-authentication and the
// configured limits. The session calls it after AUTH, HELLO AUTH and RESET;
// it starts false.
func (g *guardConn) SetAuthenticated(v bool) { g.authed.Store(v) }

// ProtocolErr returns the protocol error that ended the connection, or nil.
func (g *guardConn) ProtocolErr() error {
	if e := g.perr.Load(); e != nil {
		return e
	}
	return nil
}

// Read returns only bytes that form complete frames. It blocks until at
// least one frame is complete or the socket fails. After a protocol error it
// first returns the complete frames that preceded it; the next call writes
// "-ERR <error>" to the client (after beforeError) and returns io.EOF.
func (g *guardConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if n := g.sc.take(p); n > 0 {
			return n, nil
		}
		if e := g.perr.Load(); e != nil {
			if g.beforeError != nil && !g.replied {
				g.beforeError()
			}
			g.replyError(e)
			return 0, io.EOF
		}
		// p serves as scratch space for the socket read.
		n, err := g.Conn.Read(p)
		if n > 0 {
			g.sc.scan(p[:n])
			if e := g.sc.err; e != nil {
				g.perr.Store(e)
			}
		}
		if err != nil {
			// Frames first: redcon drops data returned with an error.
			// The socket reports the error again on the next call.
			if n := g.sc.take(p); n > 0 {
				return n, nil
			}
			return 0, err
		}
	}
}

func (g *guardConn) replyError(e *ProtocolError) {
	if g.replied {
		return
	}
	g.replied = true
	g.wmu.Lock() // as Write: a push may be writing, and wdl is Write's
	defer g.wmu.Unlock()
	if g.wdl != nil {
		g.wdl.forget()
	}
	_ = g.Conn.SetWriteDeadline(time.Now().Add(errorWriteTimeout))
	_, _ = g.Conn.Write([]byte("-ERR " + e.Error() + "\r\n"))
}

// Write writes p under the write timeout (if positive): a write that
// starts at t fails between t+writeTimeout and t+writeTimeout×3/2, as
// lazyDeadline keeps it (the deadline is not set anew for every reply).
// A whole Write is atomic with respect to other Writes (the connection
// writes whole replies; push messages come from other goroutines), so
// replies and pushes never interleave within a frame.
func (g *guardConn) Write(p []byte) (int, error) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if g.wdl != nil {
		if dl, ok := g.wdl.next(); ok {
			if err := g.Conn.SetWriteDeadline(dl); err != nil {
				return 0, err
			}
			g.wdl.set(dl)
		}
	}
	return g.Conn.Write(p)
}
