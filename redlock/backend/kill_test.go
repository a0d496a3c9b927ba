package backend

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// fullBackend serves RESP until it is full: then, as Redis at maxclients,
// it answers a new connection "-ERR max number of clients reached" and
// closes it. SCRIPT KILL is answered NOTBUSY; AUTH, INFO and anything
// else as a backend with nothing to report.
type fullBackend struct {
	mu    sync.Mutex
	full  bool
	conns []net.Conn
	kills int
}

func startFullBackend(t *testing.T) (*fullBackend, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fullBackend{}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			full := f.full
			if !full {
				f.conns = append(f.conns, nc)
			}
			f.mu.Unlock()
			if full {
				_, _ = nc.Write([]byte("-ERR max number of clients reached\r\n"))
				nc.Close()
				continue
			}
			go f.serve(nc)
		}
	}()
	return f, ln.Addr().String()
}

func (f *fullBackend) serve(nc net.Conn) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	for {
		v, err := resp.Read(br)
		if err != nil {
			return
		}
		args, _ := v.([]any)
		var words []string
		for _, a := range args {
			s, _ := a.(string)
			words = append(words, strings.ToUpper(s))
		}
		reply := "+OK\r\n"
		switch strings.Join(words, " ") {
		case "SCRIPT KILL":
			f.mu.Lock()
			f.kills++
			f.mu.Unlock()
			reply = "-NOTBUSY No scripts in execution right now.\r\n"
		case "INFO":
			reply = "$0\r\n\r\n"
		}
		if _, err := nc.Write([]byte(reply)); err != nil {
			return
		}
	}
}

func (f *fullBackend) setFull(full bool) {
	f.mu.Lock()
	f.full = full
	f.mu.Unlock()
}

// dropAll closes every connection, as a restarted backend would.
func (f *fullBackend) dropAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, nc := range f.conns {
		nc.Close()
	}
	f.conns = nil
}

// TestKillLineOpenAhead: SCRIPT KILL's connection is open (and
// authenticated) before it is needed, so a kill reaches a backend that
// refuses new connections (at maxclients); the connection is kept for the
// next kill, and a kill that finds it closed (a restart) dials anew.
func TestKillLineOpenAhead(t *testing.T) {
	f, addr := startFullBackend(t)
	n, err := DialNode("redis://:secret@" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.OpenAhead()
	testkit.Eventually(t, 10*time.Second, "the kill line open", func() bool { return n.kill.Ready() != nil })
	f.setFull(true)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 2 {
		err := n.KillScript(ctx)
		var re resp.Error
		if !errors.As(err, &re) || !strings.HasPrefix(string(re), "NOTBUSY") {
			t.Fatalf("kill %d at maxclients = %v, want the backend's NOTBUSY", i, err)
		}
	}
	f.mu.Lock()
	kills := f.kills
	f.mu.Unlock()
	if kills != 2 {
		t.Fatalf("backend saw %d SCRIPT KILLs, want 2", kills)
	}

	// Closed by the backend: the next kill dials a new connection.
	f.setFull(false)
	f.dropAll()
	if err := n.KillScript(ctx); err == nil || !strings.HasPrefix(err.Error(), "NOTBUSY") {
		t.Fatalf("kill after the line was closed = %v, want NOTBUSY", err)
	}
	if n.kill.Ready() == nil {
		t.Fatal("the new connection was not kept as the kill line")
	}
}
