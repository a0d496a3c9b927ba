// Package redlock implements the Redlock algorithm over N independent Redis
// masters behind a small Node interface; their client, backend.RedisNode,
// is package backend's. It knows nothing of the proxy's clients or of the
// protocol they speak: a key a client changes reaches it through package
// lease (a blocking pop through package relay); packages tier and relay
// use it for their own keys and connections.
//
// Every operation sends to all nodes in parallel, every call with the same
// deadline of min(NodeTimeout, 5% of the ttl) that the caller's context
// cannot cancel. Lock operations (Acquire, Extend, Release) and Get decide
// as soon as the outcome is certain; Read, the fenced acquire, Incr, Vote
// and DoAll wait for every node, each within its deadline, because their
// answer depends on all the replies (a quorum's ttl, the largest counter,
// a combined reply); Vote's deadline is the larger of NodeTimeout and
// ScriptTimeout, and a client's script still running at it is stopped
// with SCRIPT KILL (scriptkill.go). A vote that may write (VoteClamped)
// also holds its keys' order lock on a quorum, so that writes of one key
// through several proxies reach every node in one order (order.go). A
// fan-out hands each node a backend.Command; a backend.RedisNode takes it
// onto its auto-pipelined connection and the reply is counted on that
// connection's reader, so an operation costs no goroutine per node call
// (fanout.go). A quorum is len(nodes)/2+1. Acquire measures the time from
// before the first send to the deciding reply and grants the lock only if
// a quorum said yes and
//
//	validity = ttl − elapsed − (ttl × DriftFactor + 2ms)
//
// is still positive. A failed acquire is undone in the background: each
// node where our SET may have landed gets a compare-and-delete, sent only
// after that node's SET returned, so the delete cannot overtake it. Close
// waits for such background work.
//
// # Where safety holds
//
// Two holders of the same key at once are excluded while all of these
// hold:
//
//   - Clocks run at nearly the same rate. The backends expire keys by their
//     own clocks; the validity assumes no backend's clock runs faster than
//     the proxy's by more than DriftFactor (1% by default). A backend whose
//     clock jumps forward (an administrator or NTP stepping it) expires keys
//     early and breaks this.
//   - Backends keep what they granted. A backend that restarts without
//     persistence (or with asynchronous persistence) forgets the keys it
//     held; if that turns a minority into a majority for a new owner, two
//     owners hold the lock. With Options.MaxTTL set, a node whose run_id
//     changed (seen on every new connection, before its first command, and
//     by RunHealth) does not vote for MaxTTL + drift, and a node younger
//     than that at start waits out the rest (unless TrustFreshBackends).
//   - The holder stops before its validity ends. Validity is a promise about
//     the time right after Acquire returns. A process that pauses (garbage
//     collection, swapping, a stopped VM) or is slow past that moment keeps
//     acting as owner after the keys expired. Only a fencing token checked
//     by the protected resource closes that gap.
//
// # Multi-key locks and plain data
//
// AcquireKeys, ExtendKeys and ReleaseKeys do the same over several keys in
// one script per node, all or nothing on each node; they serve lock
// libraries whose scripts lock several resources at once or re-acquire a
// lock they hold. Read, Get, Write, GetSet, Delete, Exists, Expire,
// CompareAndSet, Incr, Vote and FlushAll serve clients that treat the proxy as one
// Redis (GET, SET, DEL, …), through package lease: each runs on every node and answers with what
// a quorum agrees on. Write and Delete are versioned and Read and Get
// answer the newest version, written back to a quorum first when fewer
// hold it (register.go): a key written and read only so is a linearizable
// register while fewer than a quorum of nodes fail or lose it; a Read
// whose answers split with no newest version (a lock command changed it)
// fails with ErrNoQuorum. A GetSet without a quorum on the old value
// returns the value it wrote, so that legacy "old timestamp expired?"
// checks fail safe.
// Vote and VoteClamped run a script of package script, which makes the
// wrappers a client's script runs in on the backends (the clamp of its
// lock writes, the held shadow, the run-time check of each redis.call);
// this package tallies the replies, and VoteClamped returns what a quorum
// reported of each key (script.CombineReports).
// Write, Delete, Expire and FlushAll are unconditional: they break locks
// as Redis would, which is what the clients sending them expect.
//
// # Health
//
// RunHealth probes every node each HealthInterval: a down node (DownAfter
// failures in a row, counted as a "no" at once, never called) comes back
// when it answers; a node reporting loading:1 does not vote; a node whose
// TIME runs away from the proxy's monotonic clock is quarantined (clock
// watch). Status reports each node's state and why. FENCE tokens are in
// fence.go, with the argument for their monotonicity, and how
// the proxies of a tier (package tier) share their high-water marks, so
// that fences keep increasing across proxies when a majority of backends
// restarts empty. Keys under ReservedPrefix belong to the proxy.
//
// # Moving from one Redis
//
// With Options.Mirror, the single Redis the clients locked on before is
// a required participant in every lock operation: package migrate says
// how each operation takes it and what it decides.
//
// Liveness needs a quorum of nodes reachable within the node deadline.
// Release and Extend report ErrNotHeld when the keys expired or belong to
// another token; a partial Extend is not undone.
package redlock
