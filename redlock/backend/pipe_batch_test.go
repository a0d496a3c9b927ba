package backend

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// countingConn counts the writes on a connection and the commands they
// carry, and can hold the first write until released, so that a test
// decides what is in flight while more requests arrive.
type countingConn struct {
	net.Conn
	writes   atomic.Int64
	commands atomic.Int64
	last     atomic.Int64 // commands in the latest write

	entered chan struct{} // closed when the first write starts, if held
	release chan struct{} // the first write waits for it, if held
	first   sync.Once
}

func (c *countingConn) Write(b []byte) (int, error) {
	if c.release != nil {
		c.first.Do(func() {
			close(c.entered)
			<-c.release
		})
	}
	n := int64(countCommands(b))
	c.writes.Add(1)
	c.commands.Add(n)
	c.last.Store(n)
	return c.Conn.Write(b)
}

// countCommands counts the RESP arrays of bulk strings in b.
func countCommands(b []byte) int {
	br := bufio.NewReader(bytesReaderOf(b))
	n := 0
	for {
		if _, err := readReply(br); err != nil {
			return n
		}
		n++
	}
}

type bytesReader []byte

func (r *bytesReader) Read(p []byte) (int, error) {
	if len(*r) == 0 {
		return 0, errors.New("EOF")
	}
	n := copy(p, *r)
	*r = (*r)[n:]
	return n, nil
}

func bytesReaderOf(b []byte) *bytesReader { r := bytesReader(b); return &r }

// newCountingPipe is a pipe to addr whose connections are counted; with
// hold, the first write of the first connection waits for release.
func newCountingPipe(t testing.TB, addr string, hold bool) (*Pipe, *countingConn) {
	t.Helper()
	cc := &countingConn{}
	if hold {
		cc.entered, cc.release = make(chan struct{}), make(chan struct{})
	}
	var dialled atomic.Bool
	dial := dialTCP(addr, time.Second, nil)
	p := NewPipe(func(ctx context.Context) (net.Conn, error) {
		nc, err := dial(ctx)
		if err != nil || dialled.Swap(true) {
			return nc, err // later connections are not counted
		}
		cc.Conn = nc
		return cc, nil
	}, time.Second)
	t.Cleanup(func() { p.Close() })
	return p, cc
}

// TestPipeLoneCommandWrittenByCaller: a command that finds its connection
// idle is written by its caller before trySend returns, with no goroutine
// woken to write it.
func TestPipeLoneCommandWrittenByCaller(t *testing.T) {
	mr := miniredis.RunT(t)
	p, cc := newCountingPipe(t, mr.Addr(), false)
	c, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		req := requestPool.Get().(*Request)
		req.Cmd = resp.AppendCommand(req.Cmd[:0], "ECHO", strconv.Itoa(i))
		req.Deadline = time.Time{}
		if !c.TrySend(req, true) {
			t.Fatal("not taken")
		}
		if w := cc.writes.Load(); w != int64(i+1) {
			t.Fatalf("after trySend of command %d on an idle connection: %d writes, want %d (written by the caller)", i, w, i+1)
		}
		if r := <-req.done; r.err != nil || r.v != strconv.Itoa(i) {
			t.Fatalf("ECHO %d = %v, %v", i, r.v, r.err)
		}
		requestPool.Put(req)
	}
}

// echoRequest is a request for ECHO s.
func echoRequest(s string) *Request {
	return &Request{Cmd: resp.AppendCommand(nil, "ECHO", s), done: make(chan response, 1)}
}

// TestPipeBatchGrowsWhileWriteInFlight: requests queued while a write is
// in flight all go out in the next write, in order, each with its own
// reply. No timing: the first write is held until the others are queued.
func TestPipeBatchGrowsWhileWriteInFlight(t *testing.T) {
	mr := miniredis.RunT(t)
	p, cc := newCountingPipe(t, mr.Addr(), true)
	c, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const callers = 100
	first := echoRequest("first")
	if !c.TrySend(first, false) { // to the writer, whose write is held
		t.Fatal("not taken")
	}
	<-cc.entered
	reqs := make([]*Request, callers)
	for i := range reqs {
		reqs[i] = echoRequest(strconv.Itoa(i))
		if !c.TrySend(reqs[i], true) { // not idle: queued, not written here
			t.Fatal("not taken")
		}
	}
	close(cc.release)
	for i, r := range append([]*Request{first}, reqs...) {
		want := "first"
		if i > 0 {
			want = strconv.Itoa(i - 1)
		}
		if got := <-r.done; got.err != nil || got.v != want {
			t.Fatalf("ECHO %s = %v, %v", want, got.v, got.err)
		}
	}
	if w, n := cc.writes.Load(), cc.commands.Load(); w != 2 || n != callers+1 {
		t.Fatalf("%d commands in %d writes, want %d in 2 (one, then all that queued behind it)", n, w, callers+1)
	}
}

// TestPipeBackendDiesMidBatch: a backend that answers part of a batch and
// then closes leaves no request waiting: the answered ones get their own
// replies, every other one an error.
func TestPipeBackendDiesMidBatch(t *testing.T) {
	const callers, answered = 50, 10
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		br := bufio.NewReader(nc)
		for range answered {
			v, err := readReply(br)
			args, _ := v.([]any)
			if err != nil || len(args) != 2 {
				return
			}
			nc.Write(resp.AppendBulk(nil, args[1].(string)))
		}
		nc.(*net.TCPConn).CloseWrite() // dies: no more replies
		bufio.NewReader(nc).WriteTo(discard{})
	}()
	p, cc := newCountingPipe(t, ln.Addr().String(), true)
	c, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]*Request, callers)
	for i := range reqs {
		reqs[i] = echoRequest(strconv.Itoa(i))
		if !c.TrySend(reqs[i], false) {
			t.Fatal("not taken")
		}
		if i == 0 {
			<-cc.entered // the rest queue behind the held write
		}
	}
	close(cc.release)
	ok, failed := 0, 0
	for i, r := range reqs {
		select {
		case got := <-r.done:
			switch {
			case got.err == nil && got.v == strconv.Itoa(i):
				ok++
			case got.err == nil:
				t.Errorf("ECHO %d answered %v: another request's reply", i, got.v)
			default:
				failed++
			}
		case <-time.After(time.Minute):
			t.Fatalf("ECHO %d still waiting a minute after the backend closed", i)
		}
	}
	if ok != answered || failed != callers-answered {
		t.Fatalf("%d answered, %d failed; want %d and %d", ok, failed, answered, callers-answered)
	}
}

// BenchmarkPipeConcurrent sends PING from many goroutines at once over
// one pipe to a canned backend and reports the commands each write
// carried.
func BenchmarkPipeConcurrent(b *testing.B) {
	p, cc := newCountingPipe(b, testkit.Canned(b), false)
	ctx := context.Background()
	if _, err := p.do(ctx, "PING"); err != nil {
		b.Fatal(err)
	}
	w0, n0 := cc.writes.Load(), cc.commands.Load()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.do(ctx, "PING"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if w := cc.writes.Load() - w0; w > 0 {
		b.ReportMetric(float64(cc.commands.Load()-n0)/float64(w), "cmds/write")
	}
}

// TestPipeStress: many callers with deadlines from none to already passed,
// while the connection is broken now and then: every call returns, with
// its own reply or an error, and none waits past its deadline by much.
func TestPipeStress(t *testing.T) {
	mr := miniredis.RunT(t)
	p := newTestPipe(t, mr.Addr())
	rounds := 300
	if testing.Short() {
		rounds = 100
	}
	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Add(1)
	go func() { // break the live connection now and then
		defer faults.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			if c := p.Ready(); c != nil && i%4 == 0 {
				c.Fail(errors.New("broken by the test"))
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch i % 4 {
				case 1:
					ctx, cancel = context.WithTimeout(ctx, time.Duration(i%7)*100*time.Microsecond)
				case 2:
					ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
				}
				s := strconv.Itoa(g) + ":" + strconv.Itoa(i)
				v, err := p.do(ctx, "ECHO", s)
				cancel()
				if err == nil && v != s {
					t.Errorf("ECHO %s answered %v", s, v)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("callers still waiting after 2 minutes: a request was lost")
	}
	close(stop)
	faults.Wait()
}
