// Package record is the holds record as each backend keeps it
// (docs/safety.md, "Holds", "The record"): one hash per tier, Key(service),
// one field per key the tier keeps beyond max_ttl, its value "deadline-ms
// digest" (Field: Encode, Parse, and the older "owner deadline digest"
// form, read alike, "~" as ended), and beside it the stamp of each held
// key's copy (the expiry the hold's last write gave it).
//
// It decides what one backend does with a field: the scripts that write
// it with its key's copy or where the key holds its value (AcquireScript,
// SetScript), end it (EndScript), renew a page of holds (RenewScript),
// copy a hold back onto a backend that restarted empty (DumpScript,
// RestoreScript), keep a hold's copy on migrate_from's old instance
// (RenewCopyScript), and read the record a page at a time (Scan). Each
// compares the key's copy with the field, and its expiry with the stamp,
// in the same call, and drops a field whose key no longer holds its value
// in the copy it stamped (a dead field). A field never names an owner.
//
// It decides no quorum: which nodes are asked, what a quorum of them
// agrees on and what an answer means for a hold are package redlock's
// (holds.go, holdsread.go, repair.go); when a hold is made, renewed or
// ended is package lease's. The record never decides who holds a key
// (the key's copies do, by the lock rule), only what the tier renews.
//
// # What it trusts
//
// Redis running each script to its end without another command in
// between, its SHA1 (redis.sha1hex) and, from Redis 7.0, PEXPIRETIME
// (without it no stamp is written and a hold is checked by its digest
// alone); HSCAN returning every field present for the whole scan at least
// once. The caller, for the node, the service and the deadline of each
// page. It imports only package script; the prefix it repeats from
// package redlock (ReservedPrefix) is checked there by a test.
package record
