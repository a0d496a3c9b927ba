package testkit

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/redcon"
)

// FakeRedis is a small Redis over a map that answers INFO with a chosen
// version, PING, SET (NX, IFEQ, PX), GET, DELEX key IFEQ value and
// DELIFEQ key value with their real semantics, and EVALSHA of the scripts
// a node runs for a compare-and-delete (2 keys, the value) and for SET NX
// (3 keys, value and ttl), told apart by their shape; it records every
// command name it receives. Without native, DELEX and DELIFEQ are unknown
// commands (a downgraded server).
type FakeRedis struct {
	info string

	mu     sync.Mutex
	keys   map[string]string
	cmds   []string
	native bool
	hold   chan struct{} // non-nil: commands other than INFO wait for it to close
}

// StartFakeRedis serves a FakeRedis on loopback whose INFO answers info,
// and returns it with its address; it stops with the test.
func StartFakeRedis(t testing.TB, info string) (*FakeRedis, string) {
	t.Helper()
	f := &FakeRedis{info: info, keys: map[string]string{}, native: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = redcon.Serve(ln, f.handle, nil, nil)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return f, ln.Addr().String()
}

// SetNative turns the native compare-and-delete commands on or off.
func (f *FakeRedis) SetNative(on bool) {
	f.mu.Lock()
	f.native = on
	f.mu.Unlock()
}

// Received returns the command names received so far, upper-cased.
func (f *FakeRedis) Received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

// Stall makes commands other than INFO wait until the returned function
// is called; each connection then runs its waiting commands in order.
func (f *FakeRedis) Stall() (resume func()) {
	hold := make(chan struct{})
	f.mu.Lock()
	f.hold = hold
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.hold = nil
		f.mu.Unlock()
		close(hold)
	}
}

// Value returns key's value, "" when absent.
func (f *FakeRedis) Value(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key]
}

func (f *FakeRedis) handle(c redcon.Conn, cmd redcon.Command) {
	name := strings.ToUpper(string(cmd.Args[0]))
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil && name != "INFO" {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, name)
	arg := func(i int) string { return string(cmd.Args[i]) }
	compareAndDelete := func(key, value string) {
		if v, ok := f.keys[key]; ok && v == value {
			delete(f.keys, key)
			c.WriteInt(1)
			return
		}
		c.WriteInt(0)
	}
	switch {
	case name == "INFO":
		c.WriteBulkString(f.info)
	case name == "PING":
		c.WriteString("PONG")
	case name == "GET" && len(cmd.Args) == 2:
		if v, ok := f.keys[arg(1)]; ok {
			c.WriteBulkString(v)
		} else {
			c.WriteNull()
		}
	case name == "SET" && len(cmd.Args) >= 3:
		key, value := arg(1), arg(2)
		cur, exists := f.keys[key]
		for i := 3; i < len(cmd.Args); i++ {
			switch strings.ToUpper(arg(i)) {
			case "NX":
				if exists {
					c.WriteNull()
					return
				}
			case "IFEQ":
				i++
				if !exists || cur != arg(i) {
					c.WriteNull()
					return
				}
			case "PX":
				i++ // ttls are not modelled
			}
		}
		f.keys[key] = value
		c.WriteString("OK")
	case name == "DELEX" && f.native && len(cmd.Args) == 4 && strings.EqualFold(arg(2), "IFEQ"):
		compareAndDelete(arg(1), arg(3))
	case name == "DELIFEQ" && f.native && len(cmd.Args) == 3:
		compareAndDelete(arg(1), arg(2))
	case name == "EVALSHA" && len(cmd.Args) == 6 && arg(2) == "2":
		compareAndDelete(arg(3), arg(5)) // the key, its marker, the value
	case name == "EVALSHA" && len(cmd.Args) == 8 && arg(2) == "3":
		if _, exists := f.keys[arg(3)]; exists { // the key, its companion and marker, value, ttl
			c.WriteInt(0)
			return
		}
		f.keys[arg(3)] = arg(6)
		c.WriteInt(1)
	default:
		c.WriteError("ERR unknown command '" + arg(0) + "', with args beginning with: ")
	}
}

// Count returns how many of cmds are name.
func Count(cmds []string, name string) int {
	n := 0
	for _, c := range cmds {
		if c == name {
			n++
		}
	}
	return n
}
