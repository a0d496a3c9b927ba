package script

import (
	"errors"
	"slices"
	"strings"
)

// A script's first line may be a shebang (Redis 7: "#!lua flags=f1,f2"),
// which takes it out of Redis's compatibility mode: its flags, not what
// it calls, then say whether it may write. Without no-writes, Redis
// takes it as a script that writes and refuses it under EVAL_RO and
// EVALSHA_RO ("Can not execute a script with write flag using *_ro
// command.") whatever it calls; with no-writes, it refuses every write
// the script tries, under EVAL as under EVAL_RO.

// shebangFlags are the flags Redis 7 knows (scripts_flags_def).
var shebangFlags = []string{"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"}

// ShebangFlags returns the flags of src's shebang line, and whether it
// has one. A shebang Redis 7 refuses (its engine is not lua, an option
// other than flags=, a flag it does not know, no line after it) is an
// error whose text is Redis's, without the "ERR " of its reply. The line
// is split into words as Redis splits it (sdssplitargs: quotes and their
// escapes), so that the flags are the ones the backend will read.
func ShebangFlags(src string) (flags []string, has bool, err error) {
	if !strings.HasPrefix(src, "#!") {
		return nil, false, nil
	}
	line, _, found := strings.Cut(src, "\n")
	if !found || strings.IndexByte(line, 0) >= 0 { // Redis looks for the newline with strchr
		return nil, true, errors.New("Invalid script shebang")
	}
	parts, ok := splitArgs(line)
	if !ok {
		return nil, true, errors.New("Invalid engine in script shebang")
	}
	if parts[0] != "#!lua" {
		return nil, true, errors.New("Unexpected engine in script shebang: " + parts[0])
	}
	for _, p := range parts[1:] {
		list, isFlags := strings.CutPrefix(p, "flags=")
		if !isFlags {
			return nil, true, errors.New("Unknown lua shebang option: " + p)
		}
		if list == "" {
			continue
		}
		for _, f := range strings.Split(list, ",") {
			if !slices.Contains(shebangFlags, f) {
				return nil, true, errors.New("Unexpected flag in script shebang: " + f)
			}
			flags = append(flags, f)
		}
	}
	return flags, true, nil
}

// NoWrites reports whether s's shebang declares the no-writes flag: Redis
// then refuses any write it tries, so it needs no clamp.
func (s *Script) NoWrites() bool {
	flags, _, err := ShebangFlags(s.src)
	return err == nil && slices.Contains(flags, "no-writes")
}

// DeclaresWrites reports whether s has a shebang without the no-writes
// flag (or one Redis refuses): Redis takes it as a script that writes,
// and refuses to run it under EVAL_RO or EVALSHA_RO, whatever it calls.
func (s *Script) DeclaresWrites() bool {
	flags, has, err := ShebangFlags(s.src)
	return has && (err != nil || !slices.Contains(flags, "no-writes"))
}

// splitArgs splits line into words as Redis's sdssplitargs does: words
// apart by blanks; "…" with the escapes \xHH, \n, \r, \t, \b, \a and \c
// (c), '…' with \' only; a closing quote followed by a blank or the end.
// It reports false where sdssplitargs fails (an unclosed quote, a quote
// followed by more of the word). A NUL ends the line, as in C.
func splitArgs(line string) (words []string, ok bool) {
	if i := strings.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	at := func(i int) byte { // 0 past the end, as C's terminator
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	isSpace := func(c byte) bool { // C's isspace
		return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
	}
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i >= len(line) {
			return words, true
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			c := at(i)
			switch {
			case inq:
				switch {
				case c == '\\' && at(i+1) == 'x' && isHex(at(i+2)) && isHex(at(i+3)):
					cur = append(cur, unhex(at(i+2))<<4|unhex(at(i+3)))
					i += 3
				case c == '\\' && at(i+1) != 0:
					i++
					e := at(i)
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					cur = append(cur, e)
				case c == '"':
					if n := at(i + 1); n != 0 && !isSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			case insq:
				switch {
				case c == '\\' && at(i+1) == '\'':
					i++
					cur = append(cur, '\'')
				case c == '\'':
					if n := at(i + 1); n != 0 && !isSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if at(i) != 0 {
				i++
			}
		}
		words = append(words, string(cur))
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// splitShebang splits a script's "#!" line (with its newline) from its
// body.
func splitShebang(src string) (shebang, body string) {
	if !strings.HasPrefix(src, "#!") {
		return "", src
	}
	i := strings.IndexByte(src, '\n')
	if i < 0 {
		return src + "\n", ""
	}
	return src[:i+1], src[i+1:]
}
