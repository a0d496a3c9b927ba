package commands

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
)

// Proxy-level users. requirepass is the password of the user "default",
// who may run everything; user blocks add users limited to a list of
// commands and key patterns, and a user "default" block replaces the
// requirepass user. Any configured credential makes authentication
// required. The backends' own credentials live in the backend URLs and
// are never taken from, or shown to, clients.

// User is one proxy-level user; cmd builds it from conf.User.
type User struct {
	Name     string
	Password string
	Commands []string // allowed command names in any case; "*" for all
	Keys     []string // Redis glob patterns (~orders:* or orders:*); "*" for all
	Admin    bool     // may run admin commands (LOCKS, LOCKADMIN, FLUSHDB, CONFIG, CLIENT LIST, SCRIPT FLUSH)
	// Scripts: "recognised" runs only the user's scripts recognised as
	// lock operations; "vote" runs the others by vote too (as the
	// dispatcher's RecognisedOnly allows); "": "recognised" for a user
	// limited to key patterns, else as the dispatcher says.
	Scripts string
}

// account is a User compiled for the dispatcher: hashed password, command
// set, patterns. It is immutable once built.
type account struct {
	name         string
	sum          [32]byte // sha256 of the password
	allCommands  bool
	commands     map[string]bool // upper-case names
	allKeys      bool
	keys         []string // patterns without the leading "~"
	admin        bool
	unrestricted bool // every command, every key, admin: no checks needed
	// recognisedOnly: only the user's scripts recognised as lock
	// operations run (User.Scripts).
	recognisedOnly bool
}

// authState is the dispatcher's set of users.
type authState struct {
	required bool                // some credential is configured: clients start unauthenticated
	accounts map[string]*account // by exact name
	dummy    [32]byte            // compared with when the name is unknown; matches no password
	// compare is the one comparison every AUTH makes, known user or not
	// (a field so a test can see that both paths take it).
	compare func(got, want *[32]byte) bool
}

func constantTimeEqual(got, want *[32]byte) bool {
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// newAuthState compiles requirepass and the users; unknown command names
// in a user's list are logged by the caller (they can never match).
func newAuthState(requirePass string, users []User) (authState, []string) {
	a := authState{accounts: map[string]*account{}, compare: constantTimeEqual}
	if _, err := rand.Read(a.dummy[:]); err != nil {
		panic("commands: crypto/rand: " + err.Error())
	}
	var unknown []string
	if requirePass != "" {
		a.accounts["default"] = &account{name: "default", sum: sha256.Sum256([]byte(requirePass)),
			allCommands: true, allKeys: true, admin: true, unrestricted: true}
	}
	for _, u := range users {
		acc := &account{name: u.Name, sum: sha256.Sum256([]byte(u.Password)), admin: u.Admin, commands: map[string]bool{}}
		for _, name := range u.Commands {
			name = strings.ToUpper(strings.TrimSpace(name))
			switch {
			case name == "*":
				acc.allCommands = true
			case commandIndex[name] == nil:
				unknown = append(unknown, u.Name+": "+name)
			default:
				acc.commands[name] = true
			}
		}
		for _, p := range u.Keys {
			p = strings.TrimPrefix(p, "~")
			if p == "*" {
				acc.allKeys = true
			}
			acc.keys = append(acc.keys, p)
		}
		acc.unrestricted = acc.allCommands && acc.allKeys && acc.admin
		acc.recognisedOnly = u.Scripts == "recognised" || (u.Scripts == "" && !acc.allKeys)
		a.accounts[u.Name] = acc
	}
	a.required = len(a.accounts) > 0
	return a, unknown
}

// check returns the account whose name and password match, or nil. Every
// call hashes the password and makes one constant-time comparison, against
// the dummy hash when the name is unknown, so a wrong name and a wrong
// password take the same time. name nil is "default" (AUTH password).
func (a *authState) check(name, pass []byte) *account {
	sum := sha256.Sum256(pass)
	acc := a.lookup(name)
	want := &a.dummy
	if acc != nil {
		want = &acc.sum
	}
	ok := a.compare(&sum, want)
	if acc == nil || !ok {
		return nil
	}
	return acc
}

// lookup finds an account by name; "default" in any case, as before users
// existed.
func (a *authState) lookup(name []byte) *account {
	if name == nil {
		return a.accounts["default"]
	}
	if acc := a.accounts[string(name)]; acc != nil {
		return acc
	}
	if strings.EqualFold(string(name), "default") {
		return a.accounts["default"]
	}
	return nil
}

// permit checks a command of an authenticated, restricted user against
// its row: the command (and the Admin flag), then every key argument.
func permit(u *account, cmd *Command, args, keys [][]byte) Reply {
	if cmd.Flags&AnyUser == 0 {
		if (!u.allCommands && !u.commands[cmd.Name]) || (cmd.Flags&Admin != 0 && !u.admin) {
			return Errorf(errNoPermCmd, u.name, cmd.lower)
		}
	}
	if u.allKeys {
		return nil
	}
	if cmd.keys != nil {
		for _, k := range keys {
			if !u.keyAllowed(k) {
				return errNoPermKey
			}
		}
		return nil
	}
	first, last := cmd.keyRange(len(args))
	for i := first; i > 0 && i <= last; i++ {
		if !u.keyAllowed(args[i]) {
			return errNoPermKey
		}
	}
	return nil
}

// requireAdmin answers NOPERM for an admin-only subcommand (CLIENT LIST,
// SCRIPT FLUSH) when the client's user is not an admin; nil otherwise.
func requireAdmin(c *Client, name string) Reply {
	if u := c.user.Load(); u != nil && !u.admin {
		return Errorf(errNoPermCmd, u.name, name)
	}
	return nil
}

func (u *account) keyAllowed(key []byte) bool {
	for _, p := range u.keys {
		if globMatch(p, key) {
			return true
		}
	}
	return false
}

// globMatch is Redis's glob, as ACL ~patterns use it (relay.GlobMatch).
func globMatch(pattern string, key []byte) bool { return relay.GlobMatch(pattern, string(key)) }
