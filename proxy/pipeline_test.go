package proxy

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// randomCommands is a pipeline of n commands on a few keys whose replies
// depend only on the commands before them on the same key (and the
// connection's state), never on timing: no ttls that can run out during
// the test, no generated tokens or validities.
func randomCommands(rng *rand.Rand, n int) [][]string {
	keys := []string{"a", "b", "c", "d"}
	var out [][]string
	for i := range n {
		k := keys[rng.IntN(len(keys))]
		v := fmt.Sprintf("v%d", rng.IntN(4))
		switch rng.IntN(14) {
		case 0:
			out = append(out, []string{"SET", k, v, "NX", "PX", "30000"})
		case 1:
			out = append(out, []string{"SET", k, v, "PX", "30000"})
		case 2:
			out = append(out, []string{"GET", k})
		case 3:
			out = append(out, []string{"DEL", k})
		case 4:
			out = append(out, []string{"EXISTS", k, keys[rng.IntN(len(keys))]})
		case 5:
			out = append(out, []string{"SETNX", k, v})
		case 6:
			out = append(out, []string{"DELIFEQ", k, v})
		case 7:
			out = append(out, []string{"GETSET", k, v})
		case 8:
			out = append(out, []string{"PEXPIRE", k, "30000"})
		case 9:
			out = append(out, []string{"UNLOCK", k, v})
		case 10:
			out = append(out, []string{"PING", fmt.Sprint(i)})
		case 11:
			out = append(out, []string{"CLIENT", "SETNAME", fmt.Sprintf("n%d", i)}, []string{"CLIENT", "GETNAME"})
		case 12:
			// The StackExchange.Redis release transaction.
			out = append(out, []string{"WATCH", k}, []string{"GET", k}, []string{"MULTI"}, []string{"DEL", k}, []string{"EXEC"})
		case 13:
			out = append(out, []string{"EVALSHA", "e950836ed1e694540c503ef9972b8de518044d3b", "1", k, v}) // redsync's release
		}
	}
	return out
}

// replies sends cmds on a new connection to s, one at a time or all in
// one write, and returns the exact bytes of each reply.
func replies(t *testing.T, s *Server, cmds [][]string, pipelined bool) [][]byte {
	t.Helper()
	c := dialServer(t, s)
	out := make([][]byte, len(cmds))
	if !pipelined {
		for i, cmd := range cmds {
			c.SendCmd(cmd...)
			out[i] = c.ReadRaw()
		}
		return out
	}
	var buf []byte
	for _, cmd := range cmds {
		buf = testkit.AppendCmd(buf, cmd...)
	}
	c.Send(buf)
	for i := range cmds {
		out[i] = c.ReadRaw()
	}
	return out
}

// TestPipelineSameAsOneByOne: a pipeline of random commands on a few keys
// gets, command by command, the replies it gets when sent one at a time.
func TestPipelineSameAsOneByOne(t *testing.T) {
	rounds := 8
	if testing.Short() {
		rounds = 2
	}
	for seed := range uint64(rounds) {
		cmds := randomCommands(rand.New(rand.NewPCG(seed, 1)), 150)
		want := replies(t, startServer(t, Config{}, "", false), cmds, false)
		got := replies(t, startServer(t, Config{}, "", false), cmds, true)
		for i := range cmds {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("seed %d: command %d %q: pipelined %q, one by one %q", seed, i, cmds[i], got[i], want[i])
			}
		}
	}
}

// TestPipelineBarriers: commands after a barrier see what it changed.
func TestPipelineBarriers(t *testing.T) {
	s := startServer(t, Config{}, "secret", false)
	got := replies(t, s, [][]string{
		{"GET", "k"}, // before AUTH: refused
		{"AUTH", "secret"},
		{"SET", "k", "v", "NX", "PX", "30000"},
		{"HELLO", "3"},
		{"GET", "nope"}, // RESP3 null
		{"CLIENT", "SETNAME", "x"},
		{"CLIENT", "GETNAME"},
		{"MULTI"},
		{"DEL", "k"},
		{"EXEC"},
		{"GET", "k"},
	}, true)
	want := []string{"-NOAUTH", "+OK", "+OK", "%7", "_", "+OK", "$1\r\nx", "+OK", "+QUEUED", "*1\r\n:1", "_"}
	for i, w := range want {
		if !strings.HasPrefix(string(got[i]), w) {
			t.Errorf("reply %d = %q, want %q…", i, got[i], w)
		}
	}
}

// TestPipelineBackpressure: a client that writes and never reads gets at
// most max_pipeline commands in flight: the proxy stops reading it, so
// its memory stays bounded however much the client writes.
func TestPipelineBackpressure(t *testing.T) {
	const maxPipeline = 16
	s := startServer(t, Config{MaxPipeline: maxPipeline}, "", false)
	setup := dialServer(t, s)
	big := strings.Repeat("x", 3000)
	if got := setup.Do("SET", "big", big, "PX", "60000"); got != "OK" {
		t.Fatalf("SET = %#v", got)
	}
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var chunk []byte
	for range 100 {
		chunk = testkit.AppendCmd(chunk, "GET", "big")
	}
	// A million GETs of a 3 kB value (27 MB of commands, 3 GB of replies),
	// written and never read: the writer blocks once the socket buffers
	// are full, long before the end.
	written := make(chan int, 1)
	go func() {
		n := 0
		for range 10000 {
			_ = nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
			if _, err := nc.Write(chunk); err != nil {
				break
			}
			n += 100
		}
		written <- n
	}()
	base := runtime.NumGoroutine()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	// The proxy runs what it read until its replies fill the socket, then
	// stops; a proxy that kept reading would keep growing (each second it
	// would queue thousands of 3 kB replies).
	time.Sleep(3 * time.Second)
	if len(written) > 0 {
		t.Fatalf("the client wrote all %d commands: the proxy kept reading", <-written)
	}
	settled := heap()
	time.Sleep(2 * time.Second)
	after := heap()
	t.Logf("heap in use: %d MiB at the start, %d MiB, %d MiB two seconds later", before>>20, settled>>20, after>>20)
	if after > settled+8<<20 || after > before+64<<20 {
		t.Errorf("heap grows while a client pipelines without reading: %d → %d → %d MiB", before>>20, settled>>20, after>>20)
	}
	if n := runtime.NumGoroutine(); n > base+maxPipeline+16 {
		t.Errorf("%d goroutines (%d before): more than max_pipeline in flight", n, base)
	}
	_ = nc.Close()
	<-written
}

// TestPipelineCloseGivesBack: a client that closes mid-pipeline is
// granted nothing it cannot release. Its LOCKs wait behind a LOCK … WAIT
// on a held key (a barrier), so none can be granted before the proxy sees
// the close; once it does, the WAIT gives up and every LOCK queued behind
// it is refused or given back. Without that, they would be granted when
// the WAIT ends (at most max_wait, 5 s here) and held for 30 s.
func TestPipelineCloseGivesBack(t *testing.T) {
	s := startServer(t, Config{}, "", false)
	holdLock(t, s, "gate")
	probe := dialServer(t, s)
	c := dialServer(t, s)
	if v := c.Do("PING"); v != "PONG" {
		t.Fatalf("PING = %#v", v)
	}
	buf := testkit.AppendCmd(nil, "LOCK", "gate", "30000", "WAIT", "20000")
	for i := range 50 {
		buf = testkit.AppendCmd(buf, "LOCK", fmt.Sprintf("k%d", i), "30000")
	}
	c.Send(buf)
	_ = c.Close()
	// The proxy read to the close (the connection is gone from the count),
	// every command it read has ended, then the give-backs run.
	testkit.Eventually(t, 10*time.Second, "the closed connection handled", func() bool {
		return s.count.Load() == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.inflight.Wait(ctx); err != nil {
		t.Fatalf("commands of the closed client still running: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "every lock of the closed client given back", func() bool {
		for i := range 50 {
			if probe.Do("EXISTS", fmt.Sprintf("k%d", i)) != int64(0) {
				return false
			}
		}
		return true
	})
}

// TestPipelineRepliesBeforeBlocking: a reply the reader produced itself
// goes out before a pipelined command that blocks (LOCK … WAIT on a held
// key) ends, as Redis writes before it blocks a client.
func TestPipelineRepliesBeforeBlocking(t *testing.T) {
	s := startServer(t, Config{}, "", false)
	holder, token := holdLock(t, s, "k")
	c := dialServer(t, s)
	var buf []byte
	buf = testkit.AppendCmd(buf, "PING")
	buf = testkit.AppendCmd(buf, "LOCK", "k", "30000", "WAIT", "20000")
	c.Send(buf)
	// Without the write before blocking, +PONG would wait for the WAIT.
	if v, err := c.TryReadReply(10 * time.Second); err != nil || v != "PONG" {
		t.Fatalf("first reply while the LOCK waits = %#v, %v; want PONG", v, err)
	}
	if n := holder.Do("UNLOCK", "k", token); n != int64(1) {
		t.Fatalf("UNLOCK = %#v", n)
	}
	if v, ok := c.ReadReply().([]any); !ok || len(v) != 3 {
		t.Fatalf("waiter's LOCK = %#v", v)
	}
}

// TestPipelineErrorAfterReplies: a bad frame pipelined behind a command
// still running is answered after that command's reply, as Redis answers
// the commands before a protocol error and then the error.
func TestPipelineErrorAfterReplies(t *testing.T) {
	s := startServer(t, Config{}, "", false)
	holder, token := holdLock(t, s, "k")
	c := dialServer(t, s)
	c.Timeout = 20 * time.Second
	buf := testkit.AppendCmd(nil, "LOCK", "k", "30000", "WAIT", "20000")
	c.Send(append(buf, "*1\r\n$99999999999\r\n"...))
	waitBlocked(t, s)
	if n := holder.Do("UNLOCK", "k", token); n != int64(1) {
		t.Fatalf("UNLOCK = %#v", n)
	}
	if v, ok := c.ReadReply().([]any); !ok || len(v) != 3 {
		t.Fatalf("first reply = %#v, want the waiting LOCK's grant", v)
	}
	if v := c.ReadReply(); v != testkit.Error("ERR Protocol error: invalid bulk length") {
		t.Fatalf("second reply = %#v, want the protocol error", v)
	}
	c.ExpectClosed(5 * time.Second)
}

// TestPipelineArgsOutliveTheRead: a command handed to a worker keeps its
// own arguments while the reader reads the next commands into the same
// buffer: a long pipeline of distinct values (many reads of the buffer)
// written and read back, by GET and by a script whose keys were parsed
// when it was planned (Plan.Rebind).
func TestPipelineArgsOutliveTheRead(t *testing.T) {
	s := startServer(t, Config{}, "", false)
	var cmds [][]string
	for i := range 300 {
		k := fmt.Sprintf("k%d", i%7)
		v := fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%50))
		cmds = append(cmds, []string{"SET", k, v, "PX", "30000"}, []string{"GET", k},
			[]string{"EVAL", "return redis.call('GET', KEYS[1])", "1", k})
	}
	got := replies(t, s, cmds, true)
	for i := 0; i < len(cmds); i += 3 {
		v := cmds[i][2]
		want := fmt.Sprintf("$%d\r\n%s\r\n", len(v), v)
		if string(got[i]) != "+OK\r\n" || string(got[i+1]) != want || string(got[i+2]) != want {
			t.Fatalf("command %d: SET %q, GET %q, EVAL %q; want %q", i, got[i], got[i+1], got[i+2], want)
		}
	}
}

// TestPipelineSilentReplies: after CLIENT REPLY OFF the commands of a
// pipeline write nothing, and their slots are given back: more of them
// than max_pipeline run, and CLIENT REPLY ON answers. Before, a slot
// whose reply was empty never counted as complete and the connection
// hung.
func TestPipelineSilentReplies(t *testing.T) {
	const maxPipeline = 8
	s := startServer(t, Config{MaxPipeline: maxPipeline}, "", false)
	c := dialServer(t, s)
	buf := testkit.AppendCmd(nil, "CLIENT", "REPLY", "OFF")
	for i := range 4 * maxPipeline {
		buf = testkit.AppendCmd(buf, "SET", fmt.Sprint("k", i%3), "v", "PX", "30000")
		buf = testkit.AppendCmd(buf, "GET", fmt.Sprint("k", i%3))
	}
	buf = testkit.AppendCmd(buf, "CLIENT", "REPLY", "ON")
	buf = testkit.AppendCmd(buf, "CLIENT", "REPLY", "SKIP")
	buf = testkit.AppendCmd(buf, "GET", "k0")
	buf = testkit.AppendCmd(buf, "ECHO", "last")
	c.Send(buf)
	for _, want := range []string{"+OK\r\n", "$4\r\nlast\r\n"} {
		if got := string(c.ReadRaw()); got != want {
			t.Fatalf("reply = %q, want %q", got, want)
		}
	}
}
