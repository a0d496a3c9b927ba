package commands

import (
	"context"
	"strconv"
	"strings"
)

// AUTH [username] password
func (d *Dispatcher) auth(ctx context.Context, c *Client, args [][]byte) Reply {
	var user, pass []byte
	switch len(args) {
	case 2:
		if !d.users.required {
			return errAuthNoPass
		}
		pass = args[1]
	case 3:
		user, pass = args[1], args[2]
	default:
		return errSyntax
	}
	if r := d.authenticate(c, user, pass); r != nil {
		return r
	}
	return OK
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]
func (d *Dispatcher) hello(ctx context.Context, c *Client, args [][]byte) Reply {
	proto := c.Proto()
	if len(args) >= 2 {
		v, err := strconv.Atoi(string(args[1]))
		if err != nil {
			return errProtoNotInt
		}
		if v != 2 && v != 3 {
			return errNoProto
		}
		proto = v
	}
	var name, user, pass []byte
	setName, auth := false, false
	for i := 2; i < len(args); i++ { // every option checked before AUTH, as Redis
		switch strings.ToUpper(string(args[i])) {
		case "AUTH":
			if i+2 >= len(args) {
				return Errorf("ERR Syntax error in HELLO option '%s'", args[i])
			}
			user, pass, auth = args[i+1], args[i+2], true
			i += 2
		case "SETNAME":
			if i+1 >= len(args) {
				return Errorf("ERR Syntax error in HELLO option '%s'", args[i])
			}
			if !validClientName(args[i+1]) {
				return errClientName
			}
			name, setName = args[i+1], true
			i++
		default:
			return Errorf("ERR Syntax error in HELLO option '%s'", args[i])
		}
	}
	if auth {
		if r := d.authenticate(c, user, pass); r != nil {
			return r
		}
	}
	if !c.Authenticated() {
		return errHelloNoAuth
	}
	if setName {
		c.setName(string(name))
	}
	c.proto.Store(int32(proto))
	return Map{
		{"server", BulkString("redis")},
		{"version", BulkString(RedisVersion)},
		{"proto", Int(proto)},
		{"id", Int(c.ID)},
		{"mode", BulkString("standalone")},
		{"role", BulkString("master")},
		{"modules", Array{}},
	}
}

// QUIT
func (d *Dispatcher) quit(ctx context.Context, c *Client, args [][]byte) Reply {
	c.closeAfter = true
	return OK
}

// RESET: back to a new connection's state, logged out when a password or
// user is configured.
func (d *Dispatcher) reset(ctx context.Context, c *Client, args [][]byte) Reply {
	c.proto.Store(2)
	c.replies.Store(repliesOn)
	c.setName("")
	c.logout(d.users.required)
	c.tx.reset()
	c.endPubsub(false)
	c.endTracking()
	return Simple("RESET")
}

// PING [message]
func (d *Dispatcher) ping(ctx context.Context, c *Client, args [][]byte) Reply {
	if len(args) > 2 {
		return Errorf(errWrongArity, "ping")
	}
	if c.subscribed() && c.Proto() == 2 { // Redis: an array in subscribed mode
		msg := BulkString("")
		if len(args) == 2 {
			msg = BulkString(args[1])
		}
		return Array{BulkString("pong"), msg}
	}
	if len(args) == 1 {
		return Simple("PONG")
	}
	return Bulk(args[1])
}

// ECHO message
func (d *Dispatcher) echo(ctx context.Context, c *Client, args [][]byte) Reply {
	return Bulk(args[1])
}

// SELECT index
func (d *Dispatcher) selectDB(ctx context.Context, c *Client, args [][]byte) Reply {
	n, err := strconv.ParseInt(string(args[1]), 10, 64)
	if err != nil {
		return errNotInteger
	}
	if n != 0 {
		return errDBRange
	}
	return OK
}

// clientSubArity is the arity of each CLIENT subcommand (name included).
var clientSubArity = map[string]int{"SETNAME": 3, "GETNAME": 2, "SETINFO": 4, "ID": 2, "INFO": 2, "LIST": -2,
	"TRACKING": -3, "CACHING": 3, "TRACKINGINFO": 2, "GETREDIR": 2, "NO-EVICT": 3, "NO-TOUCH": 3, "REPLY": 3, "UNBLOCK": -3, "HELP": 2}

// Client.replies: CLIENT REPLY's modes.
const (
	repliesOn int32 = iota
	repliesOff
	repliesSkip // the next command's reply only
)

// clientHelp is CLIENT HELP: the subcommands served, in Redis's words.
var clientHelp = helpReply("CLIENT",
	"CACHING (YES|NO)",
	"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
	"GETREDIR",
	"    Return the client ID we are redirecting to when tracking is enabled.",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"LIST [options ...]",
	"    Return information about client connections. Options:",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Return clients of specified type.",
	"    * ID <client-id> [<client-id> ...]",
	"      Return clients of specified IDs only.",
	"SETINFO <option> <value>",
	"    Set client meta attr. Options are:",
	"    * LIB-NAME: the client lib name.",
	"    * LIB-VER: the client lib version.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
	"         [OPTIN] [OPTOUT] [NOLOOP]",
	"    Control server assisted client side caching.",
	"TRACKINGINFO",
	"    Report tracking status for the current connection.",
	"UNBLOCK <clientid> [TIMEOUT|ERROR]",
	"    Unblock the specified blocked client.",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction.",
	"NO-TOUCH (ON|OFF)",
	"    Will not touch LRU/LFU stats when this mode is on.",
	"REPLY (ON|OFF|SKIP)",
	"    Control the replies sent to the current connection.")

// helpReply is a HELP subcommand's reply, as Redis's addReplyHelp: a
// header, the lines given, and HELP itself, as simple strings.
func helpReply(cmd string, lines ...string) Array {
	out := Array{Simple(cmd + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")}
	for _, l := range lines {
		out = append(out, Simple(l))
	}
	return append(out, Simple("HELP"), Simple("    Prints this help."))
}

// CLIENT SETNAME name | GETNAME | SETINFO LIB-NAME|LIB-VER value | ID | INFO |
// LIST [TYPE type | ID id ...] | TRACKING … | CACHING | TRACKINGINFO |
// GETREDIR | NO-EVICT ON|OFF | NO-TOUCH ON|OFF | REPLY ON|OFF|SKIP |
// UNBLOCK id [TIMEOUT|ERROR] | HELP
func (d *Dispatcher) client(ctx context.Context, c *Client, args [][]byte) Reply {
	sub := strings.ToUpper(string(args[1])) // known, of its arity (Command.subError)
	switch sub {
	case "SETNAME":
		if !validClientName(args[2]) {
			return errClientName
		}
		c.setName(string(args[2]))
		return OK
	case "GETNAME":
		if n := c.Name(); n != "" {
			return BulkString(n)
		}
		return Null{}
	case "SETINFO":
		return d.clientSetInfo(c, args[2], args[3])
	case "ID":
		return Int(c.ID)
	case "TRACKING", "CACHING", "TRACKINGINFO", "GETREDIR":
		return d.clientTracking(ctx, c, sub, args)
	case "INFO":
		return Verbatim(c.infoLine(d.now()) + "\n")
	case "NO-EVICT", "NO-TOUCH": // the proxy evicts no client and keeps no LRU: nothing to change
		switch strings.ToUpper(string(args[2])) {
		case "ON", "OFF":
			return OK
		}
		return errSyntax
	case "REPLY": // PlanFor silences the commands after OFF or SKIP
		switch strings.ToUpper(string(args[2])) {
		case "ON":
			c.replies.Store(repliesOn)
			return OK
		case "OFF":
			c.replies.Store(repliesOff)
			return noReply
		case "SKIP":
			c.replies.CompareAndSwap(repliesOn, repliesSkip) // nothing while OFF, as Redis
			return noReply
		}
		return errSyntax
	case "UNBLOCK":
		return d.clientUnblock(c, args)
	case "HELP":
		return clientHelp
	default: // LIST shows every connection: admin users only
		if r := requireAdmin(c, "client|list"); r != nil {
			return r
		}
		return d.clientList(args[2:])
	}
}

// CLIENT LIST [TYPE NORMAL|MASTER|REPLICA|SLAVE|PUBSUB | ID id [id ...]]:
// the proxy's own clients, normal or pubsub; ids in the order given.
func (d *Dispatcher) clientList(opts [][]byte) Reply {
	var list []*Client
	switch {
	case len(opts) == 0:
		list = d.clients.snapshot()
	case len(opts) == 2 && strings.EqualFold(string(opts[0]), "TYPE"):
		pubsub := false
		switch strings.ToUpper(string(opts[1])) {
		case "NORMAL":
		case "PUBSUB":
			pubsub = true
		case "MASTER", "REPLICA", "SLAVE":
			return Verbatim("")
		default:
			return Errorf("ERR Unknown client type '%s'", opts[1])
		}
		for _, o := range d.clients.snapshot() {
			if o.subscribed() == pubsub {
				list = append(list, o)
			}
		}
	case len(opts) > 1 && strings.EqualFold(string(opts[0]), "ID"):
		for _, a := range opts[1:] {
			id, err := strconv.ParseInt(string(a), 10, 64)
			if err != nil {
				return Error("ERR Invalid client ID")
			}
			if o := d.clients.get(id); o != nil {
				list = append(list, o)
			}
		}
	default:
		return errSyntax
	}
	var sb strings.Builder
	now := d.now()
	for _, o := range list {
		sb.WriteString(o.infoLine(now))
		sb.WriteByte('\n')
	}
	return Verbatim(sb.String())
}

// clientSetInfo checks the attribute, then the value, as Redis 7.2.
func (d *Dispatcher) clientSetInfo(c *Client, attr, value []byte) Reply {
	var field *string
	switch strings.ToUpper(string(attr)) {
	case "LIB-NAME":
		field = &c.libName
	case "LIB-VER":
		field = &c.libVer
	default:
		return Errorf("ERR Unrecognized option '%s'", attr)
	}
	if !validClientName(value) {
		return Errorf("ERR %s cannot contain spaces, newlines or special characters.", attr)
	}
	c.mu.Lock()
	*field = string(value)
	c.mu.Unlock()
	return OK
}

// validClientName is Redis's rule: printable ASCII without spaces.
func validClientName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}
