// Package relay is the proxy's side of what Redis servers push and block
// on, over the N independent backends of a Redlock deployment: pub/sub
// relayed so that each message is delivered once, key tracking for
// client-side caching, and blocking list pops used as wake-up signals. It
// knows nothing of RESP clients: package commands turns its callbacks into
// replies and pushes. It opens no connection until something needs one,
// so a proxy whose clients use none of it pays nothing.
//
// # API
//
//   - Subscriptions: NewSubscriber(deliver) returns a Subscriber;
//     Subscribe(ctx, kind, names…) / Unsubscribe / Close. deliver is a Go
//     callback, so the proxy itself can subscribe (release notices between
//     proxies) on the same connections as its clients: one subscriber
//     connection per backend per proxy. DeliverLocal hands a message to
//     this proxy's subscribers only (what the proxy announces itself).
//     Names and Count answer PUBSUB.
//   - Tracking: NewWatcher(invalidate) returns a Watcher; Track(ctx, keys)
//     before a read, Wrote(keys) before a NOLOOP client's write,
//     Broadcast(ctx, prefixes) for BCAST mode, Close.
//   - Pops: Pop(ctx, PopRequest) answers a BLPOP, BRPOP or BLMOVE's pop.
//   - Publishing is not here: a PUBLISH goes to the backends through
//     lease.Manager.Publish (redlock.Redlock.DoAll).
//
// # Connections
//
// Each backend gets, on demand, one subscriber connection, one tracking
// connection and one broadcast-tracking connection (session.go: RESP3,
// kept up by one goroutine each, reconnected with back-off, PING when
// idle and closed as stalled when it stops answering), plus a small pool
// of connections for blocking pops. They are made with
// backend.RedisNode.DialConn, with the node's address, credentials and
// TLS, and speak RESP3 through package resp (resp.go: Push and
// ServerError are its types). Shutdown closes them and waits for every goroutine.
//
// # Exactly once
//
// The rule and what happens while a backend is down, reconnecting or
// lagging are in match.go. In short: per message identity (kind, pattern,
// channel, payload) the relay counts the copies each backend delivered
// and delivers a copy when its backend's count exceeds the number already
// delivered; two identical messages are two publications, so both
// arrive. A backend lagging more than the window (5 s) behind the first
// copy can cause a duplicate; a backend that is down causes none, and
// receives what is published after it is subscribed again.
//
// # Tracking
//
// How keys are registered on the backends, why a read is tracked before
// it runs, how N copies of an invalidation reach a client once, and what
// happens when tracking connections are lost, is in track.go (default,
// OPTIN, OPTOUT) and bcast.go (BCAST). The guarantee: a tracked key's
// invalidation reaches its watchers when a change reaching a quorum of
// backends happens, whoever makes it, or when the key expires, within a
// backend round trip; when that cannot be guaranteed (too few tracking
// connections up), the watcher is told at once, so nothing stale is
// cached.
//
// # Bounds
//
// What one client holds on the shared connections is bounded (limits.go):
// BCAST prefixes per watcher and in all, subscriptions per subscriber and
// in all (a call past either is refused with a *LimitError and changes
// nothing), and keys tracked per watcher (past it the watcher is flushed).
// Refusals counts them. Everything a client holds is released when it
// closes its Watcher or Subscriber: a BCAST watcher's prefixes leave the
// backends' prefix list.
//
// # Blocking pops
//
// The semantics are in pop.go: the first element any backend pops is the
// answer, copies of it that other backends popped are consumed with it,
// other elements are pushed back, and a copy left on a backend is a stale
// signal that costs a waiter one extra lock attempt, never safety.
package relay
