package script

import (
	"crypto/sha1"
	"encoding/hex"
)

// Script is a Lua script with its SHA1, for EVALSHA: one of the proxy's
// own, or a client's with what a vote needs to know of it and the
// wrappers it runs in (clamp.go, clampheld.go, enforce.go).
type Script struct {
	src, hash string
	reply     Shape        // how a vote compares its replies
	builds    []string     // a vote: the starts of the keys it builds (ForVote)
	replyCap  int          // a vote: the most elements a reply may have (CapReplies)
	clamped   bool         // wrapped in the clamp (clamp.go)
	isWrapper bool         // a wrapper (clamp.go): sent as it is
	enforce   *Enforcement // its wrappers check it as it runs (enforce.go)
	byRead    bool         // enforced: its clamp bounds only the keys a run locks (LocksByRead)
	clamps    *clamps      // its clamped forms, made once
}

// New returns a Script for src.
func New(src string) *Script {
	h := sha1.Sum([]byte(src))
	return &Script{src: src, hash: hex.EncodeToString(h[:]), clamps: &clamps{}}
}

// NewWithHash is a Script for src whose SHA1 the caller already knows.
func NewWithHash(src, sha1 string) *Script {
	return &Script{src: src, hash: sha1, clamps: &clamps{}}
}

// ForVote returns a copy of s for a vote that compares its replies as
// reply says and, when builds is not nil, may touch keys it builds from
// its declared keys: each starts with one of builds (a literal, or "")
// followed by a declared key. The vote holds the gate of every such key.
func (s *Script) ForVote(reply Shape, builds []string) *Script {
	c := *s
	c.reply, c.builds, c.clamps = reply, builds, &clamps{}
	return &c
}

// CapReplies returns a copy of s whose wrapper (Guarded, Clamped) fails
// the script, with an error, when one of its redis.call or redis.pcall
// replies is an array, map or set of more than n elements; 0 caps
// nothing. A script whose work was counted with replies of at most n
// elements (one that walks or measures them) then does no more.
func (s *Script) CapReplies(n int) *Script {
	c := *s
	c.replyCap, c.clamps = n, &clamps{}
	return &c
}

// Source returns the Lua text, for EVAL.
func (s *Script) Source() string { return s.src }

// Hash returns the lower-case hex SHA1 of the source, for EVALSHA.
func (s *Script) Hash() string { return s.hash }

// Reply is how a vote compares s's replies across backends (ForVote).
func (s *Script) Reply() Shape { return s.reply }

// Builds are the starts of the keys s may build from its declared keys
// (ForVote), nil when it builds none.
func (s *Script) Builds() []string { return s.builds }

// IsClamped reports whether s is a clamp (Clamped, ClampedHeld): each
// backend's reply is then the report and the body's reply (SplitClamped).
func (s *Script) IsClamped() bool { return s.clamped }

// Sendable is what a vote sends for s: s, or its Guarded form when s is
// enforced and not in a wrapper yet (sent bare, it would run unchecked).
func (s *Script) Sendable() *Script {
	if s.enforce != nil && !s.isWrapper {
		return s.Guarded()
	}
	return s
}
