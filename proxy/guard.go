package proxy

// The input guard checks every byte a client sends before any parser acts
// on it. redcon's reader trusts declared lengths, has no limits, and while
// a command is incomplete it re-scans its buffer from the start and
// recurses once per Read, so a client trickling one large command byte by
// byte would cost O(n²) CPU and a deep stack.
//
// The guard's core, frameScanner, is an incremental state machine that
// examines every input byte exactly once, whatever the chunking, checks
// each frame against Limits, and locates a multibulk command's arguments
// as it goes, so that no second parser reads them; an inline (telnet-style)
// line, once whole and within its limit, is split by redcon. It keeps no
// socket state, so tests and the fuzz target drive it directly; the
// commandReader (input.go) reads the socket into it.

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bounds what a client may send.
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
// them. The socket is read straight into its buffer (space, then scanned),
// and each frame is examined in place: buf[head():pos] holds the complete
// frames not yet taken (frames) and the frame in progress, which starts at
// frameAt. A multibulk frame's arguments are located while it is scanned
// (marks), so taking it costs no second parse. Frames Redis ignores (a
// multibulk count <= 0, an inline line of only spaces) are swallowed:
// never released.
//
// A frame's header fixes its limits: the authenticated flag is read when a
// count or bulk header (or an inline line's first byte) is checked. So
// commands pipelined after AUTH in the same packet can still meet the
// pre-authentication limits, as the scan runs before AUTH executes.
type frameScanner struct {
	authed    *atomic.Bool
	auth, pre limitSet

	buf     []byte     // bytes read; buf[:pos] scanned
	pos     int        // end of the scanned bytes
	frameAt int        // first byte of the frame in progress
	frames  []frameRef // complete frames not yet taken, in order
	marks   []int      // payload bounds (from, to) of the bulks of frames and of the frame in progress
	fmark   int        // marks of the frame in progress start here
	err     *ProtocolError

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

// frameRef is one complete frame in buf: its bytes, and for a multibulk
// frame its n arguments' bounds in marks from mark on (mark -1: an inline
// line, which redcon parses).
type frameRef struct {
	from, to int
	mark, n  int
}

func newFrameScanner(authed *atomic.Bool, auth, pre limitSet) *frameScanner {
	return &frameScanner{authed: authed, auth: auth, pre: pre}
}

// space returns where the next socket read goes: the free end of the
// buffer, made room for by moving the kept bytes to the front (only once
// every frame before them was taken: the arguments of a taken frame stay
// valid until then) or by growing it. The frame in progress never exceeds
// the command limit, so neither does the buffer by more than one read.
func (s *frameScanner) space() []byte {
	if s.buf == nil {
		s.buf = scanBufs.Get().(*[initialBufSize]byte)[:0]
	}
	if len(s.buf) == cap(s.buf) {
		s.compact()
	}
	if len(s.buf) == cap(s.buf) {
		s.buf = slices.Grow(s.buf, cap(s.buf))
	}
	return s.buf[len(s.buf):cap(s.buf)]
}

// scanned takes n bytes just read into space and scans them. It returns
// the scanner's error: after a violation the complete frames that preceded
// it can still be taken, and every later call returns the same error
// without consuming anything.
func (s *frameScanner) scanned(n int) error {
	if s.err != nil {
		return s.err
	}
	s.buf = s.buf[:len(s.buf)+n]
	for s.pos < len(s.buf) {
		n, err := s.step(s.buf[s.pos:])
		s.examined += n
		s.pos += n
		if err != nil {
			s.err = err
			return err
		}
	}
	return nil
}

// next takes the first complete frame: its raw bytes and, for a multibulk
// frame, its arguments appended to args[:0] (inline: args nil, raw to be
// parsed). Both point into the buffer and stay valid until the next space.
func (s *frameScanner) next(args [][]byte) (raw []byte, out [][]byte, ok bool) {
	if len(s.frames) == 0 {
		return nil, nil, false
	}
	f := s.frames[0]
	s.frames = s.frames[1:]
	raw = s.buf[f.from:f.to:f.to]
	if f.mark < 0 {
		return raw, nil, true
	}
	out = args[:0]
	for i := f.mark; i < f.mark+2*f.n; i += 2 {
		out = append(out, s.buf[s.marks[i]:s.marks[i+1]:s.marks[i+1]])
	}
	return raw, out, true
}

// fail stops the scanner at a frame found bad after it was scanned: the
// frames after it are dropped.
func (s *frameScanner) fail(e *ProtocolError) {
	s.err = e
	s.frames = s.frames[:0]
}

// head is the first byte the scanner still needs.
func (s *frameScanner) head() int {
	if len(s.frames) > 0 {
		return s.frames[0].from
	}
	return s.frameAt
}

// scanBufs holds drained buffers of initialBufSize, so that an idle
// connection holds none.
var scanBufs = sync.Pool{New: func() any { return new([initialBufSize]byte) }}

// idle gives the buffer up when it holds nothing: called when the
// connection is about to wait for the client, after every frame taken was
// served. One of the first size goes back to the pool; one that a
// pipelining client made grow is kept up to keepBufSize, and dropped
// beyond (a large command made it grow).
func (s *frameScanner) idle() {
	if s.buf == nil || s.head() != len(s.buf) || s.err != nil {
		return
	}
	switch c := cap(s.buf); {
	case c == initialBufSize:
		scanBufs.Put((*[initialBufSize]byte)(s.buf[:initialBufSize]))
		s.buf = nil
	case c <= keepBufSize:
		s.buf = s.buf[:0]
	default:
		s.buf = nil
	}
	s.pos, s.frameAt, s.frames, s.marks, s.fmark = 0, 0, s.frames[:0], s.marks[:0], 0
}

// compact moves the kept bytes (from head) to the front of the buffer, once
// every complete frame was taken. Between two compactions at least one
// frame is taken, and what is moved arrived in the same read as that
// frame's end, so the moves total at most the input.
func (s *frameScanner) compact() {
	h := s.head()
	if h == 0 || len(s.frames) > 0 {
		return
	}
	n := copy(s.buf, s.buf[h:])
	s.moved += n
	s.buf = s.buf[:n]
	s.pos -= h
	s.frameAt -= h
	s.marks = append(s.marks[:0], s.marks[s.fmark:]...)
	for i := range s.marks {
		s.marks[i] -= h
	}
	s.fmark = 0
}

// frameDone marks the frame in progress complete; it ends at end.
func (s *frameScanner) frameDone(end int, inline bool) {
	f := frameRef{from: s.frameAt, to: end, mark: s.fmark, n: (len(s.marks) - s.fmark) / 2}
	if inline {
		f.mark = -1
	}
	s.frames = append(s.frames, f)
	s.frameAt, s.fmark = end, len(s.marks)
	s.state = stFrame
}

// frameSwallow drops the frame in progress, which ends at end.
func (s *frameScanner) frameSwallow(end int) {
	s.frameAt = end
	s.marks = s.marks[:s.fmark]
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
				if s.state == stCount {
					return i + 1, s.countDone(s.pos + i + 1)
				}
				return i + 1, s.bulkLenDone(s.pos + i + 1)
			}
		}
		return len(data), nil

	case stBulkStart:
		if data[0] != '$' {
			return 1, unexpectedByte(data[0])
		}
		s.startNumber()
		s.state = stBulkLen
		return 1, nil

	case stBulkData:
		n := min(s.remain, len(data))
		s.remain -= n
		if s.remain == 0 {
			s.state = stBulkCR
		}
		return n, nil

	case stBulkCR:
		if data[0] != '\r' {
			return 1, &ProtocolError{Reason: reasonBulkLen}
		}
		s.state = stBulkLF
		return 1, nil

	default: // stBulkLF
		if data[0] != '\n' {
			return 1, &ProtocolError{Reason: reasonBulkLen}
		}
		s.args--
		if s.args == 0 {
			s.frameDone(s.pos+1, false)
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
		return len(data), nil
	}
	// redcon splits inline lines on spaces only; a line of spaces (and a
	// final '\r') yields no command, so redcon would read again for
	// nothing: drop it here.
	if s.nonBlank == 0 || (s.nonBlank == 1 && s.lastCR) {
		s.frameSwallow(s.pos + end + 1)
	} else {
		s.frameDone(s.pos+end+1, true)
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
func (s *frameScanner) countDone(end int) *ProtocolError {
	if s.neg || s.num == 0 {
		s.frameSwallow(end) // Redis ignores "*0" and "*-1"
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

// bulkLenDone checks a complete "$<len>\r\n", which ends at end, and the
// command's total size, and records where the payload lies.
func (s *frameScanner) bulkLenDone(end int) *ProtocolError {
	authed := s.isAuthed()
	if s.num > int64(s.auth.bulk) {
		return &ProtocolError{Reason: reasonBulkLen}
	}
	if !authed && s.num > int64(s.pre.bulk) {
		return &ProtocolError{Reason: reasonUnauthBulkLen}
	}
	// Written as a difference, so that huge configured limits cannot
	// overflow it; the frame so far is never far above the cap.
	if int(s.num) > s.limits(authed).command-(end-s.frameAt)-2 {
		return &ProtocolError{Reason: reasonCommandTooBig}
	}
	s.marks = append(s.marks, end, end+int(s.num))
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

// guardConn is an accepted connection with its guard: the scanner that
// checks what the client sends (read through a commandReader, input.go),
// the limits in force, and replies written under the write timeout.
// Deadlines and Close pass through to the embedded conn.
type guardConn struct {
	net.Conn
	wdl     *lazyDeadline // write deadline; nil without a write timeout
	authed  atomic.Bool
	sc      *frameScanner
	perr    atomic.Pointer[ProtocolError]
	replied bool // the -ERR reply has been written
	wmu     sync.Mutex
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

// hangUp ends the connection without waiting for its reader: the socket
// is shut down both ways, so a write in progress or to come fails and the
// reader sees the end of input, and the connection's goroutine closes it
// once its reader returns. Close would wait instead: a commandReader holds
// the socket for as long as it runs (input.go), and may be the caller. A
// shutdown that fails found the socket reset already, which the reader
// sees too. A connection without a socket of its own (TLS) is closed.
func (g *guardConn) hangUp() {
	sc, ok := g.Conn.(syscall.Conn)
	if !ok {
		_ = g.Conn.Close()
		return
	}
	if raw, err := sc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
	}
}

// refuse ends the connection for a bad frame: it records e and writes
// "-ERR <e>" to the client (once). The caller first writes the replies to
// the commands before the frame.
func (g *guardConn) refuse(e *ProtocolError) {
	g.perr.Store(e)
	g.replyError(e)
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
