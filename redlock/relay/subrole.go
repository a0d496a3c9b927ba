package relay

import "github.com/redlock-proxy/redlock-proxy/redlock/resp"

// subRole is a backend's subscriber connection: it holds the union of
// what this proxy's subscribers want, subscribing when the first local
// subscriber of a name comes and unsubscribing when the last leaves, and
// again in full on every new connection (a backend restarted, a
// connection broken). The backend's copies of each message go to the
// hub's matcher.
type subRole struct {
	h *hub
	i int
	s *session

	// Under h.mu: what waiters of Subscribe look at.
	state int
	have  map[topic]bool // confirmed on the current connection

	sent  map[topic]bool // asked for on the current connection (the session's goroutine only)
	wasUp bool           // a connection was up before (the session's goroutine only)
}

// batchNames bounds the names of one SUBSCRIBE command.
const batchNames = 512

func (sr *subRole) setup() [][]any { return nil }

func (sr *subRole) up(c *bconn) error {
	h := sr.h
	h.mu.Lock()
	sr.state = stateUp
	sr.have = make(map[topic]bool)
	h.m.setUp(sr.i, true)
	h.notifyLocked()
	h.mu.Unlock()
	sr.sent = make(map[topic]bool)
	if err := sr.reconcile(c); err != nil {
		return err
	}
	if sr.wasUp {
		sr.h.resumed()
	}
	sr.wasUp = true
	return nil
}

func (sr *subRole) down() {
	h := sr.h
	h.mu.Lock()
	sr.state = stateDown
	sr.have = nil
	h.m.setUp(sr.i, false)
	h.notifyLocked()
	h.mu.Unlock()
}

// reconcile subscribes to what is wanted and not yet asked for, and
// unsubscribes from what was asked for and is no longer wanted.
func (sr *subRole) reconcile(c *bconn) error {
	var add, drop [3][]string
	sr.h.mu.Lock()
	for t := range sr.h.topics {
		if !t.local() && !sr.sent[t] {
			add[t.kind] = append(add[t.kind], t.name)
			sr.sent[t] = true
		}
	}
	for t := range sr.sent {
		if _, ok := sr.h.topics[t]; !ok {
			drop[t.kind] = append(drop[t.kind], t.name)
			delete(sr.sent, t)
		}
	}
	sr.h.mu.Unlock()
	var buf []byte
	for k := range add {
		buf = appendBatches(buf, unsubscribeCmd[k], drop[k])
		buf = appendBatches(buf, subscribeCmd[k], add[k])
	}
	if len(buf) == 0 {
		return nil
	}
	// Answered by pushes only (RESP3): nothing joins the reply queue.
	return c.send(buf, 0)
}

func appendBatches(b []byte, cmd string, names []string) []byte {
	for len(names) > 0 {
		n := min(len(names), batchNames)
		b = resp.AppendStrings(b, cmd, names[:n])
		names = names[n:]
	}
	return b
}

// frame takes the backend's pushes: messages and confirmations.
func (sr *subRole) frame(v any) {
	p, ok := v.(Push)
	if !ok || len(p) < 3 {
		if se, isErr := v.(ServerError); isErr {
			// A subscribe command the backend refused (SSUBSCRIBE before
			// Redis 7): its subscribers are not confirmed here.
			sr.s.log.Warn("backend refused a subscription command", "error", string(se))
		}
		return
	}
	kind, _ := str(p[0])
	a, _ := str(p[1])
	b, _ := str(p[2])
	switch kind {
	case "message":
		sr.h.receive(sr.i, Message{Kind: Channel, Channel: a, Payload: b})
	case "smessage":
		sr.h.receive(sr.i, Message{Kind: Shard, Channel: a, Payload: b})
	case "pmessage":
		if len(p) == 4 {
			payload, _ := str(p[3])
			sr.h.receive(sr.i, Message{Kind: Pattern, Pattern: a, Channel: b, Payload: payload})
		}
	case "subscribe":
		sr.confirm(topic{Channel, a}, true)
	case "psubscribe":
		sr.confirm(topic{Pattern, a}, true)
	case "ssubscribe":
		sr.confirm(topic{Shard, a}, true)
	case "unsubscribe":
		sr.confirm(topic{Channel, a}, false)
	case "punsubscribe":
		sr.confirm(topic{Pattern, a}, false)
	case "sunsubscribe":
		sr.confirm(topic{Shard, a}, false)
	}
}

func (sr *subRole) confirm(t topic, on bool) {
	h := sr.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if sr.have == nil {
		return
	}
	if on {
		sr.have[t] = true
		h.notifyLocked()
	} else {
		delete(sr.have, t)
	}
}
