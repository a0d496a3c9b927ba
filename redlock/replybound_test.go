package redlock

import (
	"bufio"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// deepReply is a well-framed reply nested one level past the reader's
// bound, as Redis sends for a script returning such a table.
var deepReply = strings.Repeat("*1\r\n", 1001) + ":1\r\n"

// startDeepBackend serves RESP on a socket: a command with an argument
// "deep" is answered deepReply, INFO an empty bulk string, a compare
// script :1, anything else +OK.
func startDeepBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					v, err := resp.Read(br)
					if err != nil {
						return
					}
					args, _ := v.([]any)
					reply := "+OK\r\n"
					switch {
					case slices.Contains(args, any("deep")):
						reply = deepReply
					case len(args) > 0 && strings.EqualFold(args[0].(string), "INFO"):
						reply = "$0\r\n\r\n"
					case len(args) > 0 && strings.HasPrefix(strings.ToUpper(args[0].(string)), "EVAL"):
						reply = ":1\r\n"
					}
					if _, err := nc.Write([]byte(reply)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestReplyPastBoundIsNotAFailure: a reply nested deeper than the
// reader's bound is its caller's error. The pipelined connection stays up
// for the other callers, and however often a client asks for such a
// reply, no backend is counted as failing or marked down: only backends
// fail backends.
func TestReplyPastBoundIsNotAFailure(t *testing.T) {
	var nodes []Node
	for range 3 {
		addr := startDeepBackend(t)
		rn, err := DialNode(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rn.Close() })
		nodes = append(nodes, rn)
	}
	// A node timeout a loaded machine does not reach: a call that timed
	// out would re-dial its connection, which is not what is tested here.
	r := New(nodes, Options{NodeTimeout: 10 * time.Second, DownAfter: 2, Logger: testLogger(t)})
	r.loops.Add(1) // as if RunHealth ran: failures could mark nodes down
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.(*backend.RedisNode).Connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Every connection a vote and a direct call use, dialed before the
	// count is taken.
	if _, err := r.Vote(ctx, script.New("return 1"), []string{"k"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].Do(ctx, "ECHO", "x"); err != nil {
		t.Fatal(err)
	}
	pipes := make([]*backend.Conn, len(nodes))
	for i, n := range nodes {
		pipes[i] = n.(*backend.RedisNode).Ready()
	}

	deep := script.New("return 'a table nested past the bound'")
	for range 10 {
		v, err := r.Vote(ctx, deep, []string{"k"}, []string{"deep"})
		re, ok := v.(RedisError)
		if err != nil || !ok || !strings.Contains(string(re), "nested deeper") {
			t.Fatalf("Vote = %#v, %v; want the bound's error reply", v, err)
		}
		// One node directly: the error is the caller's, typed.
		_, err = nodes[0].Do(ctx, "ECHO", "deep")
		if !errors.Is(err, resp.ErrTooDeep) {
			t.Fatalf("Do = %v, want resp.ErrTooDeep", err)
		}
	}
	for _, s := range r.Status() {
		if s.State != StateUp || s.Failures != 0 {
			t.Fatalf("%+v: want up, no failures counted", s)
		}
	}
	for i, n := range nodes {
		if c := n.(*backend.RedisNode).Ready(); c == nil || c != pipes[i] {
			t.Fatalf("backend %d: its pipelined connection was dialed again after the deep replies", i)
		}
	}
	if _, err := r.Acquire(ctx, "other", "token", time.Second); err != nil {
		t.Fatalf("Acquire after the deep replies: %v", err)
	}
}
