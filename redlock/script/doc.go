// Package script decides what runs on each backend around a client's Lua
// script when the proxy runs it by vote, and how a backend's reply to it
// is read. A Script is a Lua text with its SHA1 (New, NewWithHash), and
// what a vote needs to know of it: how its replies compare (ForVote's
// Shape), the keys it builds, the cap on a reply's elements. Package
// redlock sends it (Node.Eval: EVALSHA, EVAL on NOSCRIPT) and runs the
// vote; the proxy's own scripts are Scripts too, sent as they are.
//
// A client's script is never sent as it was written. Its wrappers:
//
//   - Guarded (clamp.go): a script that cannot write, run under xpcall,
//     its error turned into one Redis can send (an error object Redis 7.0
//     would crash on becomes a fixed text).
//   - Clamped (clamp.go): a script that may write, then, in the same call,
//     an epilogue that bounds within the max ttl every key the run locked
//     and left without expiry or beyond it, giving it the lease, and
//     reports per key what the script wanted (SplitClamped reads one
//     backend's reply, CombineReports what a quorum wanted: the Wanted
//     package lease turns into holds).
//   - The held shadow (clampheld.go: ClampedHeld, GuardedHeld): a declared
//     key the proxy holds answers TTL, PTTL and the expiry commands from
//     its hold (HeldArgs), as one Redis would, not from the lease its copy
//     carries.
//   - The run-time check (enforce.go, enforce_lua.go, enforce_body.go:
//     Enforced, with an Enforcement and EnforceArgs): each redis.call the
//     body makes is checked as it happens (the command on the list, every
//     key within the declared keys and the user's patterns and not the
//     proxy's own, the bounds on values, writes and C-level work), and the
//     body is printed again so that every alias of the string library goes
//     through the same bounds. LocksByRead tells the clamp which keys a run
//     locked (read before written, a conditional write) from its data.
//
// A vote sends an enforced script that is in no wrapper yet Guarded
// (Sendable): bare, it would run unchecked.
//
// # What it trusts
//
// Redis's Lua sandbox: the wrappers are Lua code in the same script as
// the body, and what keeps the body from the epilogue's state, from
// Redis's own redis and from the real globals is Lua's scoping (a local
// is seen only after its declaration), protected metatables and copies of
// KEYS, ARGV and _G; Redis 7's read-only string metatable and library;
// and Redis running a script to its end (or to SCRIPT KILL) without
// another command in between. A Redis or Lua that breaks these breaks
// the check.
//
// The proxy, for what it passes: the user's key patterns (EnforceArgs)
// and the holds of the declared keys (HeldArgs) as package commands and
// package lease know them, the command list and bounds of the
// Enforcement, the max ttl and lease of a clamp. A script sent without
// its patterns is refused; one sent with wrong patterns or holds is
// checked against those.
//
// It does not decide whether a script may run by vote at all (package
// commands/lua analyses its text: an early refusal), nor what a quorum of
// replies agrees on (package redlock, agree.go, by the Shape given here),
// nor what becomes of a key wanted beyond the max ttl (package lease).
// It imports nothing of this module; the two values it repeats from
// package redlock (ReservedPrefix, PTTLNoExpiry) are checked there by a
// test.
package script
