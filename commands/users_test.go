package commands

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
)

// testUsers: an app user limited to its keys, a user with every command but
// no admin, an admin, and one for the script and multi-key dialects.
var testUsers = []User{
	{Name: "orders", Password: "p1", Commands: []string{"LOCK", "UNLOCK", "extend"}, Keys: []string{"~orders:*"}},
	{Name: "all", Password: "p2", Commands: []string{"*"}, Keys: []string{"*"}},
	{Name: "ops", Password: "p3", Commands: []string{"*"}, Keys: []string{"*"}, Admin: true},
	{Name: "lib", Password: "p4", Commands: []string{"EVAL", "EVALSHA", "DEL", "EXISTS", "MLOCK", "MUNLOCK", "WATCH", "GET", "MULTI", "EXEC", "SET"},
		Keys: []string{"orders:*", "lock:[ab]?"}, Scripts: "vote"},
}

// fakeClock is an injected Options.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Add(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// newUsersDispatcher serves over 3 miniredis backends with opts adjusted by
// set (Locker and the ttl bounds are filled in).
func newUsersDispatcher(t testing.TB, logger hclog.Logger, set func(*Options)) *Dispatcher {
	t.Helper()
	if logger == nil {
		logger = redlocktest.Logger(t)
	}
	rl, _ := redlocktest.New(t, 3, redlock.Options{Logger: logger})
	opts := Options{
		Leases: lease.New(lease.Options{Locker: rl, KeepTTL: 30 * time.Second}), MinTTL: 10 * time.Millisecond, MaxTTL: 60 * time.Second,
		MaxWait: 2 * time.Second, Version: "test", Logger: logger,
	}
	set(&opts)
	d := New(opts)
	shutdownAtEnd(t, d)
	return d
}

// loggedIn is a new client of d after a successful AUTH name pass.
func loggedIn(t *testing.T, d *Dispatcher, name, pass string) *Client {
	t.Helper()
	c := d.NewClient("127.0.0.1:1000", "127.0.0.1:6380")
	if got := do(d, c, "AUTH", name, pass); got != "+OK\r\n" {
		t.Fatalf("AUTH %s = %q", name, got)
	}
	return c
}

func noPermCmd(user, cmd string) string {
	return "-NOPERM User " + user + " has no permissions to run the '" + cmd + "' command\r\n"
}

const noPermKey = "-NOPERM No permissions to access a key\r\n"

func TestUserPermissions(t *testing.T) {
	d := newUsersDispatcher(t, nil, func(o *Options) { o.Users = testUsers; o.RequirePass = "root" })
	clients := map[string]*Client{}
	for _, u := range testUsers {
		clients[u.Name] = loggedIn(t, d, u.Name, u.Password)
	}
	clients["default"] = loggedIn(t, d, "default", "root")
	steps := []struct {
		user string
		in   []string
		want string // exact reply, or a prefix ending in "…"
	}{
		// Listed command on a matching key; the same on another key.
		{"orders", []string{"LOCK", "orders:1", "5000"}, "*3\r\n…"},
		{"orders", []string{"lock", "billing:1", "5000"}, noPermKey},
		{"orders", []string{"EXTEND", "billing:1", "t", "5000"}, noPermKey},
		{"orders", []string{"UNLOCK", "orders:2", "t"}, ":0\r\n"},
		// Not listed; admin-only; connection commands always allowed.
		{"orders", []string{"GET", "orders:1"}, noPermCmd("orders", "get")},
		{"orders", []string{"LOCKINFO", "orders:1"}, noPermCmd("orders", "lockinfo")},
		{"orders", []string{"LOCKS"}, noPermCmd("orders", "locks")},
		{"orders", []string{"FLUSHDB"}, noPermCmd("orders", "flushdb")},
		{"orders", []string{"CONFIG", "GET", "*"}, noPermCmd("orders", "config")},
		{"orders", []string{"INFO"}, noPermCmd("orders", "info")},
		{"orders", []string{"PING"}, "+PONG\r\n"},
		{"orders", []string{"ECHO", "x"}, "$1\r\nx\r\n"},
		{"orders", []string{"SELECT", "0"}, "+OK\r\n"},
		{"orders", []string{"CLIENT", "SETNAME", "app"}, "+OK\r\n"},
		{"orders", []string{"CLIENT", "INFO"}, "$…"},
		{"orders", []string{"CLIENT", "LIST"}, noPermCmd("orders", "client|list")},
		{"orders", []string{"COMMAND", "COUNT"}, ":…"},
		{"orders", []string{"TIME"}, "*2\r\n…"},
		{"orders", []string{"nosuch"}, "-ERR unknown command 'nosuch'…"},
		// Every command but no admin.
		{"all", []string{"GET", "billing:1"}, "$-1\r\n"},
		{"all", []string{"INFO", "server"}, "$…"},
		{"all", []string{"LOCKS"}, noPermCmd("all", "locks")},
		{"all", []string{"FLUSHALL"}, noPermCmd("all", "flushall")},
		{"all", []string{"CONFIG", "GET", "*"}, noPermCmd("all", "config")},
		{"all", []string{"CLIENT", "LIST"}, noPermCmd("all", "client|list")},
		{"all", []string{"SCRIPT", "FLUSH"}, noPermCmd("all", "script|flush")},
		{"all", []string{"SCRIPT", "EXISTS", "abc"}, "*1\r\n:0\r\n"},
		// Admin and the requirepass user.
		{"ops", []string{"LOCKS"}, "*…"},
		{"ops", []string{"CLIENT", "LIST"}, "$…"},
		{"ops", []string{"SCRIPT", "FLUSH"}, "+OK\r\n"},
		{"ops", []string{"FLUSHDB"}, "-ERR …"}, // past the user check: refused by allow_flush
		{"default", []string{"LOCKS"}, "*…"},
		{"default", []string{"GET", "any"}, "$-1\r\n"},
		// Every key of a multi-key command; script keys after numkeys.
		{"lib", []string{"DEL", "orders:5", "orders:6"}, ":0\r\n"},
		{"lib", []string{"DEL", "orders:1", "billing:2"}, noPermKey},
		{"lib", []string{"EXISTS", "billing:1"}, noPermKey},
		{"lib", []string{"GET", "lock:a1"}, "$-1\r\n"},
		{"lib", []string{"GET", "lock:c1"}, noPermKey},
		{"lib", []string{"MLOCK", "5000", "orders:7", "billing:7"}, noPermKey},
		{"lib", []string{"MUNLOCK", "tok", "orders:7", "billing:7"}, noPermKey},
		{"lib", []string{"WATCH", "orders:1", "billing:1"}, noPermKey},
		{"lib", []string{"EVAL", "return 1", "1", "billing:1", "orders:1"}, noPermKey},
		{"lib", []string{"EVAL", "return 1", "2", "orders:1", "billing:1"}, noPermKey},
		{"lib", []string{"EVAL", "return 1", "1", "orders:1", "billing:1"}, ":1\r\n"}, // billing:1 is an argument
		{"lib", []string{"EVALSHA", "0000", "1", "billing:1"}, noPermKey},
		// A key built with a literal before a declared key is checked as
		// the literal followed by the key: "{orders:1" is not under orders:*.
		{"lib", []string{"EVAL", "return redis.call('SET', '{' .. KEYS[1] .. '}', ARGV[1])", "1", "orders:1", "v"}, noPermKey},
		{"lib", []string{"EVAL", "return redis.call('SET', KEYS[1] .. ':n', ARGV[1])", "1", "orders:1", "v"}, "+OK\r\n"},
		{"all", []string{"EVAL", "return redis.call('SET', '{' .. KEYS[1] .. '}', ARGV[1])", "1", "orders:1", "v"}, "+OK\r\n"},
		{"lib", []string{"EVALSHA", "0000", "1", "orders:1"}, "-NOSCRIPT…"},
		{"lib", []string{"EVAL", "return 1", "x", "billing:1"}, "-ERR value is not an integer or out of range\r\n"}, // bad numkeys: no keys, the handler refuses
		{"lib", []string{"EVAL", "return 1", "5", "billing:1"}, "-ERR Number of keys can't be greater than number of args\r\n"},
		{"lib", []string{"SET", "orders:9", "v", "PX", "5000", "NX"}, "+OK\r\n"},
		{"lib", []string{"SET", "billing:9", "v", "PX", "5000", "NX"}, noPermKey},
		// Inside MULTI, checked when queued, as Redis does.
		{"lib", []string{"WATCH", "orders:9"}, "+OK\r\n"},
		{"lib", []string{"GET", "orders:9"}, "$1\r\nv\r\n"},
		{"lib", []string{"MULTI"}, "+OK\r\n"},
		{"lib", []string{"DEL", "orders:9"}, "+QUEUED\r\n"},
		{"lib", []string{"DEL", "billing:9"}, noPermKey},
		{"lib", []string{"EXEC"}, "-EXECABORT…"},
		{"lib", []string{"WATCH", "orders:9"}, "+OK\r\n"},
		{"lib", []string{"GET", "orders:9"}, "$1\r\nv\r\n"},
		{"lib", []string{"MULTI"}, "+OK\r\n"},
		{"lib", []string{"PEXPIRE", "orders:9", "100"}, noPermCmd("lib", "pexpire")},
		{"lib", []string{"DISCARD"}, noPermCmd("lib", "discard")},
		{"lib", []string{"EXEC"}, "-EXECABORT…"},
		{"lib", []string{"WATCH", "orders:9"}, "+OK\r\n"},
		{"lib", []string{"GET", "orders:9"}, "$1\r\nv\r\n"},
		{"lib", []string{"MULTI"}, "+OK\r\n"},
		{"lib", []string{"DEL", "orders:9"}, "+QUEUED\r\n"},
		{"lib", []string{"EXEC"}, "*1\r\n:1\r\n"},
	}
	for _, s := range steps {
		got := do(d, clients[s.user], s.in...)
		if want, prefix := strings.CutSuffix(s.want, "…"); prefix && !strings.HasPrefix(got, want) || !prefix && got != s.want {
			t.Errorf("%s: %q = %q, want %q", s.user, s.in, got, s.want)
		}
	}
	if got := do(d, clients["ops"], "CLIENT", "LIST"); !strings.Contains(got, "user=orders") || !strings.Contains(got, "user=default") {
		t.Errorf("CLIENT LIST does not name the users: %q", got)
	}
}

func TestUserAuth(t *testing.T) {
	d := newUsersDispatcher(t, nil, func(o *Options) { o.Users = testUsers; o.AuthFailLimit = 100 })
	const wrongPass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	c := d.NewClient("127.0.0.1:1000", "127.0.0.1:6380")
	steps := []struct {
		in   []string
		want string
	}{
		// Users without requirepass: authentication is required.
		{[]string{"PING"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "nosuch", "p1"}, wrongPass},
		{[]string{"AUTH", "orders", "wrong"}, wrongPass},
		{[]string{"AUTH", "p1"}, wrongPass}, // no default user
		{[]string{"AUTH", "ORDERS", "p1"}, wrongPass},
		{[]string{"HELLO", "3", "AUTH", "orders", "wrong"}, wrongPass},
		{[]string{"PING"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "orders", "p1"}, "+OK\r\n"},
		{[]string{"LOCK", "orders:1", "5000"}, "*3\r\n"},
		// A failed AUTH keeps the current user.
		{[]string{"AUTH", "ops", "wrong"}, wrongPass},
		{[]string{"CLIENT", "INFO"}, "user=orders"},
		{[]string{"AUTH", "ops", "p3"}, "+OK\r\n"},
		{[]string{"LOCKS"}, "*"},
		// RESET logs out.
		{[]string{"RESET"}, "+RESET\r\n"},
		{[]string{"PING"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"LOCKS"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"HELLO", "3", "AUTH", "orders", "p1", "SETNAME", "app"}, "%7\r\n"},
		{[]string{"LOCKS"}, noPermCmd("orders", "locks")},
		{[]string{"CLIENT", "INFO"}, "user=orders"},
	}
	for _, s := range steps {
		if got := do(d, c, s.in...); !strings.Contains(got, s.want) {
			t.Fatalf("%q = %q, want it to contain %q", s.in, got, s.want)
		}
	}
}

func TestUserDefaultOverridesRequirePass(t *testing.T) {
	def := User{Name: "default", Password: "new", Commands: []string{"LOCK"}, Keys: []string{"app:*"}}
	d := newUsersDispatcher(t, nil, func(o *Options) { o.RequirePass = "old"; o.Users = []User{def} })
	c := d.NewClient("127.0.0.1:1000", "127.0.0.1:6380")
	if got := do(d, c, "AUTH", "old"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("AUTH with requirepass when a default block exists = %q", got)
	}
	if got := do(d, c, "AUTH", "new"); got != "+OK\r\n" {
		t.Fatalf("AUTH new = %q", got)
	}
	if got := do(d, c, "LOCK", "other", "5000"); got != noPermKey {
		t.Fatalf("default block's key patterns not applied: %q", got)
	}
}

func TestNoUsersNoPassword(t *testing.T) {
	d := newUsersDispatcher(t, nil, func(o *Options) {})
	c := d.NewClient("127.0.0.1:1000", "127.0.0.1:6380")
	for _, in := range [][]string{{"LOCKS"}, {"CLIENT", "LIST"}, {"AUTH", "default", "x"}, {"SCRIPT", "FLUSH"}} {
		if got := do(d, c, in...); strings.HasPrefix(got, "-") {
			t.Errorf("%q without users = %q", in, got)
		}
	}
	if got := do(d, c, "AUTH", "x"); got != "-"+string(errAuthNoPass)+"\r\n" {
		t.Errorf("AUTH x without a password = %q", got)
	}
}

func TestAuthRateLimit(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	d := newUsersDispatcher(t, nil, func(o *Options) { o.Users = testUsers; o.Now = clock.Now })
	c := d.NewClient("10.0.0.1:5000", "127.0.0.1:6380")
	other := d.NewClient("10.0.0.2:5000", "127.0.0.1:6380")
	const wrongPass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	compared := 0
	d.users.compare = func(got, want *[32]byte) bool { compared++; return constantTimeEqual(got, want) }
	step := defaultAuthFailWindow / (2 * defaultAuthFailLimit)
	for i := range defaultAuthFailLimit {
		if got := do(d, c, "AUTH", "orders", "guess"+strconv.Itoa(i)); got != wrongPass {
			t.Fatalf("failure %d: %q", i, got)
		}
		clock.Add(step)
	}
	// Blocked: even the right password is refused, without a comparison.
	before := compared
	for _, in := range [][]string{{"AUTH", "orders", "p1"}, {"HELLO", "3", "AUTH", "orders", "p1"}} {
		if got := do(d, c, in...); got != wrongPass {
			t.Fatalf("%q while blocked = %q", in, got)
		}
	}
	if compared != before {
		t.Fatalf("a blocked AUTH compared passwords")
	}
	if got := do(d, c, "PING"); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("PING after blocked AUTH = %q", got)
	}
	// Same network, another connection: blocked too. Another address: not.
	if got := do(d, d.NewClient("10.0.0.1:5001", ""), "AUTH", "orders", "p1"); got != wrongPass {
		t.Fatalf("same address, new connection = %q", got)
	}
	if got := do(d, other, "AUTH", "orders", "p1"); got != "+OK\r\n" {
		t.Fatalf("another address = %q", got)
	}
	// The block ends when the first failure is a window old.
	clock.Add(defaultAuthFailWindow - defaultAuthFailLimit*step - time.Millisecond)
	if got := do(d, c, "AUTH", "orders", "p1"); got != wrongPass {
		t.Fatalf("just before the window passed = %q", got)
	}
	clock.Add(time.Millisecond)
	if got := do(d, c, "AUTH", "orders", "p1"); got != "+OK\r\n" {
		t.Fatalf("after the window = %q", got)
	}
	// One more failure now blocks again at once (the others are recent).
	if got := do(d, c, "AUTH", "orders", "again"); got != wrongPass {
		t.Fatal(got)
	}
	if got := do(d, c, "AUTH", "orders", "p1"); got != wrongPass {
		t.Fatalf("after a fifth recent failure = %q", got)
	}
	if got := do(d, c, "LOCK", "orders:1", "5000"); !strings.HasPrefix(got, "*3") {
		t.Fatalf("the user logged in before stays logged in: %q", got)
	}
}

func TestAuthLimiterBounded(t *testing.T) {
	l := newAuthLimiter(2, time.Second)
	l.maxEntries = 3
	now := time.Unix(1_700_000_000, 0)
	for i := range 10 {
		l.fail("192.0.2."+strconv.Itoa(i)+":1", now)
	}
	if n := l.size(); n != 4 { // 3 networks and the shared overflow entry
		t.Fatalf("tracked %d networks, want 3 + overflow", n)
	}
	if !l.blocked("192.0.2.99:1", now) || l.blocked("192.0.2.0:1", now) {
		t.Fatal("overflowing networks are not limited together")
	}
	now = now.Add(time.Second)
	l.fail("192.0.2.200:1", now)
	if n := l.size(); n != 1 {
		t.Fatalf("after a window, %d networks tracked, want only the new one", n)
	}
	// IPv6 sources are limited by /64.
	l.fail("[2001:db8::1]:1", now)
	l.fail("[2001:db8::2]:1", now)
	if !l.blocked("[2001:db8::ffff]:9", now) || l.blocked("[2001:db8:0:1::1]:9", now) {
		t.Fatal("IPv6 is not limited by /64")
	}
	if off := newAuthLimiter(-1, 0); off.fail("192.0.2.1:1", now) || off.blocked("192.0.2.1:1", now) {
		t.Fatal("a negative limit does not switch the limiter off")
	}
}

// TestAuthTimingUnknownUser: an unknown user and a known user with a wrong
// password take the same path (one sha256, one constant-time comparison),
// and, measured, about the same time.
func TestAuthTimingUnknownUser(t *testing.T) {
	d := newUsersDispatcher(t, hclog.NewNullLogger(), func(o *Options) { o.Users = testUsers; o.AuthFailLimit = -1 })
	var wants []*[32]byte
	d.users.compare = func(got, want *[32]byte) bool {
		wants = append(wants, want)
		return constantTimeEqual(got, want)
	}
	c := d.NewClient("127.0.0.1:1", "")
	do(d, c, "AUTH", "nosuch", "wrong")
	do(d, c, "AUTH", "orders", "wrong")
	do(d, c, "HELLO", "2", "AUTH", "nosuch", "wrong")
	if len(wants) != 3 || wants[0] != &d.users.dummy || wants[1] != &d.users.accounts["orders"].sum || wants[2] != &d.users.dummy {
		t.Fatalf("comparisons: %v, want dummy, orders, dummy", wants)
	}
	if d.users.dummy == d.users.accounts["orders"].sum || d.users.check([]byte("nosuch"), nil) != nil {
		t.Fatal("the dummy hash matches something")
	}
	d.users.compare = constantTimeEqual

	const tries = 2000
	ctx := context.Background()
	unknown, known := args("AUTH", "nosuch", "wrong-password"), args("AUTH", "orders", "wrong-password")
	du, dk := make([]time.Duration, 0, tries), make([]time.Duration, 0, tries)
	for i := range 2 * tries {
		a, into := unknown, &du
		if i%2 == 1 {
			a, into = known, &dk
		}
		start := time.Now()
		d.Do(ctx, c, a)
		*into = append(*into, time.Since(start))
	}
	slices.Sort(du)
	slices.Sort(dk)
	mu, mk := du[tries/2], dk[tries/2]
	t.Logf("median AUTH: unknown user %v, known user with a wrong password %v", mu, mk)
	if mu > 2*mk+20*time.Microsecond || mk > 2*mu+20*time.Microsecond {
		t.Errorf("median AUTH unknown user %v vs wrong password %v: more than 2× apart", mu, mk)
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, key string
		want         bool
	}{
		{"*", "", true},
		{"*", "a/b:c", true},
		{"orders:*", "orders:1", true},
		{"orders:*", "orders:", true},
		{"orders:*", "orders/1", false},
		{"orders:*", "billing:1", false},
		{"orders*", "orders/x/y", true}, // * crosses '/', unlike path.Match
		{"o?ders:1", "orders:1", true},
		{"o?ders:1", "oders:1", false},
		{"lock:[ab]", "lock:a", true},
		{"lock:[ab]", "lock:c", false},
		{"lock:[^ab]", "lock:c", true},
		{"lock:[a-c]x", "lock:bx", true},
		{"lock:[c-a]x", "lock:bx", true},
		{"lock:[a-c]x", "lock:dx", false},
		{`lock:\*`, "lock:*", true},
		{`lock:\*`, "lock:x", false},
		{`lock:[\]]`, "lock:]", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"*:*:*", "a:b:c", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"", "", true},
		{"", "x", false},
		{"[abc", "b", true},
	}
	for _, tt := range tests {
		if got := globMatch(tt.pattern, []byte(tt.key)); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pattern, tt.key, got, tt.want)
		}
	}
	// No exponential backtracking on a hostile key.
	start := time.Now()
	globMatch("*a*a*a*a*a*a*a*a*b", []byte(strings.Repeat("a", 100_000)))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("pathological glob took %v", d)
	}
}

// TestKeySpecs: every row that names a key position says where its keys
// end, and the multi-key rows reach the last argument.
func TestKeySpecs(t *testing.T) {
	for name, want := range map[string][2]int{"LOCK": {1, 1}, "DEL": {1, 4}, "MLOCK": {2, 4}, "WATCH": {1, 4}, "PING": {0, 0}} {
		first, last := commandIndex[name].keyRange(5)
		if [2]int{first, last} != want {
			t.Errorf("%s keyRange(5) = %d, %d; want %v", name, first, last, want)
		}
	}
	if got := scriptKeys(args("EVAL", "s", "2", "a", "b", "c")); len(got) != 2 || string(got[1]) != "b" {
		t.Errorf("scriptKeys = %q", got)
	}
	for _, bad := range []string{"-1", "x", "4"} {
		if got := scriptKeys(args("EVAL", "s", bad, "a", "b", "c")); got != nil {
			t.Errorf("scriptKeys with numkeys %s = %q", bad, got)
		}
	}
}

// size is the number of networks l tracks.
func (l *authLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.fails)
}

// TestUserScripts: a user limited to key patterns runs only recognised
// scripts unless its block says scripts = "vote"; a user of every key
// follows the dispatcher.
func TestUserScripts(t *testing.T) {
	a, _ := newAuthState("", []User{
		{Name: "limited", Password: "p", Commands: []string{"*"}, Keys: []string{"app:*"}},
		{Name: "granted", Password: "p", Commands: []string{"*"}, Keys: []string{"app:*"}, Scripts: "vote"},
		{Name: "all", Password: "p", Commands: []string{"*"}, Keys: []string{"*"}},
		{Name: "allrec", Password: "p", Commands: []string{"*"}, Keys: []string{"*"}, Scripts: "recognised"},
	})
	for name, want := range map[string]bool{"limited": true, "granted": false, "all": false, "allrec": true} {
		if got := a.accounts[name].recognisedOnly; got != want {
			t.Errorf("%s: recognisedOnly = %v, want %v", name, got, want)
		}
	}
}
