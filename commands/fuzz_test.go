package commands

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// FuzzDispatch feeds arbitrary argument vectors (split on NUL) through the
// dispatcher. It fails on a panic, on a reply that is not well-formed RESP,
// and on an error reply without an upper-case code.
func FuzzDispatch(f *testing.F) {
	seeds := []string{
		"LOCK\x00k\x001000", "lock\x00k\x00abc", "LOCK\x00k\x00100\x00WAIT\x005\x00TOKEN\x00t",
		"UNLOCK\x00k\x00t", "EXTEND\x00k\x00t\x00100", "HELLO\x003\x00AUTH\x00u\x00p\x00SETNAME\x00n",
		"CLIENT\x00SETINFO\x00LIB-NAME\x00x", "CLIENT\x00LIST", "COMMAND\x00DOCS\x00lock", "INFO\x00server",
		"ECHO\x00\xff\r\n", "PING\x00a\x00b", "SELECT\x009223372036854775808", "LOCK\x00\x00-1",
		"nosuch\x00a\x00b", "SET\x00k\x00v\x00NX\x00PX\x001000", "set\x00k\x00v\x00ex\x008\x00nx\x00get",
		"SET\x00k\x00v\x00IFEQ\x00v\x00PXAT\x001", "SETNX\x00k\x00v", "GETSET\x00k\x00v", "DEL\x00a\x00b",
		"PEXPIRE\x00k\x00-5", "DELEX\x00k\x00IFEQ\x00v", "EVAL\x00if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end\x001\x00k\x00v",
		"EVAL\x00if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end\x001\x00k\x00v\x00100",
		"EVALSHA\x000000000000000000000000000000000000000000\x001\x00k\x00v", "EVAL\x00return 1\x000",
		"SCRIPT\x00LOAD\x00x", "WATCH\x00k", "MULTI", "EXEC", "SUBSCRIBE\x00c", "FLUSHDB", "CONFIG\x00GET\x00*", "AUTH\x00a\x00b\x00c", "RESET", "QUIT",
		"CLIENT\x00TRACKING\x00ON\x00BCAST\x00PREFIX\x00a\x00NOLOOP", "CLIENT\x00CACHING\x00YES", "CLIENT\x00TRACKINGINFO",
		"PSUBSCRIBE\x00a*", "UNSUBSCRIBE", "PUBSUB\x00NUMSUB\x00a", "PUBLISH\x00c\x00m", "LPUSH\x00k\x00v", "BLPOP\x00k\x000.01",
		"BLMOVE\x00a\x00b\x00LEFT\x00RIGHT\x000.01", "LPOP\x00k",
		"INCR\x00k", "INCRBY\x00k\x00-1", "INCRBY\x00k\x009223372036854775807", "DECR\x00k",
		"CLIENT\x00TRACKING\x00ON\x00OPTOUT\x00NOLOOP", "EVAL\x00return redis.call('GET', KEYS[1])\x001\x00k",
		"SET\x00k\x00v\x00IFDNE\x00B6ACB9D84A38FF74\x00GET\x00KEEPTTL", "SET\x00k\x00v\x00ifne\x00x\x00EXAT\x001",
		"DELEX\x00k\x00IFDEQ\x00b6acb9d84a38ff7", "DELEX\x00k\x00ifne\x00v", "DIGEST\x00k",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint8(2))
	}
	// f.Log may not be called inside the fuzz target: log nowhere.
	d, _ := newDispatcherLog(f, 3, "", hclog.NewNullLogger())
	f.Fuzz(func(t *testing.T, in []byte, proto uint8) {
		argv := bytes.Split(in, []byte{0})
		if len(argv) > 64 {
			argv = argv[:64]
		}
		c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
		defer d.CloseClient(c)
		c.proto.Store(int32(2 + proto%2))
		out := AppendReply(nil, d.Do(context.Background(), c, argv), c.Proto())
		if err := checkReplies(out); err != nil {
			t.Fatalf("%q -> %q: %v", argv, out, err)
		}
	})
}

// checkReplies parses out as one RESP reply, or several back to back
// (SUBSCRIBE answers per channel), and checks every error reply in them: one
// line starting with an upper-case code.
func checkReplies(out []byte) error {
	rd := bufio.NewReader(bytes.NewReader(out))
	for n := 0; ; n++ {
		if _, err := rd.Peek(1); err == io.EOF && n > 0 {
			return nil
		}
		v, err := testkit.ParseReply(rd)
		if err != nil {
			return fmt.Errorf("reply %d: %w", n+1, err)
		}
		if err := checkErrorLines(v); err != nil {
			return err
		}
	}
}

// checkErrorLines checks the error replies in v, nested ones included.
func checkErrorLines(v any) error {
	switch v := v.(type) {
	case testkit.Error:
		if len(v) == 0 || v[0] < 'A' || v[0] > 'Z' || strings.ContainsAny(string(v), "\r\n") {
			return fmt.Errorf("bad error line %q", string(v))
		}
	case []any:
		for _, e := range v {
			if err := checkErrorLines(e); err != nil {
				return err
			}
		}
	case testkit.Push:
		return checkErrorLines([]any(v))
	case map[any]any:
		for k, e := range v {
			if err := checkErrorLines(k); err != nil {
				return err
			}
			if err := checkErrorLines(e); err != nil {
				return err
			}
		}
	}
	return nil
}
