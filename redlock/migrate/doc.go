// Package migrate is the old single Redis during a move to the quorum
// (migrate_from): a required participant in every lock operation, beside
// the backends of a redlock.Redlock (its redlock.Mirror).
//
// What it decides. An acquisition also takes its keys there, with the
// same token, ttl and mode, and is granted only when a quorum of backends
// AND the old instance said yes; it fails as held when the old instance
// holds a key for another value, and as no quorum when it did not answer.
// A failed acquisition is undone on both sides. Extends need the old
// instance's yes too, and so do the renewals of holds (RenewHold): the
// copy there lives as long as the hold. Releases and the plain writes
// (SET, DEL, PEXPIRE, PERSIST) are mirrored there, their answer the
// backends'; GETSET and INCR are mirrored with an answer both sides
// decide, and so are writes by vote (a reply there that does not combine
// with the backends' fails with ErrDiffers). Reads count a key the old
// instance holds when the backends do not: it is a lock a client that
// has not moved yet holds. While it does not answer, acquisitions,
// extends, GETSET, counters and writes by vote fail (an *Error of kind
// redlock.ErrNoQuorum): a client that has not moved may hold the key
// there.
//
// What it trusts. The old instance is run as a redlock.Redlock of one
// node (quorum 1), so each of its operations has the backends' deadline,
// validity measure and undo; its scripts and settings are its clients'
// (redlock.Options.Borrowed). Its part of an acquisition starts inside
// the keys' gate, at the same moment as the backends' fan-out, and is
// waited for before the validity is measured from a clock reading taken
// before either started, so the validity holds for both. It trusts the
// clients that have not moved to lock the same keys on the old instance
// as before: their locks are seen there only. The argument, and what it
// does not cover, is in docs/safety.md (Moving from one Redis).
package migrate
