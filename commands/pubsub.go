package commands

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
)

// Pub/sub is relayed by package relay: a client's SUBSCRIBE makes this
// proxy's subscriber connections subscribe on every backend (the first
// local subscriber of a name does), and each message published there —
// through this proxy, another proxy, or on every backend by a script — is
// delivered once. The replies have Redis 7's shapes in RESP2 and RESP3:
// one confirmation per name with the client's running count (channels
// plus patterns; shard channels counted apart), messages as pushes.

// Client.modes bits: whether a client has subscriptions or tracking on,
// read with one atomic load by every command.
const (
	modeSubscribed uint32 = 1 << iota
	modeTracking
)

// pubsubState is a client's subscriptions; guarded by Client.pmu.
type pubsubState struct {
	sub *relay.Subscriber
	// names holds each name's place in subscription order, by
	// relay.Kind: UNSUBSCRIBE without names confirms them in that order
	// (as Redis 7.0 for patterns, which it keeps in a list).
	names [3]map[string]uint64
	next  uint64
}

// count is the number a confirmation of kind reports: channels and
// patterns together, shard channels apart.
func (p *pubsubState) count(kind relay.Kind) int {
	if p == nil {
		return 0
	}
	if kind == relay.Shard {
		return len(p.names[relay.Shard])
	}
	return len(p.names[relay.Channel]) + len(p.names[relay.Pattern])
}

// setModeLocked updates modeSubscribed; c.pmu is held.
func (c *Client) setModeLocked() {
	if p := c.ps; p != nil && len(p.names[0])+len(p.names[1])+len(p.names[2]) > 0 {
		c.modes.Or(modeSubscribed)
	} else {
		c.modes.And(^modeSubscribed)
	}
}

// subscribed reports a client in subscribed mode (RESP2 then refuses
// other commands).
func (c *Client) subscribed() bool { return c.modes.Load()&modeSubscribed != 0 }

// subscribedTo reports a subscription to name of kind.
func (c *Client) subscribedTo(kind relay.Kind, name string) bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.ps == nil {
		return false
	}
	_, ok := c.ps.names[kind][name]
	return ok
}

// pubsubKind reads the kind and the confirmation word of a command name.
func pubsubKind(name []byte) (relay.Kind, string) {
	w := strings.ToLower(string(name))
	switch strings.Replace(w, "unsub", "sub", 1) {
	case "psubscribe":
		return relay.Pattern, w
	case "ssubscribe":
		return relay.Shard, w
	}
	return relay.Channel, w
}

// SUBSCRIBE channel [channel ...] / PSUBSCRIBE pattern [pattern ...] /
// SSUBSCRIBE shardchannel [shardchannel ...]
func (d *Dispatcher) subscribe(ctx context.Context, c *Client, args [][]byte) Reply {
	kind, word := pubsubKind(args[0])
	names := make([]string, len(args)-1)
	for i, a := range args[1:] {
		names[i] = string(a)
		if kind != relay.Pattern && redlock.Reserved(names[i]) {
			return errReservedChan // the release notices are the proxies' own
		}
	}
	c.pmu.Lock()
	if c.gone {
		c.pmu.Unlock()
		return errCancelled
	}
	if c.ps == nil {
		c.ps = &pubsubState{sub: d.relay.NewSubscriber(c.message)}
		c.ps.sub.SetUser(shareUser(c))
		for i := range c.ps.names {
			c.ps.names[i] = make(map[string]uint64)
		}
	}
	ps := c.ps
	// The names are listened to before the backends are asked: a backend
	// that has the subscription counts it in PUBLISH and sends its copy,
	// which must reach the client even while the other backends confirm
	// (it is written after this command's reply, see proxy/push.go).
	before := ps.count(kind)
	fresh := make(map[string]bool) // the names this command adds
	for _, n := range names {
		if _, ok := ps.names[kind][n]; !ok {
			ps.next++
			ps.names[kind][n] = ps.next
			fresh[n] = true
		}
	}
	c.pmu.Unlock()
	// Never into the relay with pmu held: it calls back with its own locks.
	if err := ps.sub.Subscribe(ctx, kind, names...); err != nil {
		c.pmu.Lock()
		for n := range fresh {
			delete(ps.names[kind], n)
		}
		c.pmu.Unlock()
		var le *relay.LimitError
		if errors.As(err, &le) {
			return Errorf("ERR too many subscriptions: %d would exceed redlock-proxy's limit of %d %s (see docs/operations.md)",
				le.Want, le.Max, limitWhat[le.Limit])
		}
		if errors.Is(err, relay.ErrClosed) {
			return errShuttingDown
		}
		return errCancelled
	}
	// Each confirmation counts the subscriptions up to its name, as Redis
	// does for SUBSCRIBE a b (1, then 2).
	out := make(Replies, len(names))
	for i, n := range names {
		if fresh[n] {
			fresh[n] = false
			before++
		}
		out[i] = Push{BulkString(word), BulkString(n), Int(before)}
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	c.setModeLocked()
	return out
}

// UNSUBSCRIBE [channel ...] / PUNSUBSCRIBE [pattern ...] /
// SUNSUBSCRIBE [shardchannel ...]: without names, every one of the kind.
func (d *Dispatcher) unsubscribe(ctx context.Context, c *Client, args [][]byte) Reply {
	kind, word := pubsubKind(args[0])
	var names []string
	for _, a := range args[1:] {
		names = append(names, string(a))
	}
	c.pmu.Lock()
	ps := c.ps
	if len(names) == 0 && ps != nil {
		for n := range ps.names[kind] {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int { return cmp.Compare(ps.names[kind][a], ps.names[kind][b]) })
	}
	if len(names) == 0 {
		c.pmu.Unlock()
		return Push{BulkString(word), Null{}, Int(ps.count(kind))}
	}
	out := make(Replies, len(names))
	for i, n := range names {
		if ps != nil {
			delete(ps.names[kind], n)
		}
		out[i] = Push{BulkString(word), BulkString(n), Int(ps.count(kind))}
	}
	c.setModeLocked()
	c.pmu.Unlock()
	if ps != nil {
		ps.sub.Unsubscribe(kind, names...)
	}
	return out
}

// endPubsub drops every subscription of c (RESET; gone after
// CloseClient).
func (c *Client) endPubsub(gone bool) {
	c.pmu.Lock()
	ps := c.ps
	c.ps = nil
	c.gone = c.gone || gone
	c.setModeLocked()
	c.pmu.Unlock()
	if ps != nil {
		ps.sub.Close()
	}
}

// message turns a relayed message into its push, unless c left the
// subscription meanwhile.
func (c *Client) message(m relay.Message) {
	name := m.Channel
	if m.Kind == relay.Pattern {
		name = m.Pattern
	}
	if !c.subscribedTo(m.Kind, name) || redlock.Reserved(m.Channel) {
		return // a pattern matches the proxies' release notices too
	}
	var r Push
	switch m.Kind {
	case relay.Pattern:
		r = Push{BulkString("pmessage"), BulkString(m.Pattern), BulkString(m.Channel), BulkString(m.Payload)}
	case relay.Shard:
		r = Push{BulkString("smessage"), BulkString(m.Channel), BulkString(m.Payload)}
	default:
		r = Push{BulkString("message"), BulkString(m.Channel), BulkString(m.Payload)}
	}
	c.deliver(r)
}

// PUBLISH channel message / SPUBLISH shardchannel message: on every
// voting backend (not on the proxy's own channels: a forged release notice
// would wake waiters for nothing); the reply is the largest receiver count a backend
// reported (each counts the subscriber connections of every proxy and
// its own direct subscribers), an error only when no backend answered.
func (d *Dispatcher) publish(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkValue(args[2]); r != nil {
		return r
	}
	if redlock.Reserved(string(args[1])) {
		return errReservedChan
	}
	n, err := d.leases.Publish(ctx, strings.EqualFold(string(args[0]), "SPUBLISH"), string(args[1]), string(args[2]))
	if err != nil {
		return d.listError(err)
	}
	return Int(n)
}

// pubsubSubArity is the arity of each PUBSUB subcommand (name included).
var pubsubSubArity = map[string]int{"CHANNELS": -2, "NUMPAT": 2, "NUMSUB": -2, "SHARDCHANNELS": -2, "SHARDNUMSUB": -2, "HELP": 2}

// PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT |
// SHARDCHANNELS [pattern] | SHARDNUMSUB [shardchannel ...]: about this
// proxy's subscribers (each backend sees only the proxies' subscriber
// connections).
func (d *Dispatcher) pubsubCmd(ctx context.Context, c *Client, args [][]byte) Reply {
	sub := strings.ToUpper(string(args[1]))
	switch {
	case (sub == "CHANNELS" || sub == "SHARDCHANNELS") && len(args) <= 3:
		kind := relay.Channel
		if sub == "SHARDCHANNELS" {
			kind = relay.Shard
		}
		pattern := ""
		if len(args) == 3 {
			pattern = string(args[2])
		}
		return Strings(d.relay.Names(kind, pattern)...)
	case sub == "NUMSUB" || sub == "SHARDNUMSUB":
		kind := relay.Channel
		if sub == "SHARDNUMSUB" {
			kind = relay.Shard
		}
		out := make(Map, 0, len(args)-2)
		for _, a := range args[2:] {
			out = append(out, KV{string(a), Int(d.relay.Count(kind, string(a)))})
		}
		return out
	case sub == "NUMPAT" && len(args) == 2:
		return Int(d.relay.Count(relay.Pattern, ""))
	case sub == "CHANNELS" || sub == "SHARDCHANNELS" || sub == "NUMPAT":
		return Errorf(errWrongArity, "pubsub|"+strings.ToLower(sub))
	}
	return Errorf(errUnknownSubcmd, args[1], "PUBSUB")
}
