package testkit

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"testing"
)

// Canned serves RESP on loopback with fixed replies and no allocation per
// command: INFO gets a Redis 7 server section, SET gets OK, anything else
// :1. It returns the address; the listener closes with the test.
// Benchmarks use it to count the allocations of the client side alone.
func Canned(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	info := "# Server\r\nredis_version:7.0.15\r\n"
	infoReply := []byte("$" + strconv.Itoa(len(info)) + "\r\n" + info + "\r\n")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveCanned(c, infoReply)
		}
	}()
	return ln.Addr().String()
}

func serveCanned(c net.Conn, infoReply []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	bw := bufio.NewWriterSize(c, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil || len(line) < 3 || line[0] != '*' {
			return
		}
		n, _ := strconv.Atoi(string(line[1 : len(line)-2])) // small: no allocation
		var name [8]byte
		for i := range n {
			line, err := br.ReadSlice('\n')
			if err != nil || len(line) < 3 || line[0] != '$' {
				return
			}
			size, _ := strconv.Atoi(string(line[1 : len(line)-2]))
			if i == 0 {
				head, err := br.Peek(min(size, len(name)))
				if err != nil {
					return
				}
				copy(name[:], head)
			}
			if _, err := br.Discard(size + 2); err != nil {
				return
			}
		}
		switch {
		case bytes.HasPrefix(name[:], []byte("INFO")):
			bw.Write(infoReply)
		case bytes.HasPrefix(name[:], []byte("SET")):
			bw.WriteString("+OK\r\n")
		default:
			bw.WriteString(":1\r\n")
		}
		if br.Buffered() == 0 {
			if bw.Flush() != nil {
				return
			}
		}
	}
}
