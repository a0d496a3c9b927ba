package backend

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// TestConnSetupAuthSelect: the pipelined connection and DialConn's both
// authenticate as the URL's user and work in its database; wrong
// credentials fail both with the backend's error reply.
func TestConnSetupAuthSelect(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireUserAuth("app", "s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	n, err := DialNode("redis://app:s3cret@" + mr.Addr() + "/2")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if ok, _, err := n.SetNX(ctx, "by-pipe", "v", time.Minute); !ok || err != nil {
		t.Fatalf("SetNX = %v, %v", ok, err)
	}
	nc, err := n.DialConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(resp.AppendCommand(nil, "SET", "by-dialconn", "v")); err != nil {
		t.Fatal(err)
	}
	if v, err := resp.Read(bufio.NewReader(nc)); v != resp.StatusOK || err != nil {
		t.Fatalf("SET on DialConn's connection = %#v, %v", v, err)
	}
	for _, k := range []string{"by-pipe", "by-dialconn"} {
		if !mr.DB(2).Exists(k) || mr.DB(0).Exists(k) {
			t.Errorf("%s is not in database 2 alone", k)
		}
	}

	bad, err := DialNode("redis://app:wrong@" + mr.Addr() + "/2")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	var re resp.Error
	if err := bad.Connect(ctx); !errors.As(err, &re) || !strings.HasPrefix(string(re), "WRONGPASS") {
		t.Errorf("Connect with a wrong password: %v", err)
	}
	if nc, err := bad.DialConn(ctx); !errors.As(err, &re) || !strings.HasPrefix(string(re), "WRONGPASS") {
		t.Errorf("DialConn with a wrong password: %v", err)
		if nc != nil {
			nc.Close()
		}
	}
}

// cannedConn answers whatever is written with replies, all at once.
type cannedConn struct {
	net.Conn
	replies *strings.Reader
	wrote   bytes.Buffer
}

func (c *cannedConn) Read(p []byte) (int, error)  { return c.replies.Read(p) }
func (c *cannedConn) Write(p []byte) (int, error) { return c.wrote.Write(p) }
func (c *cannedConn) SetDeadline(time.Time) error { return nil }
func newCanned(replies string) *cannedConn        { return &cannedConn{replies: strings.NewReader(replies)} }
func cannedOpts(password string, db int) *redis.Options {
	return &redis.Options{Password: password, DB: db}
}

// TestConnSetupReplies: what a backend answers to the setup decides it.
func TestConnSetupReplies(t *testing.T) {
	ctx := context.Background()

	// Nothing to say: nothing is sent.
	c := newCanned("")
	if v, err := connSetup(ctx, c, cannedOpts("", 0)); v != nil || err != nil || c.wrote.Len() != 0 {
		t.Fatalf("no setup: %v, %v, sent %q", v, err, c.wrote.String())
	}

	// AUTH, SELECT and more go out in one write, in order.
	c = newCanned("+OK\r\n+OK\r\n-ERR no CONFIG\r\n$4\r\ninfo\r\n")
	v, err := connSetup(ctx, c, cannedOpts("pw", 3), []any{"CONFIG", "SET", "x", "1"}, []any{"INFO"})
	if err != nil || len(v) != 2 || v[0] != resp.Error("ERR no CONFIG") || v[1] != "info" {
		t.Fatalf("more's replies = %#v, %v", v, err)
	}
	want := string(resp.AppendCommand(resp.AppendCommand(resp.AppendCommand(resp.AppendCommand(nil,
		"AUTH", "pw"), "SELECT", 3), "CONFIG", "SET", "x", "1"), "INFO"))
	if c.wrote.String() != want {
		t.Fatalf("sent %q, want %q", c.wrote.String(), want)
	}

	for _, tc := range []struct{ name, replies, want string }{
		{"auth refused", "-WRONGPASS no\r\n+OK\r\n", "connect: WRONGPASS no"},
		{"select refused", "+OK\r\n-ERR DB index is out of range\r\n", "connect: ERR DB index is out of range"},
		{"bytes after the replies", "+OK\r\n+OK\r\n+EXTRA\r\n", "connect: 8 unexpected bytes after the setup replies"},
		{"connection ends", "+OK\r\n", "connect: EOF"},
		{"not RESP", "+OK\r\nHTTP/1.1 400\r\n", "connect: backend protocol error"},
	} {
		_, err := connSetup(ctx, newCanned(tc.replies), cannedOpts("pw", 1))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
