package commands

// What reaches a connection outside its command's reply: out-of-band
// pushes (a SESSION lock lost), and the lock-lost notice a RESP2 client
// gets on its next command on the key.

// Hooks are what package proxy lends a Client to reach its connection
// outside a command's reply.
type Hooks struct {
	// Push queues an out-of-band message, encoded for the client's
	// protocol, to be written after the replies of every command the
	// connection has read; it never blocks, and reports false when the
	// connection is closing.
	Push func(Reply) bool
}

// SetHooks installs the connection's hooks (proxy, at accept).
func (c *Client) SetHooks(h Hooks) { c.hooks.Store(&h) }

// Done is closed once the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.owner.Done() }

// push sends an out-of-band message when the client speaks RESP3.
func (c *Client) push(r Reply) bool {
	h := c.hooks.Load()
	if h == nil || h.Push == nil || c.Proto() < 3 {
		return false
	}
	return h.Push(r)
}

// deliver sends a pub/sub message or an invalidation, whatever the
// client's protocol (a RESP2 client gets an array).
func (c *Client) deliver(r Reply) bool {
	h := c.hooks.Load()
	if h == nil || h.Push == nil {
		return false
	}
	return h.Push(r)
}

// lockLost tells the client that its SESSION lock on key was lost: a
// RESP3 client at once with a push [lock-lost, key, reason], a RESP2
// client by an error on its next command naming the key.
func (c *Client) lockLost(key, why string) {
	if c.push(Push{BulkString("lock-lost"), BulkString(key), BulkString(why)}) {
		return
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.lost == nil {
		c.lost = make(map[string]string)
	}
	if _, ok := c.lost[key]; !ok {
		c.lostN.Add(1)
	}
	c.lost[key] = why
}

// takeLost answers a command on a key whose lock this client lost (and
// was not told by a push) with -LOCKLOST, once.
func (c *Client) takeLost(cmd *Command, args, parsed [][]byte) Reply {
	if c.lostN.Load() == 0 {
		return nil
	}
	keys := cmd.keysOf(args, parsed)
	if len(keys) == 0 {
		return nil
	}
	key := string(keys[0])
	c.smu.Lock()
	defer c.smu.Unlock()
	why, ok := c.lost[key]
	if !ok {
		return nil
	}
	delete(c.lost, key)
	c.lostN.Add(-1)
	return Errorf("LOCKLOST lock '%s' was lost: %s", key, why)
}
