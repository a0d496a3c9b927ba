package commands

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
)

// infoSections are INFO's sections in order; "default" and "all" show them all.
var infoSections = []string{"server", "clients", "persistence", "stats", "replication", "keyspace", "backends", "locks", "tier"}

// INFO [section ...]
func (d *Dispatcher) info(ctx context.Context, c *Client, args [][]byte) Reply {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["default"] || want["everything"]
	var sb strings.Builder
	for _, name := range infoSections {
		if !all && !want[name] {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteString("\r\n")
		}
		d.writeInfoSection(&sb, name)
	}
	return Verbatim(sb.String())
}

func (d *Dispatcher) writeInfoSection(sb *strings.Builder, name string) {
	line := func(k, v string) { sb.WriteString(k + ":" + v + "\r\n") }
	num := func(k string, v int64) { line(k, strconv.FormatInt(v, 10)) }
	sb.WriteString("# " + strings.ToUpper(name[:1]) + name[1:] + "\r\n")
	switch name {
	case "server":
		up := d.now().Sub(d.started)
		line("redis_version", RedisVersion)
		line("redis_mode", "standalone")
		line("redlock_proxy_version", d.opts.Version)
		line("os", runtime.GOOS+" "+runtime.GOARCH)
		line("arch_bits", strconv.Itoa(strconv.IntSize))
		line("go_version", runtime.Version())
		num("process_id", int64(os.Getpid()))
		num("uptime_in_seconds", int64(up/time.Second))
		num("uptime_in_days", int64(up/(24*time.Hour)))
	case "clients":
		num("connected_clients", int64(d.clients.count()))
		num("blocked_clients", int64(d.leases.Waiters()))
	case "persistence":
		line("loading", "0")
	case "stats":
		s := d.leases.Stats()
		num("total_locks_acquired", s.Acquired+s.Extended)
	case "replication":
		line("role", "master")
		line("connected_slaves", "0")
	case "keyspace":
	case "backends":
		status, voting, quorum := d.leases.Backends()
		num("backends", int64(len(status)))
		num("quorum", int64(quorum))
		num("voting", int64(voting))
		line("ready", boolDigit(voting >= quorum))
		ms := d.leases.MigrateStats()
		line("migrate_from", ms.Addr)
		line("migrate_from_active", boolDigit(ms.Addr != ""))
		num("migrate_held_acquires", int64(ms.HeldAcquires))
		num("migrate_legacy_holds", int64(ms.LegacyHolds))
		now := d.now()
		for i, st := range status {
			v := "addr=" + st.Addr + ",state=" + st.State
			if !st.QuarantinedUntil.IsZero() {
				v += ",quarantine_left_ms=" + strconv.FormatInt(max(0, st.QuarantinedUntil.Sub(now).Milliseconds()), 10)
			}
			if st.Reason != "" {
				v += ",reason=" + strings.ReplaceAll(st.Reason, ",", ";")
			}
			if st.RunID != "" {
				v += ",run_id=" + st.RunID
			}
			if f := st.Refill; st.Refilling {
				v += fmt.Sprintf(",refill_passes=%d,refill_scanned=%d,refill_copied=%d,refill_deleted=%d,refill_unsolved=%d",
					f.Passes, f.Scanned, f.Copied, f.Deleted, f.Unsolved)
			}
			line("backend"+strconv.Itoa(i), v)
		}
	case "locks":
		s := d.leases.Stats()
		num("lock_acquired", s.Acquired)
		num("lock_contended", s.Contended)
		num("lock_held_fast", s.HeldFast)
		num("lock_noquorum", s.NoQuorum)
		num("unlock_released", s.Released)
		num("unlock_not_held", s.NotHeld)
		num("extend_ok", s.Extended)
		num("extend_not_held", s.ExtendFailed)
		num("release_notices", s.Notices)
		num("release_notice_wakeups", s.NoticeWakes)
	case "tier":
		d.writeTierInfo(line)
	}
}

// configSubArity is the arity of each CONFIG subcommand (name included).
var configSubArity = map[string]int{"GET": -3, "SET": -4, "RESETSTAT": 2, "REWRITE": 2, "HELP": 2}

// configHelp is CONFIG HELP, in Redis's words.
var configHelp = helpReply("CONFIG",
	"GET <pattern>",
	"    Return parameters matching the glob-like <pattern> and their values.",
	"SET <directive> <value>",
	"    Set the configuration <directive> to <value>.",
	"RESETSTAT",
	"    Reset statistics reported by the INFO command.",
	"REWRITE",
	"    Rewrite the configuration file.")

// CONFIG GET pattern | SET | RESETSTAT | REWRITE | HELP
func (d *Dispatcher) config(ctx context.Context, c *Client, args [][]byte) Reply {
	sub := strings.ToUpper(string(args[1])) // known, of its arity (Command.subError)
	switch sub {
	case "GET":
		return Map{}
	case "RESETSTAT":
		return OK
	case "HELP":
		return configHelp
	}
	return Errorf(errNotSupported, "CONFIG "+sub) // SET, REWRITE
}

// commandSubArity is the arity of each COMMAND subcommand (name included).
var commandSubArity = map[string]int{"COUNT": 2, "LIST": -2, "INFO": -2, "DOCS": -2, "GETKEYS": -4, "HELP": 2}

// COMMAND | COMMAND COUNT | DOCS [name ...] | INFO [name ...] |
// LIST [FILTERBY MODULE m|ACLCAT c|PATTERN p] | GETKEYS cmd [arg ...] | HELP
func (d *Dispatcher) command(ctx context.Context, c *Client, args [][]byte) Reply {
	if len(args) == 1 {
		out := make(Array, len(d.table))
		for i := range d.table {
			out[i] = commandInfo(&d.table[i])
		}
		return out
	}
	sub := strings.ToUpper(string(args[1])) // known, of its arity (Command.subError)
	names := args[2:]
	switch sub {
	case "COUNT":
		return Int(len(d.table))
	case "LIST":
		return d.commandList(names)
	case "INFO":
		if len(names) == 0 {
			return d.command(ctx, c, args[:1])
		}
		out := make(Array, len(names))
		for i, n := range names {
			out[i] = Null{}
			if cmd := d.lookup(n); cmd != nil {
				out[i] = commandInfo(cmd)
			}
		}
		return out
	case "GETKEYS":
		return d.commandGetKeys(names)
	case "HELP":
		return commandHelp
	}
	var out Map // DOCS
	for i := range d.table {
		cmd := &d.table[i]
		if len(names) > 0 && !slices.ContainsFunc(names, func(n []byte) bool { return strings.EqualFold(string(n), cmd.Name) }) {
			continue
		}
		out = append(out, KV{cmd.lower, Map{
			{"summary", BulkString(cmd.Summary)},
			{"since", BulkString("1.0.0")},
			{"group", BulkString(cmd.Group)},
		}})
	}
	if out == nil {
		out = Map{}
	}
	return out
}

// commandHelp is COMMAND HELP, in Redis's words.
var commandHelp = helpReply("COMMAND",
	"(no subcommand)",
	"    Return details about all commands.",
	"COUNT",
	"    Return the total number of commands in this server.",
	"LIST",
	"    Return a list of all commands in this server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full command.")

// COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN pattern]: the
// proxy has no modules; a row's one category is its group's.
func (d *Dispatcher) commandList(opts [][]byte) Reply {
	match := func(*Command) bool { return true }
	switch {
	case len(opts) == 0:
	case len(opts) == 3 && strings.EqualFold(string(opts[0]), "FILTERBY"):
		arg := string(opts[2])
		switch strings.ToUpper(string(opts[1])) {
		case "MODULE":
			return Array{}
		case "ACLCAT":
			match = func(cmd *Command) bool { return strings.EqualFold(aclCategory(cmd.Group), arg) }
		case "PATTERN":
			match = func(cmd *Command) bool { return relay.GlobMatch(strings.ToLower(arg), cmd.lower) }
		default:
			return errSyntax
		}
	default:
		return errSyntax
	}
	out := Array{}
	for i := range d.table {
		if match(&d.table[i]) {
			out = append(out, BulkString(d.table[i].lower))
		}
	}
	return out
}

// COMMAND GETKEYS cmd [arg ...]: the keys the table finds in a call, with
// Redis's errors.
func (d *Dispatcher) commandGetKeys(call [][]byte) Reply {
	cmd := d.lookup(call[0])
	switch {
	case cmd == nil:
		return Error("ERR Invalid command specified")
	case cmd.Key <= 0 && cmd.keys == nil:
		return Error("ERR The command has no key arguments")
	case !cmd.arityOK(len(call)):
		return Error("ERR Invalid number of arguments specified for command")
	}
	out := Array{}
	for _, k := range cmd.keysOf(call, nil) {
		out = append(out, Bulk(k))
	}
	return out
}

// commandInfo is one COMMAND INFO entry in Redis 7's ten-field shape.
func commandInfo(cmd *Command) Array {
	flags := Array{}
	if cmd.Flags&NoAuth != 0 {
		flags = append(flags, Simple("no_auth"))
	}
	switch {
	case cmd.Flags&Writes != 0:
		flags = append(flags, Simple("write"))
	case cmd.Flags&Reads != 0:
		flags = append(flags, Simple("readonly"))
	}
	if cmd.Flags&Blocking != 0 {
		flags = append(flags, Simple("blocking"))
	}
	if cmd.NumKeys > 0 || cmd.Movable {
		flags = append(flags, Simple("movablekeys")) // ZUNION numkeys key …, SORT … STORE dst
	}
	key, last, step := cmd.Key, cmd.LastKey, cmd.KeyStep
	if last == 0 {
		last = key
	}
	if step == 0 {
		step = min(key, 1)
	}
	return Array{
		BulkString(cmd.lower), Int(cmd.Arity), flags,
		Int(key), Int(last), Int(step),
		Array{Simple("@" + aclCategory(cmd.Group))}, Array{}, keySpecs(cmd), Array{},
	}
}

// keySpecs are a row's key specifications in Redis 7's shape: where its
// keys begin and how to find them, read from the Key, LastKey, KeyStep
// and NumKeys columns. They carry no access flags (RW, insert, …): those
// describe Redis's own handling of each key.
func keySpecs(cmd *Command) Array {
	specs := Array{}
	spec := func(index int, find string, how Map) Map {
		return Map{
			{"flags", Array{}},
			{"begin_search", Map{{"type", BulkString("index")}, {"spec", Map{{"index", Int(index)}}}}},
			{"find_keys", Map{{"type", BulkString(find)}, {"spec", how}}},
		}
	}
	if cmd.Key > 0 {
		last := cmd.LastKey // relative to Key; negative: from the end
		if last > 0 {
			last -= cmd.Key
		}
		specs = append(specs, spec(cmd.Key, "range", Map{
			{"lastkey", Int(last)}, {"keystep", Int(max(cmd.KeyStep, 1))}, {"limit", Int(0)},
		}))
	}
	if cmd.NumKeys > 0 {
		specs = append(specs, spec(cmd.NumKeys, "keynum", Map{
			{"keynumidx", Int(0)}, {"firstkey", Int(1)}, {"keystep", Int(1)},
		}))
	}
	return specs
}

// aclCategory is the ACL category of a command group, as Redis spells it:
// the same word, but "sorted-set" (COMMAND DOCS) is "@sortedset".
func aclCategory(group string) string {
	return strings.ReplaceAll(group, "-", "")
}

// CLUSTER ...
func (d *Dispatcher) cluster(ctx context.Context, c *Client, args [][]byte) Reply {
	return errClusterOff
}

// TIME
func (d *Dispatcher) time(ctx context.Context, c *Client, args [][]byte) Reply {
	now := time.Now()
	return Strings(strconv.FormatInt(now.Unix(), 10), strconv.Itoa(now.Nanosecond()/1000))
}

// WAIT numreplicas timeout / WAITAOF numlocal numreplicas timeout answer
// at once what a master without replicas (ROLE) can: 0, and [0, 0]. A
// write the proxy answered is on a quorum of backends already; blocking
// until the timeout would add nothing but a stall (WAIT 1 0, forever).
func (d *Dispatcher) wait(ctx context.Context, c *Client, args [][]byte) Reply {
	for i, a := range args[1:] {
		n, err := strconv.ParseInt(string(a), 10, 64)
		if err != nil {
			return errNotInteger
		}
		if n < 0 && i == len(args)-2 {
			return Error("ERR timeout is negative")
		}
	}
	if len(args) == 4 {
		return Array{Int(0), Int(0)}
	}
	return Int(0)
}

// DBSIZE: the proxy keeps no keys of its own.
func (d *Dispatcher) dbsize(ctx context.Context, c *Client, args [][]byte) Reply {
	return Int(0)
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
