package commands

import "sync"

// Messages for this proxy's own subscribers. The proxy tier publishes
// +switch-master to the clients subscribed on this proxy (Sentinel
// clients subscribe to the proxy they ask, and only hear that one); it
// goes through a LocalPublisher, so that a relay which holds the
// subscriptions elsewhere can take the index's place (Options.Publisher).

// LocalPublisher delivers a message to this proxy's own subscribers only:
// those subscribed to channel, and those whose pattern matches it. It
// never reaches the backends or other proxies.
type LocalPublisher interface {
	// PublishLocal delivers message and returns how many subscriptions
	// received it. It must not block on a slow subscriber for longer than
	// a write to it may take.
	PublishLocal(channel string, message []byte) int
}

// localSubs is the default LocalPublisher: an index of the connections
// subscribed through SUBSCRIBE and PSUBSCRIBE (pubsub.go), which it writes
// to with their Deliver hook, in their protocol (RESP2 array, RESP3 push).
type localSubs struct {
	mu       sync.Mutex
	channels map[string]map[*Client]struct{}
	patterns map[string]map[*Client]struct{}
	byClient map[*Client]map[[2]string]struct{} // {kind, name} each client holds
}

// add records c's subscription to name; kind is "subscribe" or
// "psubscribe".
func (s *localSubs) add(c *Client, kind, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byClient == nil {
		s.channels = map[string]map[*Client]struct{}{}
		s.patterns = map[string]map[*Client]struct{}{}
		s.byClient = map[*Client]map[[2]string]struct{}{}
	}
	set := s.index(kind)[name]
	if set == nil {
		set = map[*Client]struct{}{}
		s.index(kind)[name] = set
	}
	set[c] = struct{}{}
	held := s.byClient[c]
	if held == nil {
		held = map[[2]string]struct{}{}
		s.byClient[c] = held
	}
	held[[2]string{kind, name}] = struct{}{}
}

// remove forgets c's subscription to name.
func (s *localSubs) remove(c *Client, kind, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(c, kind, name)
}

func (s *localSubs) removeLocked(c *Client, kind, name string) {
	if s.byClient == nil {
		return
	}
	idx := s.index(kind)
	if set := idx[name]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(idx, name)
		}
	}
	if held := s.byClient[c]; held != nil {
		delete(held, [2]string{kind, name})
		if len(held) == 0 {
			delete(s.byClient, c)
		}
	}
}

// drop forgets every subscription of c (RESET, disconnect): O(its own
// subscriptions).
func (s *localSubs) drop(c *Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.byClient[c] {
		s.removeLocked(c, sub[0], sub[1])
	}
}

// index is the map of one kind. mu is held.
func (s *localSubs) index(kind string) map[string]map[*Client]struct{} {
	if kind == "psubscribe" {
		return s.patterns
	}
	return s.channels
}

// PublishLocal writes message to every local subscriber of channel:
// ["message", channel, message] for a channel subscription, ["pmessage",
// pattern, channel, message] for a pattern, as Redis does.
func (s *localSubs) PublishLocal(channel string, message []byte) int {
	type delivery struct {
		c   *Client
		msg Reply
	}
	var out []delivery
	s.mu.Lock()
	for c := range s.channels[channel] {
		out = append(out, delivery{c, Push{BulkString("message"), BulkString(channel), Bulk(message)}})
	}
	for pattern, set := range s.patterns {
		if !globMatch(pattern, []byte(channel)) { // users.go
			continue
		}
		for c := range set {
			out = append(out, delivery{c, Push{BulkString("pmessage"), BulkString(pattern), BulkString(channel), Bulk(message)}})
		}
	}
	s.mu.Unlock()
	n := 0
	for _, d := range out { // outside the lock: a write may wait for a slow client
		if d.c.deliver(d.msg) {
			n++
		}
	}
	return n
}
