package commands

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
)

// Lock libraries send Lua scripts. The proxy never runs a client's script
// on the backends: it recognises the scripts of known libraries (catalog.go)
// by the SHA1 of their exact bytes, or by the SHA1 of their
// whitespace-normalised text, and carries out what each one means as a
// quorum operation, answering in that library's own convention.

const (
	errNoScript      = Error("NOSCRIPT No matching script. Please use EVAL.")
	errUnknownScript = "ERR redlock-proxy runs only the lock scripts of known libraries (redsync, redis-py Lock, node-redlock, pottery, aioredlock, redlock-rb, RedLock.net, redlock-php); this script (sha1 %s) is not one of them: see docs/compatibility.md"
	maxScriptAliases = 4096
)

// scriptFunc carries out one script's meaning.
type scriptFunc func(d *Dispatcher, ctx context.Context, keys, argv []string) Reply

// script is one catalog row: a library's script, how to recognise it and
// what it means.
type script struct {
	library     string
	role        string
	sha1s       []string // of the exact bytes each known version sends
	fingerprint string   // sha1 of the whitespace-normalised text
	minKeys     int
	minArgs     int
	run         scriptFunc
}

// scriptIndex finds catalog rows by exact SHA1 and by fingerprint.
type scriptIndex struct {
	bySHA         map[string]*script
	byFingerprint map[string]*script

	mu      sync.Mutex
	aliases map[string]*script // sha1 of texts recognised by fingerprint
}

func newScriptIndex(rows []script) *scriptIndex {
	ix := &scriptIndex{bySHA: map[string]*script{}, byFingerprint: map[string]*script{}}
	for i := range rows {
		s := &rows[i]
		for _, sha := range s.sha1s {
			if _, dup := ix.bySHA[sha]; dup {
				panic("commands: duplicate script sha1 " + sha)
			}
			ix.bySHA[sha] = s
		}
		if s.fingerprint != "" {
			if _, dup := ix.byFingerprint[s.fingerprint]; dup {
				panic("commands: duplicate script fingerprint " + s.fingerprint)
			}
			ix.byFingerprint[s.fingerprint] = s
		}
	}
	return ix
}

// bySource recognises a script text, remembering a fingerprint match under
// the text's own SHA1 so a later EVALSHA of it works.
func (ix *scriptIndex) bySource(src []byte) (*script, string) {
	sha := sha1Hex(src)
	if s := ix.bySHA1(sha); s != nil {
		return s, sha
	}
	s := ix.byFingerprint[fingerprint(src)]
	if s != nil {
		ix.mu.Lock()
		if ix.aliases == nil || len(ix.aliases) >= maxScriptAliases {
			ix.aliases = map[string]*script{}
		}
		ix.aliases[sha] = s
		ix.mu.Unlock()
	}
	return s, sha
}

func (ix *scriptIndex) bySHA1(sha string) *script {
	sha = strings.ToLower(sha)
	if s := ix.bySHA[sha]; s != nil {
		return s
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.aliases[sha]
}

func (ix *scriptIndex) flush() {
	ix.mu.Lock()
	ix.aliases = nil
	ix.mu.Unlock()
}

func sha1Hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// fingerprint is the SHA1 of src with every run of ASCII white space
// replaced by one space, trimmed: versions and builds of a library change
// indentation and line endings, not tokens.
func fingerprint(src []byte) string {
	out := make([]byte, 0, len(src))
	space := false
	for _, c := range src {
		switch c {
		case ' ', '\t', '\r', '\n', '\v', '\f':
			space = true
			continue
		}
		if space && len(out) > 0 {
			out = append(out, ' ')
		}
		space = false
		out = append(out, c)
	}
	return sha1Hex(out)
}

// EVAL script numkeys [key ...] [arg ...]
func (d *Dispatcher) eval(ctx context.Context, c *Client, args [][]byte) Reply {
	s, sha := d.scripts.bySource(args[1])
	if s == nil {
		return Errorf(errUnknownScript, sha)
	}
	return d.runScript(ctx, s, args[2:])
}

// EVALSHA sha1 numkeys [key ...] [arg ...]
func (d *Dispatcher) evalsha(ctx context.Context, c *Client, args [][]byte) Reply {
	s := d.scripts.bySHA1(string(args[1]))
	if s == nil {
		return errNoScript
	}
	return d.runScript(ctx, s, args[2:])
}

// scriptKeys is the key list of EVAL and EVALSHA (script numkeys key …),
// for the users' key patterns: nil when numkeys is not a count that fits,
// and the handler then refuses the command before any I/O.
func scriptKeys(args [][]byte) [][]byte {
	if len(args) < 3 {
		return nil
	}
	n, err := strconv.Atoi(string(args[2]))
	if err != nil || n < 0 || n > len(args)-3 {
		return nil
	}
	return args[3 : 3+n]
}

// runScript splits numkeys, keys and argv and runs the script's meaning.
func (d *Dispatcher) runScript(ctx context.Context, s *script, rest [][]byte) Reply {
	numKeys, err := strconv.Atoi(string(rest[0]))
	switch {
	case err != nil:
		return errNotInteger
	case numKeys < 0:
		return Error("ERR Number of keys can't be negative")
	case numKeys > len(rest)-1:
		return Error("ERR Number of keys can't be greater than number of args")
	}
	keys, r := d.keyList(rest[1 : 1+numKeys])
	if r != nil {
		return r
	}
	argv := make([]string, len(rest)-1-numKeys)
	for i, a := range rest[1+numKeys:] {
		if r := d.checkValue(a); r != nil {
			return r
		}
		argv[i] = string(a)
	}
	if len(keys) < s.minKeys || len(argv) < s.minArgs {
		return Errorf("ERR the %s %s script needs %d keys and %d arguments", s.library, s.role, s.minKeys, s.minArgs)
	}
	return s.run(d, ctx, keys, argv)
}

// SCRIPT LOAD script | EXISTS sha1 [sha1 ...] | FLUSH [ASYNC|SYNC] | KILL
func (d *Dispatcher) scriptCmd(ctx context.Context, c *Client, args [][]byte) Reply {
	sub := strings.ToUpper(string(args[1]))
	switch {
	case sub == "LOAD" && len(args) == 3:
		s, sha := d.scripts.bySource(args[2])
		if s == nil {
			return Errorf(errUnknownScript, sha)
		}
		return BulkString(sha)
	case sub == "EXISTS" && len(args) >= 3:
		out := make(Array, len(args)-2)
		for i, sha := range args[2:] {
			out[i] = boolInt(d.scripts.bySHA1(string(sha)) != nil)
		}
		return out
	case sub == "FLUSH" && len(args) <= 3:
		if r := requireAdmin(c, "script|flush"); r != nil {
			return r
		}
		d.scripts.flush()
		return OK
	case sub == "KILL" && len(args) == 2:
		return Error("NOTBUSY No scripts in execution right now.")
	case sub == "LOAD" || sub == "EXISTS" || sub == "FLUSH" || sub == "KILL":
		return Errorf(errWrongArity, "script|"+strings.ToLower(sub))
	}
	return Errorf(errUnknownSubcmd, args[1], "SCRIPT")
}
