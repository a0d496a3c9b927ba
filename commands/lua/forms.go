package lua

import "strings"

// Some commands of the allow-list run alike on every backend in some
// forms only: XADD with the id * takes it from each backend's clock, an
// approximate trim (~) cuts where each backend's stream nodes end, COPY
// … DB reaches another database, SORT … BY or GET reads keys named by
// patterns. Their forms are checked on every call: sent as a command,
// on its arguments; in a script, on the literals the analysis sees,
// where an argument that is not a literal in a place that decides the
// form is refused (it could be the * or the DB).

// tok is one argument of a call as the form check sees it: known when it
// is a literal (or sent as a command), with its text.
type tok struct {
	s     string
	known bool
}

// formOf checks the form of a call of name. toks are the arguments after
// the name; more: an unknown number of unknown arguments follows (a
// script's unpack(ARGV) last). It returns why the form cannot run by
// vote ("" when it can) and, for SORT … STORE, the position (1 = the
// first argument after the name) of the key STORE names (0: none).
func formOf(name string, toks []tok, more bool) (why string, store int) {
	at := func(i int) (tok, bool) {
		if i < len(toks) {
			return toks[i], true
		}
		return tok{}, more
	}
	switch name {
	case "XADD", "XTRIM":
		return streamForm(name, at), 0
	case "COPY":
		for i := 2; ; i++ {
			t, ok := at(i)
			switch {
			case !ok:
				return "", 0
			case !t.known:
				return "in a script run by vote, COPY's options must be string literals (an argument could be DB)", 0
			case strings.EqualFold(t.s, "DB"):
				return "COPY with DB reaches another database", 0
			}
		}
	case "SORT", "SORT_RO":
		return sortForm(name, at)
	}
	return "", 0
}

// streamForm checks the options of XADD (key [NOMKSTREAM] [MAXLEN|MINID
// [=|~] n] [LIMIT c] id field value …) and XTRIM (key MAXLEN|MINID [=|~]
// n [LIMIT c]), in any order as Redis parses them: the trim must be
// exact, and XADD's id given (<ms>-<seq> or <ms>-*), not *.
func streamForm(name string, at func(int) (tok, bool)) string {
	literals := "in a script run by vote, " + name + "'s options must be string literals (an argument could be ~)"
	if name == "XADD" {
		literals = "in a script run by vote, XADD's options and id must be string literals (an argument could be ~ or the id *)"
	}
	for i := 1; ; {
		t, ok := at(i)
		switch {
		case !ok:
			return "" // no id or too few arguments: Redis refuses the call
		case !t.known:
			return literals
		}
		switch strings.ToUpper(t.s) {
		case "NOMKSTREAM":
			i++
		case "LIMIT":
			i += 2
		case "MAXLEN", "MINID":
			m, ok := at(i + 1)
			switch {
			case ok && !m.known:
				return literals
			case ok && m.s == "~":
				return name + " with ~ trims where each backend's stream nodes end, which its configuration and history decide: trim exactly (= or no modifier)"
			case ok && m.s == "=":
				i++
			}
			i += 2 // the strategy and its threshold
		case "*":
			if name == "XADD" {
				return "XADD with the id * takes its id from each backend's clock: give it as <ms>-<seq> or <ms>-*"
			}
			return ""
		default:
			return "" // XADD's id; for XTRIM, Redis refuses the option
		}
	}
}

// sortForm checks SORT key [BY p] [LIMIT o c] [GET p …] [ASC|DESC]
// [ALPHA] [STORE dst], stepping over the arguments as Redis's parser
// does.
func sortForm(name string, at func(int) (tok, bool)) (why string, store int) {
	alpha := false
	for i := 1; ; i++ {
		t, ok := at(i)
		switch {
		case !ok:
			if alpha && store > 0 {
				return "SORT with ALPHA and STORE orders by each backend's locale (strcoll) and would store different lists where the locales differ: sort ALPHA without STORE, whose reply the vote compares", 0
			}
			return "", store
		case !t.known:
			return "in a script run by vote, " + name + "'s options must be string literals (an argument could be BY or GET)", 0
		}
		switch strings.ToUpper(t.s) {
		case "BY", "GET":
			return name + " with BY or GET reads keys named by patterns, which the call does not declare", 0
		case "LIMIT":
			i += 2
		case "ALPHA":
			alpha = true
		case "STORE":
			if _, ok := at(i + 1); ok && name == "SORT" {
				i++
				store = i + 1 // toks[0] is position 1
			}
		}
	}
}

// sortStore is the position in args (the name at 0) of the key SORT's
// STORE names, 0 when none: Redis's own walk, which steps over LIMIT's
// two arguments and BY's and GET's one.
func sortStore(args [][]byte) int {
	store := 0
	for i := 2; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "LIMIT":
			i += 2
		case "BY", "GET":
			i++
		case "STORE":
			if i+1 < len(args) {
				store = i + 1
			}
			i++
		}
	}
	return store
}

// Form says why this call (args[0] the name) of a command of
// KeyCommands cannot run by vote, "" when it can.
func (c KeyCommand) Form(args [][]byte) string {
	toks := make([]tok, len(args)-1)
	for i, a := range args[1:] {
		toks[i] = tok{s: string(a), known: true}
	}
	why, _ := formOf(c.Name, toks, false)
	return why
}

// argForm is formOf for a call of a script, from what the analysis knows
// of its arguments.
func argForm(name string, args []arg, tail *arg) (why string, store int) {
	toks := make([]tok, len(args))
	for i, a := range args {
		toks[i] = tok{s: a.literal, known: a.isLit}
	}
	return formOf(name, toks, tail != nil)
}

// argAt is the argument at position p (1 = the first after the name),
// the tail's when p is beyond the fixed ones.
func argAt(args []arg, tail *arg, p int) arg {
	if p <= len(args) {
		return args[p-1]
	}
	if tail != nil {
		return *tail
	}
	return arg{}
}
