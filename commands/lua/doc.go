// Package lua decides what the proxy does with a Lua script a client sends
// (EVAL, EVALSHA after SCRIPT LOAD): carry out a lock operation it
// recognises, run it by vote on every backend, or refuse it. It imports
// nothing from this repository; commands calls it once per new script text
// and keeps the *Analysis, which nothing changes after Analyze returns and
// which is safe for concurrent use.
//
//	a := lua.Analyze(src)
//	switch {
//	case a.Meaning != nil: // recognised: a.Meaning.Select(argv): acquire, extend, release or read
//	case a.Vote != nil:    // by vote: check a.Vote.CheckRun(len(keys), argv), then run everywhere
//	default:               // refused: a.Problem: "line 4: redis.call("KEYS", …): …"
//	}
//
// KeyCommands exports the allow-list's keyed commands (arity, key
// positions, writes, unordered replies) for the proxy's command table,
// which serves each outside scripts too; KeyCommand.Form says why a call
// of one in a form each backend would run its own way (XADD's id *, an
// approximate trim, COPY … DB, SORT … BY/GET) cannot run by vote, as the
// analysis refuses the same forms in a script (forms.go); Refusal says
// why a command Redis has cannot run by vote. ParseExpireOptions is EXPIRE's NX/XX/GT/LT rule,
// parsed once for the model and for the proxy's own EXPIRE commands.
//
// A recognised script also has a Vote (recognition requires the vote
// rules to hold), for when the proxy does not use meanings.
//
// # What the analysis is sound for, and what it is not
//
// For a script by vote (Vote not nil), on every run, whatever KEYS, ARGV
// and the data, provided the script also passes CheckRun for that ARGV:
// it touches no key outside its reach (below: the declared keys, and with
// Vote.DerivedKeys the keys built from them); calls only commands of the
// allow-list, in forms none of which answers differently on two backends
// holding the same data (an argument that decides the form is a literal); selects no database but 0; loads no code and leaves KEYS,
// ARGV and the redis table as they are; every loop it runs has a bound
// (loops.go; but for a loop over a table that the body grows through
// another name than the one walked, which is not seen); and no function
// calls itself. The analysis is flow-insensitive: it assumes every
// assignment may reach every use, so it refuses some scripts that would
// behave, never the other way round.
//
// Not covered, for a script by vote: how long the bounded loops take
// together (nested loops multiply; string.rep, format widths and patterns
// cost what their arguments make them cost); reading the clock (TIME,
// TTL: each backend's own, trusted to agree within Redlock's drift);
// orders that come from addresses (tables keyed by tables or functions,
// tostring of either), which differ between backends.
//
// For a recognised script (Meaning not nil): in every probe world (below)
// the script leaves every key as the meaning does and answers as the
// meaning does. Not proven: behaviour on inputs no probe reaches (a branch
// on a value the script computes rather than names as a literal, such as
// ARGV[3] > "m", a hash of the token, a length other than a literal one;
// key counts above 17; interactions of three or more arguments), and on
// keys without expiry (probe keys that exist always have a ttl, as the
// proxy's own locks do). A script written to act as a lock on ordinary
// inputs and otherwise on rare ones is recognised as the lock.
//
// For both: the analysis parses and runs scripts with gopher-lua, not
// Redis's Lua 5.1; the two differ in corners (`local f = function` seeing
// itself; arithmetic on strings, "0b11" + 0, read by Go's strconv), which
// a script could exploit. Numbers written and read by tostring, tonumber,
// "..", string.format, the string library and table.concat are Lua 5.1's
// (numbers.go, format.go).
//
// # Recognition: by behaviour, not by text
//
// Matching a script's exact bytes loses it to a space after a comma.
// Matching the syntax tree instead would still have to list the equivalent
// forms (== false or not, an early return 0 or an else, locals or inline
// calls, redis.call aliased or pcall'd, PEXPIRE or SET XX PX or EXPIRE in
// seconds, a loop over KEYS or one key), and that list never ends. So the
// script is run: Analyze parses it with gopher-lua (a Lua 5.1 parser and
// VM in pure Go, already required through miniredis; its ast package keeps
// line numbers, and its VM checks a context before every instruction,
// which gives an exact instruction budget), checks the tree (below), and
// then executes the compiled chunk in a sandbox against a model Redis: a
// map of string keys with expiry times at a frozen instant, implementing
// GET, SET with all its options, SETNX, SETEX, PSETEX, GETSET, GETDEL,
// GETEX, MGET, STRLEN, DEL, UNLINK, EXISTS, EXPIRE, PEXPIRE, EXPIREAT,
// PEXPIREAT, PERSIST, TTL and PTTL exactly as Redis 7 replies to them,
// with redis.call's conversions (false and nil bulk, status and error
// tables, arrays cut at the first nil).
//
// The script runs in many probe worlds: 1, 2 and 3 keys in every
// combination of absent, holding the token and holding another value;
// every ARGV index tried as the token and as the ttl (as a duration, and,
// when the script can set an absolute expiry — PXAT, EXAT, PEXPIREAT,
// EXPIREAT — as the Unix time the lock ends at); several tokens, ttls,
// remaining ttls and key names; "other" values that are near the token
// (its case swapped, a prefix, an extension, empty) or equal to another
// argument; and everything built from the script's own literals: each
// string literal as a token, a key name, an "other" value and a value of
// every other argument, with near misses of compared literals (case
// swapped, padded, "0.0" for "0"); each integer literal ±1 as a ttl, a
// remaining ttl, a token length and, up to 17, a key count; a literal
// KEYS[n] adds worlds with n keys. A meaning fits when in every world the
// final state of every key (value and expiry; scripts are atomic, so the
// final state is the whole effect) is what the meaning would leave, no
// other key changed, nothing raised, and the reply is a function of the
// outcome the proxy can reproduce: a constant per outcome, the number of
// keys, or the number released. Exactly one meaning must fit. Varying one
// free argument over its values may switch between meanings by that
// argument's exact value (redis-py's ARGV[3] == "0" adds to the ttl,
// redlock-rb's ARGV[3] == "yes" allows an absent key); a meaning that
// depends on two arguments, or on an argument compared loosely (a near
// miss acting as the literal), is not recognised. Scripts that only read
// (GET, MGET, EXISTS, STRLEN, TTL, PTTL) and run cleanly in every world
// are recognised as reads: the proxy answers them with EvalRead, which
// runs the script itself against a model filled with a quorum's view.
//
// # How recognition stays safe
//
// The proxy executes the meaning, never the script, so a mistake means the
// client gets the meaning's effect where its script would have done
// something else. Recognition therefore refuses whenever in doubt: the
// script must satisfy the vote rules; call only commands the model
// implements, on any path, reached or not (a TYPE check guarding an HDEL
// is never recognised); touch only declared keys, never keys built by
// concatenation; read ARGV only by literal index (at most 6); and raise no
// error and exhaust no budget in any probe. A script that treats a key
// without expiry specially (redis-py's extend answers 0 for one) is
// recognised by what it does with keys that have a ttl. Multi-key meanings
// are all-or-nothing per backend, as redlock's are: a script that sets
// keys one by one and stops at the first taken one is not recognised.
//
// # Eligibility to run by vote
//
// Decided on the syntax tree alone, conservatively:
//   - Every redis.call and redis.pcall (also through a local that only ever
//     holds it, `local call = redis.call` or `local r = redis`, and
//     pcall(redis.call, …)) names a command from a key-local allow-list
//     (strings, hashes, lists, sets, sorted sets, expiry, DEL, UNLINK,
//     EXISTS, TYPE, TOUCH, read-only TIME, PUBLISH and SPUBLISH) with a
//     string literal, or with ARGV[n]; then Vote.ArgCommands lists n and
//     Vote.CheckRun checks the name and its key arguments for each call.
//     The list holds no command whose answer is each backend's own given
//     the same data (ownAnswer: random picks, cursors); an unordered reply
//     (SMEMBERS, HGETALL) reaches the script sorted by the wrapper on each
//     backend (Script.Enforced in redlock/script), and returned as it is
//     the vote compares it as a set or map (reply.go).
//
// All of this is recognition and early refusal: what keeps the promise
// is the wrapper on each backend, which checks every call as it happens
// (RunCommands is the list it checks against; docs/safety.md, "Scripts
// by vote").
//   - Every key argument (by the command's key positions: first, last and
//     step as in Redis's key specs, numkeys counts) comes from KEYS:
//     KEYS[i] for any i, a loop variable over ipairs/pairs(KEYS),
//     unpack(KEYS), a local or a parameter of a local function that only
//     ever receives such values, or a concatenation with a KEYS element in
//     it (KEYS[1] .. ':' .. ARGV[1]; Vote.DerivedKeys). A numkeys count
//     that is not a literal makes every later argument a key. So a run's
//     reach bounds every key it may touch: the declared keys, and (with
//     Vote.DerivedKeys) the keys starting with a declared key or with one
//     of Vote.KeyPrefixes followed by one; what orders or gates the script
//     (a pipeline plan, a key gate) must cover that.
//   - SELECT only with 0: the literal 0, or an ARGV element (directly,
//     through tonumber or a local) that Vote.CheckRun requires to be "0"
//     on every run (Vote.SelectArgs); Vote.Selects tells the caller to
//     refuse such scripts unless every backend uses database 0
//     (database.go). Recognition sees through it: the probes pin those
//     arguments to "0" and the model's SELECT 0 does nothing.
//   - KEYS and ARGV are only read: indexed, measured, iterated, unpacked.
//     The redis table and redis.call are only called. No load, loadstring,
//     dofile, require, setfenv, getfenv, _G, debug, io, os (os.clock too),
//     string.dump, redis.setresp or other redis fields; no goto (Lua 5.2).
//   - Every loop has a bound the analysis sees (loops.go): no while or
//     repeat loop; a numeric for over literals, lengths and ARGV numbers
//     (Vote.CheckRun checks those on each run), with a literal step; a
//     for … in over ipairs, pairs, next or string.gmatch of a table the
//     body does not add to; no recursion.
//   - Anything the analysis cannot follow (a command name computed or taken
//     from a table, a key from a table field or a function's result) is
//     refused, with the line and the reason.
//
// # Bounds
//
// Analyze reads at most MaxSource bytes; a lexical prescan refuses more
// than 200 nested levels (Lua's own limit) before the parser, which would
// otherwise spend seconds and hundreds of megabytes on them. Each probe run
// has a budget of 1M instructions (a redis.call counts 100, library calls
// charge their work), 8 MiB of strings built (".." is compiled as a call
// to a counting function; string.rep and gsub check first, string.format
// and table.concat pay for each piece before adding it), 200 nested calls and 64 Ki stack slots; an analysis has 10M
// instructions and two seconds in all. A script that exhausts a run's
// budget on a probe is refused: on a backend it would block or exhaust
// memory just the same. Only scripts the model can run (string and expiry
// commands, or none) are tried. Redis never stops a script by itself: the
// proxy stops a script by vote that runs past script_timeout with SCRIPT
// KILL (redlock/scriptkill.go); one that already wrote cannot be killed,
// and is then bounded only by the loop rules above.
package lua
