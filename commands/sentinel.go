package commands

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/tier"
)

// The Redis Sentinel protocol, answered by every proxy of a tier for its
// service_name: clients that find their master through Sentinel (go-redis
// NewFailoverClient, redis-py Sentinel, ioredis sentinels, Jedis, Lettuce)
// find a live proxy, the same one whichever proxy they ask, and move when
// it changes. The proxy is at once the sentinel they ask and the master
// they are sent to: INFO, ROLE and HELLO keep answering as a master. Reply
// shapes copy redis-sentinel 7.0: maps of bulk strings (flat arrays in
// RESP2), a null array for an unknown name in get-master-addr-by-name.

// Discovery is what the SENTINEL and ROLE commands and INFO's tier
// section read of the proxy tier (redlock/tier.Tier).
type Discovery interface {
	Service() string
	Announce() string
	ID() string
	TTL() time.Duration
	Members() []tier.Member
	Master() (m tier.Member, live, ok bool)
}

// SetDiscovery makes the SENTINEL commands answer for the tier t. Call it
// before serving; without it SENTINEL is an unknown command, as on a plain
// Redis.
func (d *Dispatcher) SetDiscovery(t Discovery) { d.tier = t }

// Sentinel error texts (redis-sentinel 7.0's).
const (
	errNoSuchMaster   = Error("ERR No such master with that name")
	errSentinelNoTier = "ERR SENTINEL %s is not supported by redlock-proxy: the proxies choose the advertised proxy among themselves"
)

// sentinelArity is the argument count of the subcommands that take a
// fixed number, SENTINEL and the subcommand included.
var sentinelArity = map[string]int{
	"get-master-addr-by-name": 3, "master": 3, "sentinels": 3, "replicas": 3, "slaves": 3,
	"ckquorum": 3, "masters": 2, "myid": 2, "is-master-down-by-addr": 6,
}

// SENTINEL subcommand [name ...]
func (d *Dispatcher) sentinel(ctx context.Context, c *Client, args [][]byte) Reply {
	if d.tier == nil {
		return unknownCommand(args)
	}
	sub := strings.ToLower(string(args[1]))
	if n, ok := sentinelArity[sub]; ok && len(args) != n {
		return Errorf(errWrongArity, "sentinel|"+sub)
	}
	name := ""
	if len(args) > 2 {
		name = string(args[2])
	}
	known := name == d.tier.Service()
	switch sub {
	case "get-master-addr-by-name":
		m, _, ok := d.tier.Master()
		if !known || !ok {
			return NullArray{}
		}
		ip, port := splitAddr(m.Addr)
		return Strings(ip, port)
	case "masters":
		return Array{d.masterEntry()}
	case "master":
		if !known {
			return errNoSuchMaster
		}
		return d.masterEntry()
	case "sentinels":
		if !known {
			return errNoSuchMaster
		}
		out := Array{}
		for _, m := range d.tier.Members() {
			if !m.Self {
				out = append(out, d.sentinelEntry(m))
			}
		}
		return out
	case "replicas", "slaves":
		if !known {
			return errNoSuchMaster
		}
		return Array{}
	case "myid":
		return BulkString(d.tier.ID())
	case "ckquorum":
		if !known {
			return errNoSuchMaster
		}
		n := len(d.tier.Members())
		if _, live, _ := d.tier.Master(); !live {
			return noQuorum(Errorf("NOQUORUM %d usable Sentinels. Not enough available Sentinels to reach the majority and authorize a failover", n))
		}
		return Simple("OK " + strconv.Itoa(n) + " usable Sentinels. Quorum and failover authorization can be reached")
	case "is-master-down-by-addr":
		down := 1
		addr := net.JoinHostPort(string(args[2]), string(args[3]))
		for _, m := range d.tier.Members() {
			if m.Addr == addr {
				down = 0
			}
		}
		return Array{Int(down), BulkString("*"), Int(0)}
	case "help":
		return Array{
			Simple("SENTINEL <subcommand> [<arg> [value] [opt] ...]. redlock-proxy answers:"),
			Simple("GET-MASTER-ADDR-BY-NAME <name>: the live proxy every proxy advertises"),
			Simple("MASTERS | MASTER <name>: the advertised proxy, as a master"),
			Simple("SENTINELS <name>: the other live proxies"),
			Simple("REPLICAS | SLAVES <name>: none"),
			Simple("MYID: this proxy's id"),
			Simple("CKQUORUM <name>: whether a live proxy is advertised"),
		}
	case "monitor", "remove", "set", "reset", "failover", "flushconfig", "config", "debug",
		"info-cache", "pending-scripts", "simulate-failure":
		return Errorf(errSentinelNoTier, strings.ToUpper(sub))
	}
	return Errorf(errUnknownSubcmd, args[1], "SENTINEL")
}

// masterEntry is the advertised proxy as SENTINEL MASTER(S) shows a
// master: the 20 fields of redis-sentinel 7.0, every value a bulk string.
// redis-py needs name, ip, port, flags and num-other-sentinels. When no
// proxy is live, the last advertised one is shown flagged down.
func (d *Dispatcher) masterEntry() Map {
	m, live, ok := d.tier.Master()
	flags := "master"
	if !live {
		flags = "master,s_down,o_down,disconnected"
	}
	ip, port := "", "0"
	if ok {
		ip, port = splitAddr(m.Addr)
	}
	now := d.now()
	others := 0
	members := d.tier.Members()
	for _, x := range members {
		if !x.Self {
			others++
		}
	}
	seen, ttl := msSince(now, m.Seen), strconv.FormatInt(d.tier.TTL().Milliseconds(), 10)
	return bulkMap("name", d.tier.Service(), "ip", ip, "port", port, "runid", m.ID, "flags", flags,
		"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0",
		"last-ok-ping-reply", seen, "last-ping-reply", seen, "down-after-milliseconds", ttl,
		"info-refresh", seen, "role-reported", "master", "role-reported-time", msSince(now, m.Joined),
		"config-epoch", "0", "num-slaves", "0", "num-other-sentinels", strconv.Itoa(others),
		"quorum", strconv.Itoa(len(members)/2+1), "failover-timeout", ttl, "parallel-syncs", "1")
}

// sentinelEntry is another live proxy as SENTINEL SENTINELS shows a
// sentinel: 14 fields; go-redis reads ip and port, ioredis also flags.
func (d *Dispatcher) sentinelEntry(m tier.Member) Map {
	ip, port := splitAddr(m.Addr)
	seen := msSince(d.now(), m.Seen)
	return bulkMap("name", m.ID, "ip", ip, "port", port, "runid", m.ID, "flags", "sentinel",
		"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0",
		"last-ok-ping-reply", seen, "last-ping-reply", seen,
		"down-after-milliseconds", strconv.FormatInt(d.tier.TTL().Milliseconds(), 10),
		"last-hello-message", seen, "voted-leader", "?", "voted-leader-epoch", "0")
}

// bulkMap is a Map of kv's keys and values in pairs, each value a bulk
// string.
func bulkMap(kv ...string) Map {
	m := make(Map, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m = append(m, KV{kv[i], BulkString(kv[i+1])})
	}
	return m
}

// ROLE: always a master without replicas.
func (d *Dispatcher) role(ctx context.Context, c *Client, args [][]byte) Reply {
	return Array{BulkString("master"), Int(0), Array{}}
}

// AnnounceSwitch publishes "+switch-master <service> <old ip> <old port>
// <new ip> <new port>" to this proxy's local subscribers, as a sentinel
// does after a failover (Jedis moves only on it; go-redis closes its
// connections to the old address). It returns how many received it.
func (d *Dispatcher) AnnounceSwitch(old, new tier.Member) int {
	if d.tier == nil {
		return 0
	}
	oip, oport := splitAddr(old.Addr)
	nip, nport := splitAddr(new.Addr)
	msg := strings.Join([]string{d.tier.Service(), oip, oport, nip, nport}, " ")
	n := d.relay.DeliverLocal("+switch-master", msg)
	d.log.Info("published +switch-master", "message", msg, "receivers", n)
	return n
}

// writeTierInfo is INFO's tier section: this proxy's membership.
func (d *Dispatcher) writeTierInfo(line func(k, v string)) {
	if d.tier == nil {
		line("tier_enabled", "0")
		return
	}
	line("tier_enabled", "1")
	line("service_name", d.tier.Service())
	line("announce", d.tier.Announce())
	line("tier_id", d.tier.ID())
	m, live, ok := d.tier.Master()
	switch {
	case live:
		line("advertised", m.Addr)
	case ok:
		line("advertised", m.Addr+" (down)")
	default:
		line("advertised", "")
	}
	members := d.tier.Members()
	line("live_proxies", strconv.Itoa(len(members)))
	for i, x := range members {
		line("proxy"+strconv.Itoa(i), "addr="+x.Addr+",id="+x.ID+",joined="+
			strconv.FormatInt(x.Joined.UnixMilli(), 10)+",self="+boolDigit(x.Self))
	}
}

// splitAddr is host:port as Sentinel shows it: ip and port apart.
func splitAddr(addr string) (string, string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, "0"
	}
	return host, port
}

// msSince is now − t in whole milliseconds, "0" for the zero time.
func msSince(now, t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(max(0, now.Sub(t).Milliseconds()), 10)
}
