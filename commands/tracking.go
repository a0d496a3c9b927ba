package commands

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
)

// Client-side caching (docs/compatibility.md says what clients see, mode
// by mode). CLIENT TRACKING ON gives the client a relay Watcher; from then
// on each command that reads keys (the table's Reads flag) has them
// tracked before it runs, and the client gets an invalidation once per
// key until it reads the key again. A command that both reads and writes
// (a script, GETSET) is bracketed for a NOLOOP client (runOwn, relay.Own)
// so that its keys stay tracked after it; in a transaction, CLIENT
// CACHING before MULTI covers the reads queued in it (tx.go). Until a
// client turns tracking on, none of this runs: Client.modes is 0.

// CLIENT CACHING values (Client.caching).
const (
	cachingUnset int32 = iota
	cachingYes
	cachingNo
)

// Tracking modes.
const (
	trackDefault = iota
	trackOptIn
	trackOptOut
	trackBcast
)

// trackState is a client's tracking settings; replaced whole, never
// changed, so the relay's goroutines read it without a lock.
type trackState struct {
	mode     int
	noloop   bool
	redirect int64 // client id; 0: none
	prefixes []string
	w        *relay.Watcher
	// brokenRedirect: an invalidation found the redirect's client gone
	// (CLIENT TRACKINGINFO's broken_redirect, until tracking is on again).
	brokenRedirect atomic.Bool
}

// wants reports whether a read is tracked, given the CLIENT CACHING flag
// that applies to it.
func (t *trackState) wants(caching int32, proto int) bool {
	if t.redirect == 0 && proto < 3 {
		return false // Redis accepts it, and delivers nothing: skip the work
	}
	switch t.mode {
	case trackOptIn:
		return caching == cachingYes
	case trackOptOut:
		return caching != cachingNo
	case trackBcast:
		return false
	}
	return true
}

const (
	errCachingMode  = Error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	errCachingYes   = Error("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
	errCachingNo    = Error("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
	errOptInOut     = Error("ERR You can't specify both OPTIN mode and OPTOUT mode")
	errBcastOpt     = Error("ERR OPTIN and OPTOUT are not compatible with BCAST")
	errRedirectGone = Error("ERR The client ID you want redirect to does not exist")
	errPrefixBcast  = Error("ERR PREFIX option requires BCAST mode to be enabled")
	errSwitchBcast  = Error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
	errSwitchOpt    = Error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
)

// clientTracking runs CLIENT TRACKING | CACHING | TRACKINGINFO | GETREDIR.
func (d *Dispatcher) clientTracking(ctx context.Context, c *Client, sub string, args [][]byte) Reply {
	switch sub {
	case "TRACKING":
		return d.tracking(ctx, c, args[2:])
	case "CACHING":
		return c.setCaching(args[2])
	case "GETREDIR":
		t := c.trk.Load()
		if t == nil {
			return Int(-1)
		}
		return Int(t.redirect)
	}
	return c.trackingInfo()
}

// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]
func (d *Dispatcher) tracking(ctx context.Context, c *Client, args [][]byte) Reply {
	on := false
	switch strings.ToUpper(string(args[0])) {
	case "ON":
		on = true
	case "OFF":
	default:
		return errSyntax
	}
	next := trackState{mode: trackDefault}
	bcast, optin, optout := false, false, false
	for i := 1; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "REDIRECT":
			if i+1 >= len(args) {
				return errSyntax
			}
			i++
			id, err := strconv.ParseInt(string(args[i]), 10, 64)
			if err != nil {
				return errNotInteger
			}
			next.redirect = id
		case "PREFIX":
			if i+1 >= len(args) {
				return errSyntax
			}
			i++
			next.prefixes = append(next.prefixes, string(args[i]))
		case "BCAST":
			bcast = true
		case "OPTIN":
			optin = true
		case "OPTOUT":
			optout = true
		case "NOLOOP":
			next.noloop = true
		default:
			return errSyntax
		}
	}
	if !on {
		c.endTracking()
		return OK
	}
	switch {
	case optin && optout:
		return errOptInOut
	case bcast && (optin || optout):
		return errBcastOpt
	case len(next.prefixes) > 0 && !bcast:
		return errPrefixBcast
	case next.redirect != 0 && next.redirect != c.ID && d.clients.get(next.redirect) == nil:
		return errRedirectGone
	}
	switch {
	case bcast:
		next.mode = trackBcast
	case optin:
		next.mode = trackOptIn
	case optout:
		next.mode = trackOptOut
	}
	if r := checkPrefixes(next.prefixes); r != nil {
		return r
	}
	if bcast {
		if r := prefixesAllowed(c.user.Load(), next.prefixes); r != nil {
			return r
		}
	}
	cur := c.trk.Load()
	if cur != nil {
		switch {
		case (cur.mode == trackBcast) != bcast:
			return errSwitchBcast
		case cur.mode == trackOptIn && next.mode == trackOptOut, cur.mode == trackOptOut && next.mode == trackOptIn:
			return errSwitchOpt // Redis: the default mode may become either
		}
		if r := checkPrefixes(append(append([]string(nil), cur.prefixes...), next.prefixes...)); r != nil {
			return r
		}
		next.w = cur.w
		next.prefixes = append(append([]string(nil), cur.prefixes...), next.prefixes...)
	} else {
		next.w = d.relay.NewWatcher(func(keys []string) { d.invalidated(c, keys) })
		next.w.SetUser(shareUser(c))
	}
	if bcast && (cur == nil || len(next.prefixes) > len(cur.prefixes)) {
		added := next.prefixes
		if cur != nil {
			added = next.prefixes[len(cur.prefixes):]
		}
		var le *relay.LimitError
		if err := next.w.Broadcast(ctx, added); errors.As(err, &le) {
			if cur == nil {
				next.w.Close()
			}
			return Errorf("ERR too many tracking prefixes: %d would exceed redlock-proxy's limit of %d %s (see docs/operations.md)",
				le.Want, le.Max, limitWhat[le.Limit])
		} // any other error: closed, the client is leaving
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.gone {
		next.w.Close()
		return errCancelled
	}
	c.trk.Store(&next)
	c.modes.Or(modeTracking)
	return OK
}

// limitWhat says what a relay limit counts, for its error reply
// (tracking prefixes here, subscriptions in pubsub.go).
var limitWhat = map[string]string{
	relay.LimitWatcherPrefixes:  "per connection",
	relay.LimitPrefixes:         "for all clients of this proxy",
	relay.LimitSubscriberTopics: "per connection",
	relay.LimitTopics:           "for all clients of this proxy",
	relay.LimitPops:             "for all clients of this proxy",
	relay.LimitUserPrefixes:     "for all clients of this user (half of the proxy's)",
	relay.LimitUserTopics:       "for all clients of this user (half of the proxy's)",
}

// shareUser is the user whose share of the relay's tier-wide bounds c
// counts against (relay.UserShare): its user, unless it has none or may
// do everything (the operator's).
func shareUser(c *Client) string {
	u := c.user.Load()
	if u == nil || u.unrestricted {
		return ""
	}
	return u.name
}

// checkPrefixes refuses prefixes of which one starts another, as Redis
// does for one client.
func checkPrefixes(ps []string) Reply {
	for i, p := range ps {
		for j, q := range ps {
			if i != j && strings.HasPrefix(q, p) && (p != q || i < j) {
				return Errorf("ERR Prefix '%s' overlaps with an existing prefix '%s'. Prefixes for a single client must not overlap.", q, p)
			}
		}
	}
	return nil
}

// prefixesAllowed checks BCAST prefixes against a user limited to key
// patterns: no prefix (every key) is refused, and each prefix must lie
// within a pattern that is a literal followed by one '*' (every key it
// starts is then the user's). Redis checks them against ACL patterns too.
func prefixesAllowed(u *account, prefixes []string) Reply {
	if u == nil || u.allKeys {
		return nil
	}
	if len(prefixes) == 0 {
		return Errorf("NOPERM User %s has no permissions to track every key: name PREFIX within its key patterns", u.name)
	}
	for _, p := range prefixes {
		if !prefixWithin(u.keys, p) {
			return Errorf("NOPERM User %s has no permissions to access the '%s' prefix", u.name, p)
		}
	}
	return nil
}

// prefixWithin reports whether every key starting with prefix matches
// one of patterns: one that is a literal (no glob characters) then '*',
// whose literal starts prefix.
func prefixWithin(patterns []string, prefix string) bool {
	for _, p := range patterns {
		lit, ok := strings.CutSuffix(p, "*")
		if ok && !strings.ContainsAny(lit, "*?[]\\") && strings.HasPrefix(prefix, lit) {
			return true
		}
	}
	return false
}

// deliverable is keys without the proxy's own (redlock.ReservedPrefix)
// and, for a user limited to key patterns, without keys outside them; nil
// (everything) stays nil. ok is false when nothing is left to deliver.
func deliverable(u *account, keys []string) (out []string, ok bool) {
	if keys == nil {
		return nil, true
	}
	for _, k := range keys {
		if strings.HasPrefix(k, redlock.ReservedPrefix) || (u != nil && !u.allKeys && !u.keyAllowed([]byte(k))) {
			continue
		}
		out = append(out, k)
	}
	return out, len(out) > 0
}

// endTracking turns tracking off (CLIENT TRACKING OFF, RESET, disconnect).
func (c *Client) endTracking() {
	c.caching.Store(cachingUnset)
	c.modes.And(^modeTracking)
	if t := c.trk.Swap(nil); t != nil {
		t.w.Close()
	}
}

// CLIENT CACHING YES|NO
func (c *Client) setCaching(arg []byte) Reply {
	t := c.trk.Load()
	if t == nil { // on in another mode: the error names the mode needed, as Redis
		return errCachingMode
	}
	switch strings.ToUpper(string(arg)) {
	case "YES":
		if t.mode != trackOptIn {
			return errCachingYes
		}
		c.caching.Store(cachingYes)
	case "NO":
		if t.mode != trackOptOut {
			return errCachingNo
		}
		c.caching.Store(cachingNo)
	default:
		return errSyntax
	}
	return OK
}

// CLIENT TRACKINGINFO
func (c *Client) trackingInfo() Reply {
	t := c.trk.Load()
	if t == nil {
		return Map{{"flags", Set{BulkString("off")}}, {"redirect", Int(-1)}, {"prefixes", Array{}}}
	}
	flags := Set{BulkString("on")}
	switch t.mode {
	case trackBcast:
		flags = append(flags, BulkString("bcast"))
	case trackOptIn:
		flags = append(flags, BulkString("optin"))
	case trackOptOut:
		flags = append(flags, BulkString("optout"))
	}
	switch c.caching.Load() {
	case cachingYes:
		flags = append(flags, BulkString("caching-yes"))
	case cachingNo:
		flags = append(flags, BulkString("caching-no"))
	}
	if t.noloop {
		flags = append(flags, BulkString("noloop"))
	}
	if t.brokenRedirect.Load() {
		flags = append(flags, BulkString("broken_redirect"))
	}
	return Map{{"flags", flags}, {"redirect", Int(t.redirect)}, {"prefixes", Strings(t.prefixes...)}}
}

// tracked runs a command of a tracking client when tracking concerns it,
// and consumes the CLIENT CACHING flag, which applies to the next command
// alone (to a whole transaction when that is MULTI). done false: run it as
// usual.
func (d *Dispatcher) tracked(ctx context.Context, c *Client, cmd *Command, args [][]byte, parsed parsedCall) (Reply, bool) {
	switch cmd.Name {
	case "CLIENT", "EXEC":
		return nil, false // CACHING sets the flag; EXEC uses the transaction's
	case "MULTI":
		r := cmd.call(d, ctx, c, args, parsed)
		if r == OK {
			c.tx.caching = c.caching.Swap(cachingUnset)
		}
		return r, true
	}
	caching := c.caching.Swap(cachingUnset)
	t := c.trk.Load()
	if t == nil || cmd.Flags&(Reads|Writes) == 0 {
		return nil, false
	}
	keys := commandKeys(cmd, args, parsed.keys)
	if len(keys) == 0 {
		return nil, false
	}
	return d.runTracked(ctx, c, t, caching, func() Reply { return cmd.call(d, ctx, c, args, parsed) },
		keys, cmd.Flags&Reads != 0, cmd.Flags&Writes != 0), true
}

// runTracked runs a command on keys for a tracking client: a NOLOOP
// client's own write is not reported to it, a read is tracked before it
// runs, and a read the backends could not cover is invalidated right after
// its reply.
func (d *Dispatcher) runTracked(ctx context.Context, c *Client, t *trackState, caching int32, run func() Reply, keys []string, reads, writes bool) Reply {
	track := reads && t.wants(caching, c.Proto())
	if writes && t.noloop {
		if track {
			return d.runOwn(ctx, c, t, run, keys)
		}
		t.w.Wrote(keys)
	}
	covered := true
	if track {
		var err error
		if covered, err = t.w.Track(ctx, keys); err != nil {
			covered = false
		}
	}
	r := run()
	if track && !covered {
		d.invalidated(c, keys)
	}
	return r
}

// runOwn runs a NOLOOP client's command that reads keys and may write
// them (a script): the keys stay tracked after it, as on Redis, and the
// client is told of a change of their values by anyone while it ran
// (relay.Own says why it cannot tell its own change from another's).
func (d *Dispatcher) runOwn(ctx context.Context, c *Client, t *trackState, run func() Reply, keys []string) Reply {
	own, err := t.w.BeginOwn(ctx, keys)
	r := run()
	covered := false
	if err == nil {
		covered, err = own.End(ctx)
	}
	if err != nil || !covered {
		d.invalidated(c, keys)
	}
	return r
}

// commandKeys lists a command's keys as strings (Command.keysOf).
func commandKeys(cmd *Command, args, parsed [][]byte) []string {
	out, _ := argStrings(cmd.keysOf(args, parsed), nil)
	return out
}

// invalidated delivers an invalidation of keys (nil: everything) to where
// c's tracking sends it: c itself in RESP3, or the client it redirects
// to — a RESP3 one as a push, a RESP2 one as a message on
// __redis__:invalidate if it subscribed to it. A redirect to a client that
// left is reported to c (tracking-redir-broken).
func (d *Dispatcher) invalidated(c *Client, keys []string) {
	t := c.trk.Load()
	if t == nil {
		return
	}
	keys, ok := deliverable(c.user.Load(), keys)
	if !ok {
		return
	}
	var payload Reply = Null{}
	if keys != nil {
		payload = Strings(keys...)
	}
	to := c
	if t.redirect != 0 && t.redirect != c.ID {
		to = d.clients.get(t.redirect)
		if to == nil {
			t.brokenRedirect.Store(true)
			if c.Proto() >= 3 {
				c.deliver(Push{BulkString("tracking-redir-broken"), Int(t.redirect)})
			}
			return
		}
	}
	switch {
	case to.Proto() >= 3:
		to.deliver(Push{BulkString("invalidate"), payload})
	case to.subscribedTo(relay.Channel, invalidateChannel):
		to.deliver(Push{BulkString("message"), BulkString(invalidateChannel), payload})
	}
}

// invalidateChannel is where RESP2 clients receive redirected
// invalidations; it never reaches the backends (relay.LocalPrefix).
const invalidateChannel = "__redis__:invalidate"

// get finds a connected client by id.
func (r *clientRegistry) get(id int64) *Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}
