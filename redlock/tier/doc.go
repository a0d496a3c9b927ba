// Package tier is the membership of a tier of proxies that serve the same
// backends: each proxy announces the address its clients reach it at
// with a heartbeat on the backends, and learns from them which proxies
// are alive. No peer list is configured; the backends are the meeting
// point. On top of it, commands answers the Redis Sentinel protocol, so
// that a client finds a live proxy, and fails over to another, without
// code changes.
//
// # The heartbeat
//
// Every Interval (1 s) a proxy runs one script on every backend (beat.go),
// whatever that backend's health, each call bounded by CallTimeout. On a
// hash per service (Key: redlock-proxy:tier:<service>) the script writes
// this proxy's entry, "announce address → expiry, id, joined", with an
// expiry TTL (3 s) ahead of the backend's own clock, drops the entries
// that expired, and returns the rest with their remaining ttl. The same
// script raises the backend's fence counter to this proxy's fence
// high-water mark and returns the counter, and the proxy raises its mark
// to the largest counter it read (redlock/fence.go): the live
// proxies' marks and every backend's counter converge, which is what
// keeps fences increasing across proxies when a majority of backends
// restarts empty (docs/safety.md).
//
// # Who is alive
//
// An entry counts when a quorum of backends holds it: a proxy that cannot
// reach a quorum cannot grant a lock either, so it should not be
// advertised. From each round a proxy learns, for every entry held by a
// quorum, how long a quorum will still hold it (the quorum-th largest
// remaining ttl, counted from before the round was sent, so never late),
// and keeps the entry live that long on its own clock. A round that sees
// fewer copies (backends restarted empty lost them) does not shorten
// that; the next heartbeats write the entries back. So a proxy that stops
// drops out of every view at most TTL after its last heartbeat; one that
// leaves on shutdown removes its entry at once.
//
// # Which proxy is advertised
//
// All proxies read the same entries, so they choose alike: the live member
// that joined first (the joined stamp is the member's own clock at start,
// kept while it stays live), ties broken by address. A member stays the
// choice while it lives. A proxy restarted on the same address has a new
// id and stamp, and replaces its old entry. One whose heartbeats miss a
// quorum for about TTL − Interval/2 (one missed round is tolerated)
// takes a new stamp before its next write, earlier than the others drop
// its old entry, so it never reappears under the old stamp and takes the
// role back from its successor. Views differ only around an expiry, by
// at most one Interval. When no member is live, the
// last advertised one is kept (reported as down by the SENTINEL commands).
// OnSwitch is called when the advertised address changes, for the
// +switch-master message.
//
// # Where it does not hold
//
// Membership decides nothing about locks: a wrong view sends clients to a
// dead proxy for a few seconds, never grants a lock. Entries expire by
// each backend's clock, so a backend whose clock jumps may drop or keep an
// entry early or late; the quorum rule hides one such backend. A proxy
// listening on a wildcard address without announce takes no part (it
// still beats, sharing its fence mark, and answers for the others).
package tier
