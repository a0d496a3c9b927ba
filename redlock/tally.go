package redlock

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Deciders for await: each counts one kind of node reply and says when the
// outcome is certain.

// counts is what every decider counts. By itself it waits for every node
// and never loses early.
type counts struct {
	n, q     int
	answered int     // definite answers
	errs     []error // node errors, as *NodeError
}

func (r *Redlock) counts() counts { return counts{n: len(r.nodes), q: r.quorum} }

func (c *counts) fail(err error) { c.errs = append(c.errs, err) }

func (c *counts) pending() int { return c.n - c.answered - len(c.errs) }

// short: so many nodes failed that fewer than a quorum can ever answer.
func (c *counts) short() bool { return len(c.errs) > c.n-c.q }

// settled: a failure can be named, because a quorum gave definite answers
// or so many nodes failed that a quorum never can.
func (c *counts) settled() bool { return c.answered >= c.q || c.short() }

func (c *counts) lost() bool { return false }

func (c *counts) done() bool { return c.pending() == 0 }

// noQuorum is the ErrNoQuorum failure for these counts.
func (c *counts) noQuorum() *QuorumError {
	return &QuorumError{Kind: ErrNoQuorum, Answered: c.answered, Nodes: c.n, Quorum: c.q, Errs: c.errs}
}

// disagreed is the failure of a vote whose replies had no quorum: too few
// answered (ErrNoQuorum), or they answered but at most agreed of them
// gave the same reply (ErrDisagree; Granted is agreed).
func (c *counts) disagreed(agreed int) *QuorumError {
	qe := c.noQuorum()
	if c.answered >= c.q {
		qe.Kind, qe.Granted = ErrDisagree, agreed
	}
	return qe
}

// tally counts yes/no answers and decides at a quorum of yes, or when a
// quorum of yes is impossible and the failure can be named.
type tally struct {
	counts
	yes int
}

func (r *Redlock) tally() *tally { return &tally{counts: r.counts()} }

func (t *tally) add(ok bool) {
	t.answered++
	if ok {
		t.yes++
	}
}

// won: a quorum said yes.
func (t *tally) won() bool { return t.yes >= t.q }

// lost: a quorum of yes is no longer possible.
func (t *tally) lost() bool { return t.yes+t.pending() < t.q }

func (t *tally) done() bool { return t.won() || t.lost() && t.settled() }

// failure classifies a failure: ErrNoQuorum when so many nodes failed that
// fewer than a quorum could ever give a definite answer, otherwise no
// (ErrHeld or ErrNotHeld).
func (t *tally) failure(no error) *QuorumError {
	qe := t.noQuorum()
	if !t.short() {
		qe.Kind = no
	}
	qe.Granted = t.yes
	return qe
}

// grantTally is an acquisition's tally: besides the grants (yes) it keeps
// the largest number made on one register version (grant.ver, best). A
// quorum of grants on one version had no plain write or delete of the
// key between them; one split across versions may count a copy that a
// delete landing between the grants removed, while another client's
// acquire takes the nodes it freed, so it is confirmed before it is
// answered (split, acquireFanout; docs/safety.md, "Grants on one
// version").
type grantTally struct {
	tally
	best int
	vers []verCount
	buf  [7]verCount
}

type verCount struct {
	ver string
	n   int
}

func (r *Redlock) grantTally() *grantTally { return &grantTally{tally: tally{counts: r.counts()}} }

func (t *grantTally) add(g grant) {
	t.tally.add(g.ok)
	if !g.ok {
		return
	}
	if t.vers == nil {
		t.vers = t.buf[:0]
	}
	i := slices.IndexFunc(t.vers, func(c verCount) bool { return c.ver == g.ver })
	if i < 0 {
		i = len(t.vers)
		t.vers = append(t.vers, verCount{ver: g.ver})
	}
	t.vers[i].n++
	t.best = max(t.best, t.vers[i].n)
}

// split: a quorum granted, but on no one version.
func (t *grantTally) split() bool { return t.won() && t.best < t.q }

// yesCount counts yes answers and waits for every node.
type yesCount struct {
	counts
	yes int
}

func (t *yesCount) add(ok bool) {
	t.answered++
	if ok {
		t.yes++
	}
}

// ttlTally is a tally whose yes carries the ttl a node set, in ms (> 0);
// it keeps the smallest among the deciding quorum.
type ttlTally struct {
	tally
	least int64
}

func (t *ttlTally) add(ms int64) {
	t.tally.add(ms > 0)
	if ms > 0 && (t.least == 0 || ms < t.least) {
		t.least = ms
	}
}

// keyTally counts per-key answers: hits (1: deleted, exists) and absent
// (0). It waits for every node, or with early set decides as soon as every
// key has a quorum of hits.
type keyTally struct {
	counts
	hits, absent []int
	early        bool
}

func (r *Redlock) keyTally(keys int, early bool) *keyTally {
	return &keyTally{counts: r.counts(), hits: make([]int, keys), absent: make([]int, keys), early: early}
}

func (t *keyTally) add(v []int64) {
	t.answered++
	for i, x := range v {
		switch x {
		case keyDeleted:
			t.hits[i]++
		case keyAbsent:
			t.absent[i]++
		}
	}
}

func (t *keyTally) done() bool {
	if t.pending() == 0 {
		return true
	}
	if !t.early {
		return false
	}
	return t.quorate() == len(t.hits)
}

// quorate counts the keys with a quorum of hits.
func (t *keyTally) quorate() int {
	n := 0
	for _, h := range t.hits {
		if h >= t.q {
			n++
		}
	}
	return n
}

// valueTally groups answers by value (absent is a value too). It waits
// for every node, or with early set decides as soon as one value has a
// quorum or none can reach one.
type valueTally struct {
	counts
	groups []agreement
	early  bool
}

// agreement is one value and the remaining ttl of each node holding it.
type agreement struct {
	v    Value
	ttls []time.Duration
}

func (r *Redlock) valueTally(early bool) *valueTally {
	return &valueTally{counts: r.counts(), early: early}
}

func (t *valueTally) add(v Value) {
	t.answered++
	for i := range t.groups {
		g := &t.groups[i]
		if g.v.Exists == v.Exists && g.v.Data == v.Data && g.v.Type == v.Type {
			g.ttls = append(g.ttls, v.PTTL)
			return
		}
	}
	t.groups = append(t.groups, agreement{v: v, ttls: []time.Duration{v.PTTL}})
}

// hasWinner reports that a quorum agrees on a value (winner without
// measuring its ttl).
func (t *valueTally) hasWinner() bool {
	for _, g := range t.groups {
		if len(g.ttls) >= t.q {
			return true
		}
	}
	return false
}

// winner returns the value a quorum agrees on, its PTTL the quorum-th
// largest remaining ttl among the nodes counted that hold it (quorumPTTL).
func (t *valueTally) winner() (Value, bool) {
	for _, g := range t.groups {
		if len(g.ttls) >= t.q {
			v := g.v
			v.PTTL = quorumPTTL(g.ttls, t.q)
			return v, true
		}
	}
	return Value{}, false
}

// quorumPTTL is how long q of the nodes whose remaining ttls are ttls will
// all still hold the key: the q-th largest, "no expiry" (negative) counting
// as the longest. It needs len(ttls) >= q.
func quorumPTTL(ttls []time.Duration, q int) time.Duration {
	s := slices.Clone(ttls)
	slices.SortFunc(s, func(a, b time.Duration) int { return cmp.Compare(longest(b), longest(a)) })
	return s[q-1]
}

// longest orders "no expiry" (negative) above every remaining ttl.
func longest(d time.Duration) time.Duration {
	if d < 0 {
		return math.MaxInt64
	}
	return d
}

func (t *valueTally) done() bool {
	if t.pending() == 0 {
		return true
	}
	if !t.early {
		return false
	}
	if t.hasWinner() {
		return true
	}
	top := 0
	for _, g := range t.groups {
		top = max(top, len(g.ttls))
	}
	return top+t.pending() < t.q && t.settled()
}
