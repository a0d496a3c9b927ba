package tier

import (
	"cmp"
	"slices"
	"time"
)

// Member is one live proxy of the tier, as this proxy sees it.
type Member struct {
	// Addr is the address the member announced, host:port: where its
	// clients reach it.
	Addr string
	// ID is the member process's id, 40 hex digits, new at every start.
	ID string
	// Joined is when the member joined, on its own clock (ms precision):
	// the earliest-joined live member is advertised.
	Joined time.Time
	// Seen is when this proxy last read the entry from a quorum, and Until
	// how long a quorum holds it at least, both on this proxy's clock.
	Seen, Until time.Time
	// Self: this process.
	Self bool
}

// sighting is what a view knows of one entry.
type sighting struct {
	seen, until time.Time
}

// view is the entries held by a quorum, each until when it is known to
// be. It is a plain value: Tier guards it.
type view struct {
	quorum  int
	entries map[entry]sighting
}

func newView(quorum int) *view {
	return &view{quorum: quorum, entries: map[entry]sighting{}}
}

// observe counts one heartbeat round, sent at sent, from the backends
// that answered: each entry that a quorum of them holds is live at least
// until sent + the quorum-th largest remaining ttl. An entry that fewer
// backends returned keeps what an earlier round found.
func (v *view) observe(sent time.Time, rounds []round) {
	copies := map[entry][]time.Duration{}
	for _, r := range rounds {
		for _, c := range r.copies {
			copies[c.entry] = append(copies[c.entry], c.remaining)
		}
	}
	for e, rem := range copies {
		if len(rem) < v.quorum {
			continue
		}
		slices.SortFunc(rem, func(a, b time.Duration) int { return cmp.Compare(b, a) })
		until := sent.Add(rem[v.quorum-1])
		s := v.entries[e]
		s.seen = sent
		if until.After(s.until) {
			s.until = until
		}
		v.entries[e] = s
	}
}

// prune forgets the entries no longer live at now.
func (v *view) prune(now time.Time) {
	for e, s := range v.entries {
		if !now.Before(s.until) {
			delete(v.entries, e)
		}
	}
}

// members are the entries live at now, one per address (the latest-joined
// instance: a proxy restarted on the same address replaces its old entry),
// earliest joined first, ties by address. self marks this process's entry.
func (v *view) members(now time.Time, self entry) []Member {
	byAddr := map[string]entry{}
	for e, s := range v.entries {
		if !now.Before(s.until) {
			continue
		}
		if cur, ok := byAddr[e.addr]; !ok || later(e, cur) {
			byAddr[e.addr] = e
		}
	}
	out := make([]Member, 0, len(byAddr))
	for _, e := range byAddr {
		s := v.entries[e]
		out = append(out, Member{
			Addr: e.addr, ID: e.id, Joined: time.UnixMilli(e.joined),
			Seen: s.seen, Until: s.until, Self: e == self,
		})
	}
	slices.SortFunc(out, func(a, b Member) int {
		if c := a.Joined.Compare(b.Joined); c != 0 {
			return c
		}
		return cmp.Compare(a.Addr, b.Addr)
	})
	return out
}

// live reports whether e is live at now.
func (v *view) live(now time.Time, e entry) bool {
	s, ok := v.entries[e]
	return ok && now.Before(s.until)
}

// later orders two instances on one address: the later-joined one is the
// current one; ids break a tie.
func later(a, b entry) bool {
	if a.joined != b.joined {
		return a.joined > b.joined
	}
	return a.id > b.id
}
