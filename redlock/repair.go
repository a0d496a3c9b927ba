package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
)

// Repair of held keys on backends that came back empty. The restart
// quarantine (health.go) keeps a restarted node from voting until every
// lock it may have forgotten has expired: max_ttl. A hold (a key the tier
// keeps beyond max_ttl, docs/safety.md "Holds") never expires while its
// owner wants it, so waiting does not make it safe: if a majority restarts
// empty, the survivors alone hold the key, and once the quarantine ends
// the restarted nodes would grant it to a second client. So the renewal
// of a hold writes the key back to every quarantined node that lacks it,
// copied (DUMP, RESTORE) from a voting node that holds the hold's own
// copy, together with its field in the record and its stamp (package
// record), so that the record stays readable there (holdsread.go), before the
// quarantine ends: a quarantine outlasts a renewal round
// (max_ttl ≥ default_ttl). While nodes are quarantined a quorum may not
// vote at all, so the copies on the other nodes are extended there too,
// node by node, where they still hold the value: the hold's owner keeps
// its own copies alive until the quarantine ends and the renewal's quorum
// counts again. A node whose data is older than its quarantine (not
// restarted) never gets a copy: it holds what it held. A node stays a
// target for one lease after its quarantine ended: a write sent to it
// before the restart was noticed (it counted for nothing) may have left
// a copy of another value there, which Repair leaves alone and which
// expires (its ttl at most max_ttl) near the quarantine's end; the
// held key is written once it is gone.

// Repair copies the hold h (h.Digest record.AnyDigest: any value of any type),
// its key with its field in the record of service, to every node that is
// quarantined (restarted, fresh, or its clock jumped) and lacks the key,
// with a lease of ttl, and gives that lease to every other copy of the
// hold (voting nodes, and quarantined ones written back before). A copy
// of the hold is one whose field is of h.Digest and whose expiry is the
// one the hold stamped. It reports how many quarantined nodes it wrote.
// With no quarantined node it does no I/O, so a renewal may call it every
// round. It fails when no voting node holds the hold's copy (ErrNotHeld)
// or a quarantined node could not be written; a node that holds another
// value or another copy of the key is left as it is.
func (r *Redlock) Repair(ctx context.Context, service string, h record.Field, ttl time.Duration) (int, error) {
	if ttl < time.Millisecond || !h.Valid() {
		return 0, fmt.Errorf("%w: repair %+v for %v", ErrInvalid, h, ttl)
	}
	digest := h.Digest
	if digest == record.AnyDigest {
		digest = ""
	}
	var targets, sources []Node
	now := r.now()
	for i, nh := range r.health {
		nh.mu.Lock()
		state, _ := nh.state(now)
		recent := !nh.until.IsZero() && now.Before(nh.until.Add(ttl))
		nh.mu.Unlock()
		switch {
		case state == StateQuarantined, state == StateUp && recent:
			targets = append(targets, r.nodes[i])
		}
		if state == StateUp {
			sources = append(sources, r.nodes[i])
		}
	}
	if len(targets) == 0 || len(sources) == 0 {
		return 0, nil // nothing to repair, or nothing to copy from
	}
	keys := append([]string{h.Key}, record.Keys(service)...)
	dump, err := r.dumpFrom(ctx, sources, keys, digest, h.Digest, ttl)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, t := range targets {
		cctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
		v, err := t.Eval(cctx, record.RestoreScript, keys, backend.Millis(ttl), dump, h.Encode(), h.Digest, digest)
		cancel()
		switch x, _ := asInt(v); {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", t.Addr(), err))
		case x == 1:
			n++
		}
	}
	if n > 0 {
		r.log.Info("wrote a held key back to backends that restarted empty", "key", h.Key, "nodes", n)
	}
	return n, errors.Join(errs...)
}

// dumpFrom gives ttl to the hold's copies on nodes (keys: the key, the
// record, the stamps), and returns the DUMP of one of them.
func (r *Redlock) dumpFrom(ctx context.Context, nodes []Node, keys []string, digest, fieldDigest string, ttl time.Duration) (string, error) {
	dumps := make([]string, len(nodes))
	done := make(chan struct{}, len(nodes))
	for i, n := range nodes {
		r.bg.Go(func() {
			defer func() { done <- struct{}{} }()
			cctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
			defer cancel()
			if v, err := n.Eval(cctx, record.DumpScript, keys, digest, backend.Millis(ttl), fieldDigest); err == nil {
				dumps[i], _ = v.(string)
			}
		})
	}
	for range nodes {
		<-done
	}
	for _, d := range dumps {
		if d != "" {
			return d, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("repair: %w", err)
	}
	return "", fmt.Errorf("repair %q: %w on any voting node", keys[0], ErrNotHeld)
}
