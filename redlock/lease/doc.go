// Package lease is the lifecycle of the locks one proxy grants, on top of
// package redlock's quorum operations: it is to redlock what etcd's
// concurrency package is to its client. It knows nothing of RESP.
//
// A Manager is the one door to the keyspace: package commands reaches the
// backends through it and holds no Redlock of its own. It takes the lock
// operations — Acquire (a LockRequest: LOCK, MLOCK), SetIfAbsent (SET
// NX, SETNX), AcquireScript (a recognised library script), Release,
// ReleaseKeys and Extend — and the data operations of
// the single-Redis dialect (data.go: Write, CompareAndSet, GetSet, Get,
// Read, Exists, Delete, Expire, Persist, FlushAll, Incr, and Vote for
// scripts and the commands run by vote as a script (ZREM, ZCARD, the keyed
// commands); Set and ExpireIf for SET
// XX/KEEPTTL and EXPIRE's NX/XX/GT/LT, a quorum read and then the write
// it calls for, not atomic across the two), the list signals and
// PUBLISH (lists.go), and reports the backends' health (Backends). Each
// method carries out package redlock's quorum operation and its side
// effects on what the Manager remembers, and returns what happened as a
// value or a typed error (redlock's sentinels,
// ErrNoBackend, *TypeError); no caller updates that memory by hand. It
// keeps, one record per key (registry.go: keyState, dropped in one place
// once nothing is left of it):
//
//   - the registry (registry.go) of locks granted through the native
//     commands — keys, token, fence, ttl, owner, validity deadline — armed
//     with a timer at the lock's expiry;
//   - per-key FIFO queues of waiters (wait.go): only the head of a queue
//     tries, a release or expiry through this proxy hands the key to the
//     head at once, a release through another proxy does too by its
//     release notice (Options.WatchReleases), and a key held through
//     another proxy or a legacy client is retried with jittered back-off
//     bounded by its remaining ttl;
//   - SESSION locks (session.go), renewed every third of their ttl while
//     their Owner lives and released when it closes or the Manager shuts
//     down; a renewal that fails loses the lock and tells the owner;
//   - the keys written without expiry (keep.go), written with a lease of
//     KeepTTL and renewed while they hold the value written: a write
//     without expiry keeps its key, any other write, a delete, an expire,
//     a release or a flush ends it; of writes of one key that overlap in
//     time, the value a quorum holds after the last decides. Once
//     StartHolds ran, each is also a field of the holds record on the
//     backends (holds.go), written before the write is answered; the
//     record names no owner: the maker renews from memory, and any
//     proxy of the tier renews a hold whose lease runs low (its maker
//     stopped or died), so a hold survives any proxy. A hold renews only the copy of its key it
//     wrote (each node stamps the copy's expiry): a key deleted, given an
//     expiry or written again through any proxy is no longer its own.
//     While backends are quarantined, a renewal first writes the key and
//     its field back onto those that came back empty (redlock.Repair),
//     and the record is read through the nodes that have it;
//   - the holds beyond MaxTTL (clamp.go): a write, expiry or one-key
//     acquisition with a longer ttl is made with the lease and held to its
//     deadline; a script by vote that writes runs clamped (script.Script.
//     Clamped), and what a quorum reported it left without expiry or
//     beyond MaxTTL is held, of any value, until the key is gone or its
//     deadline passes;
//   - a note of every grant through this proxy (registry.go: knownGrant;
//     a lock without expiry while it is kept here, within its first
//     lease): an acquisition without WAIT of a noted key by another
//     token, within the grant's validity, is refused from the note
//     without a quorum round (ErrHeldHere), except one per key every
//     heldRecheck (10 ms), which asks the backends; every path here that
//     may change a key forgets its note;
//   - the outcome counters INFO shows (Stats);
//   - what an operator reads and does (admin.go): Holds, HotKeys, HeldBy,
//     and ForceRelease, which releases the value a quorum holds as its
//     holder's UNLOCK would (LOCKADMIN RELEASE): it cannot free a key
//     that changed holder between its read and its release.
//
// An Owner is one client connection: commands creates it with NewOwner
// and ends it with CloseOwner.
//
// Safety: the registry is memory, not authority. It decides how long a
// waiter sleeps, what Info and Snapshot show, which locks a session
// renews and which contenders are refused without asking (a refusal
// grants nothing; a key freed behind this proxy's back is refused from
// memory for at most heldRecheck: docs/safety.md); never who holds a
// lock: the backends' quorum does that, through package redlock, whose
// doc says when that holds. A lock released or
// stolen behind this proxy's back stays in the registry until its ttl
// ends (or a release notice, when waiters watch the key: wait.go), so a
// waiter here notices it within a second (the head's poll).
package lease
