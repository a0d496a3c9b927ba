package commands

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/hashicorp/go-hclog"
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
		"PEXPIRE\x00k\x00-5", "DELEX\x00k\x00IFEQ\x00v", "EVALSHA\x00e950836ed1e694540c503ef9972b8de518044d3b\x001\x00k\x00v",
		"EVALSHA\x00e5a322e2634ef59a516e8ea150cb085afafee684\x002\x00a\x00b\x00v\x00100", "EVAL\x00return 1\x000",
		"SCRIPT\x00LOAD\x00x", "WATCH\x00k", "MULTI", "EXEC", "SUBSCRIBE\x00c", "FLUSHDB", "CONFIG\x00GET\x00*", "AUTH\x00a\x00b\x00c", "RESET", "QUIT",
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
		// One reply, or several back to back (SUBSCRIBE answers per channel).
		for rest := out; len(rest) > 0 || len(out) == 0; {
			var err string
			if rest, err = checkRESP(rest); err != "" {
				t.Fatalf("%q -> %q: %s (rest %q)", argv, out, err, rest)
			}
		}
	})
}

// checkRESP validates one RESP2/RESP3 value and returns what follows it.
func checkRESP(b []byte) ([]byte, string) {
	if len(b) == 0 {
		return b, "empty"
	}
	i := bytes.Index(b, []byte("\r\n"))
	if i < 0 {
		return b, "no CRLF"
	}
	line, rest := b[1:i], b[i+2:]
	switch b[0] {
	case '+', '_':
		return rest, ""
	case '-':
		if len(line) == 0 || line[0] < 'A' || line[0] > 'Z' || bytes.ContainsAny(line, "\r\n") {
			return rest, "bad error line"
		}
		return rest, ""
	case ':':
		if _, err := strconv.ParseInt(string(line), 10, 64); err != nil {
			return rest, "bad integer"
		}
		return rest, ""
	case '$':
		n, err := strconv.Atoi(string(line))
		if err != nil || n < -1 {
			return rest, "bad bulk length"
		}
		if n == -1 {
			return rest, ""
		}
		if len(rest) < n+2 || string(rest[n:n+2]) != "\r\n" {
			return rest, "short bulk"
		}
		return rest[n+2:], ""
	case '*', '%', '>':
		n, err := strconv.Atoi(string(line))
		if err != nil || n < -1 {
			return rest, "bad aggregate length"
		}
		if b[0] == '%' {
			n *= 2
		}
		for range n {
			var e string
			if rest, e = checkRESP(rest); e != "" {
				return rest, e
			}
		}
		return rest, ""
	}
	return rest, "unknown type " + string(b[0])
}
