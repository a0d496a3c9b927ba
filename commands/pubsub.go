package commands

import (
	"bytes"
	"context"
	"slices"
	"strings"
)

// Pub/sub is accepted so that drivers which open a subscription
// connection at start (StackExchange.Redis) work. The proxy relays no
// messages: PUBLISH reaches no one and answers 0. Subscriptions are
// indexed (localpub.go) so that the proxy's own messages, +switch-master
// for Sentinel clients, reach the subscribers of this proxy.

// SUBSCRIBE channel [channel ...] / PSUBSCRIBE pattern [pattern ...]
func (d *Dispatcher) subscribe(ctx context.Context, c *Client, args [][]byte) Reply {
	kind := strings.ToLower(string(args[0]))
	out := make(Replies, 0, len(args)-1)
	for _, ch := range args[1:] {
		if c.subs == nil {
			c.subs = make(map[string]bool)
		}
		c.subs[kind+"\x00"+string(ch)] = true
		d.local.add(c, kind, string(ch))
		out = append(out, Push{BulkString(kind), Bulk(ch), Int(len(c.subs))})
	}
	return out
}

// UNSUBSCRIBE [channel ...] / PUNSUBSCRIBE [pattern ...]
func (d *Dispatcher) unsubscribe(ctx context.Context, c *Client, args [][]byte) Reply {
	kind := strings.ToLower(string(args[0]))
	prefix := strings.TrimPrefix(kind, "un") + "\x00"
	names := args[1:]
	if len(names) == 0 {
		for k := range c.subs {
			if strings.HasPrefix(k, prefix) {
				names = append(names, []byte(k[len(prefix):]))
			}
		}
		slices.SortFunc(names, bytes.Compare)
	}
	if len(names) == 0 {
		return Push{BulkString(kind), Null{}, Int(len(c.subs))}
	}
	out := make(Replies, 0, len(names))
	for _, ch := range names {
		delete(c.subs, prefix+string(ch))
		d.local.remove(c, strings.TrimSuffix(prefix, "\x00"), string(ch))
		out = append(out, Push{BulkString(kind), Bulk(ch), Int(len(c.subs))})
	}
	return out
}

// PUBLISH channel message
func (d *Dispatcher) publish(ctx context.Context, c *Client, args [][]byte) Reply {
	return Int(0)
}
