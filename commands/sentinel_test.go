package commands

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
	"github.com/redlock-proxy/redlock-proxy/redlock/tier"
)

// fakeTier is a Discovery with a fixed view.
type fakeTier struct {
	members []tier.Member
	last    tier.Member
	hasLast bool
}

func (f *fakeTier) Service() string    { return "redlock" }
func (f *fakeTier) Announce() string   { return "10.0.0.2:6380" }
func (f *fakeTier) ID() string         { return strings.Repeat("b", 40) }
func (f *fakeTier) TTL() time.Duration { return 3 * time.Second }
func (f *fakeTier) Members() []tier.Member {
	return f.members
}
func (f *fakeTier) Master() (tier.Member, bool, bool) {
	if len(f.members) > 0 {
		return f.members[0], true, true
	}
	return f.last, false, f.hasLast
}

func threeMembers() *fakeTier {
	j := time.UnixMilli(1_700_000_000_000)
	return &fakeTier{members: []tier.Member{
		{Addr: "10.0.0.1:6380", ID: strings.Repeat("a", 40), Joined: j},
		{Addr: "10.0.0.2:6380", ID: strings.Repeat("b", 40), Joined: j.Add(time.Second), Self: true},
		{Addr: "[::1]:6381", ID: strings.Repeat("c", 40), Joined: j.Add(2 * time.Second)},
	}}
}

func TestSentinelWithoutTier(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	if got := do(d, c, "SENTINEL", "masters"); !strings.HasPrefix(got, "-ERR unknown command 'SENTINEL'") {
		t.Fatalf("SENTINEL without a tier = %q, want an unknown command", got)
	}
	if got := do(d, c, "ROLE"); got != "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n" {
		t.Fatalf("ROLE = %q", got)
	}
}

// TestWaitAnswersAtOnce: WAIT and WAITAOF answer what a master without
// replicas can, at once, whatever the timeout (0 would block Redis for
// good); bad arguments get Redis's errors.
func TestWaitAnswersAtOnce(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	for _, tc := range []struct{ cmd, want string }{
		{"WAIT 0 0", ":0\r\n"},
		{"wait 1 0", ":0\r\n"},
		{"WAITAOF 1 1 0", "*2\r\n:0\r\n:0\r\n"},
		{"WAIT 1 x", "-ERR value is not an integer or out of range\r\n"},
		{"WAIT 1 -1", "-ERR timeout is negative\r\n"},
		{"WAITAOF 0 0", "-ERR wrong number of arguments for 'waitaof' command\r\n"},
	} {
		if got := do(d, c, strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

func TestSentinelReplies(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	d.SetDiscovery(threeMembers())
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	cases := []struct{ cmd, want string }{
		{"SENTINEL get-master-addr-by-name redlock", "*2\r\n$8\r\n10.0.0.1\r\n$4\r\n6380\r\n"},
		{"sentinel GET-MASTER-ADDR-BY-NAME other", "*-1\r\n"},
		{"SENTINEL get-master-addr-by-name", "-ERR wrong number of arguments for 'sentinel|get-master-addr-by-name' command\r\n"},
		{"SENTINEL master other", "-ERR No such master with that name\r\n"},
		{"SENTINEL sentinels other", "-ERR No such master with that name\r\n"},
		{"SENTINEL replicas redlock", "*0\r\n"},
		{"SENTINEL slaves redlock", "*0\r\n"},
		{"SENTINEL myid", "$40\r\n" + strings.Repeat("b", 40) + "\r\n"},
		{"SENTINEL ckquorum redlock", "+OK 3 usable Sentinels. Quorum and failover authorization can be reached\r\n"},
		{"SENTINEL is-master-down-by-addr 10.0.0.1 6380 0 *", "*3\r\n:0\r\n$1\r\n*\r\n:0\r\n"},
		{"SENTINEL is-master-down-by-addr 10.0.0.9 6380 0 *", "*3\r\n:1\r\n$1\r\n*\r\n:0\r\n"},
		{"SENTINEL bogus", "-ERR unknown subcommand 'bogus'. Try SENTINEL HELP.\r\n"},
	}
	for _, tc := range cases {
		if got := do(d, c, strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.cmd, got, tc.want)
		}
	}
	if got := do(d, c, "SENTINEL", "failover", "redlock"); !strings.HasPrefix(got, "-ERR SENTINEL FAILOVER is not supported") {
		t.Errorf("SENTINEL FAILOVER = %q", got)
	}

	// MASTERS as redis-py reads it: a flat field/value array of 20 pairs.
	got := do(d, c, "SENTINEL", "masters")
	for _, want := range []string{
		"*1\r\n*40\r\n$4\r\nname\r\n$7\r\nredlock\r\n$2\r\nip\r\n$8\r\n10.0.0.1\r\n$4\r\nport\r\n$4\r\n6380\r\n",
		"$5\r\nflags\r\n$6\r\nmaster\r\n",
		"$19\r\nnum-other-sentinels\r\n$1\r\n2\r\n",
		"$5\r\nrunid\r\n$40\r\n" + strings.Repeat("a", 40),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("SENTINEL MASTERS = %q, want it to contain %q", got, want)
		}
	}
	// SENTINELS: the others, 14 pairs each, IPv6 without brackets.
	got = do(d, c, "SENTINEL", "sentinels", "redlock")
	if !strings.HasPrefix(got, "*2\r\n*28\r\n") || !strings.Contains(got, "$2\r\nip\r\n$3\r\n::1\r\n$4\r\nport\r\n$4\r\n6381\r\n") ||
		strings.Contains(got, strings.Repeat("b", 40)) || !strings.Contains(got, "$5\r\nflags\r\n$8\r\nsentinel\r\n") {
		t.Errorf("SENTINEL SENTINELS = %q: want the two other proxies", got)
	}
	// RESP3: maps, a null for an unknown name.
	do(d, c, "HELLO", "3")
	if got := do(d, c, "SENTINEL", "master", "redlock"); !strings.HasPrefix(got, "%20\r\n$4\r\nname\r\n") {
		t.Errorf("SENTINEL MASTER in RESP3 = %q, want a map of 20", got)
	}
	if got := do(d, c, "SENTINEL", "get-master-addr-by-name", "x"); got != "_\r\n" {
		t.Errorf("unknown name in RESP3 = %q", got)
	}
	info := do(d, c, "INFO", "tier")
	for _, want := range []string{"service_name:redlock", "advertised:10.0.0.1:6380", "live_proxies:3", "self=1"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO tier = %q, want %q", info, want)
		}
	}
}

// TestSentinelNoLiveProxy: the last advertised proxy is still named, and
// flagged down where a client reads flags.
func TestSentinelNoLiveProxy(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	ft := &fakeTier{last: tier.Member{Addr: "10.0.0.1:6380", ID: "x"}, hasLast: true}
	d.SetDiscovery(ft)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	if got := do(d, c, "SENTINEL", "get-master-addr-by-name", "redlock"); got != "*2\r\n$8\r\n10.0.0.1\r\n$4\r\n6380\r\n" {
		t.Errorf("get-master-addr-by-name = %q", got)
	}
	if got := do(d, c, "SENTINEL", "masters"); !strings.Contains(got, "master,s_down,o_down") {
		t.Errorf("MASTERS = %q, want the master flagged down", got)
	}
	if got := do(d, c, "SENTINEL", "ckquorum", "redlock"); !strings.HasPrefix(got, "-NOQUORUM") {
		t.Errorf("CKQUORUM = %q", got)
	}
	d.SetDiscovery(&fakeTier{})
	if got := do(d, c, "SENTINEL", "get-master-addr-by-name", "redlock"); got != "*-1\r\n" {
		t.Errorf("get-master-addr-by-name before any proxy = %q", got)
	}
}

// subscriber is a client whose Push hook records what it was sent.
type subscriber struct {
	*Client
	mu  sync.Mutex
	got []string
}

func newSubscriber(d *Dispatcher) *subscriber {
	s := &subscriber{Client: d.NewClient("127.0.0.1:1", "127.0.0.1:2")}
	s.SetHooks(Hooks{Push: func(r Reply) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got = append(s.got, string(AppendReply(nil, r, s.Proto())))
		return true
	}})
	return s
}

func (s *subscriber) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

func TestAnnounceSwitch(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	d.SetDiscovery(threeMembers())
	resp2 := newSubscriber(d)
	resp3 := newSubscriber(d)
	pattern := newSubscriber(d)
	other := newSubscriber(d)
	do(d, resp2.Client, "SUBSCRIBE", "+switch-master", "+replica-reconf-done")
	do(d, resp3.Client, "HELLO", "3")
	do(d, resp3.Client, "SUBSCRIBE", "+switch-master")
	do(d, pattern.Client, "PSUBSCRIBE", "*")
	do(d, other.Client, "SUBSCRIBE", "+sdown")

	old := tier.Member{Addr: "10.0.0.1:6380"}
	nu := tier.Member{Addr: "10.0.0.2:6380"}
	if n := d.AnnounceSwitch(old, nu); n != 3 {
		t.Fatalf("AnnounceSwitch reached %d subscriptions, want 3", n)
	}
	const payload = "redlock 10.0.0.1 6380 10.0.0.2 6380"
	want := map[*subscriber]string{
		resp2:   "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$35\r\n" + payload + "\r\n",
		resp3:   ">3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$35\r\n" + payload + "\r\n",
		pattern: "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$14\r\n+switch-master\r\n$35\r\n" + payload + "\r\n",
	}
	for s, w := range want {
		if got := s.messages(); len(got) != 1 || got[0] != w {
			t.Errorf("client %d got %q, want %q", s.ID, got, w)
		}
	}
	if got := other.messages(); len(got) != 0 {
		t.Errorf("a subscriber of another channel got %q", got)
	}

	// Unsubscribed, reset or gone: no more messages.
	do(d, resp2.Client, "UNSUBSCRIBE")
	do(d, resp3.Client, "RESET")
	d.CloseClient(pattern.Client)
	if n := d.AnnounceSwitch(nu, old); n != 0 {
		t.Fatalf("after unsubscribe, reset and close, AnnounceSwitch reached %d", n)
	}
	if got := d.relay.Names(relay.Channel, ""); len(got) != 1 || got[0] != "+sdown" {
		t.Fatalf("channels still subscribed: %q, want other's only", got)
	}
	if n := d.relay.Count(relay.Pattern, ""); n != 0 {
		t.Fatalf("%d patterns still subscribed, want none", n)
	}
}
