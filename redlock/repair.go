package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Repair of held keys on backends that came back empty. The restart
// quarantine (health.go) keeps a restarted node from voting until every
// lock it may have forgotten has expired: max_ttl. A hold (a key the tier
// keeps beyond max_ttl, docs/safety.md "Holds") never expires while its
// owner wants it, so waiting does not make it safe: if a majority restarts
// empty, the survivors alone hold the key, and once the quarantine ends
// the restarted nodes would grant it to a second client. So the renewal
// of a hold writes the key back to every quarantined node that lacks it,
// copied (DUMP, RESTORE) from a voting node that holds the same value,
// before the quarantine ends: a quarantine outlasts a renewal round
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

// dumpIfScript answers DUMP of KEYS[1] where it holds the value of sha1
// ARGV[1] (any value of any type when ARGV[1] is ""), after giving it a
// lease of ARGV[2] ms (unless ""), else nil.
var dumpIfScript = NewScript(`
local t = redis.call("TYPE", KEYS[1]).ok
if t == "none" then return false end
if ARGV[1] ~= "" then
	if t ~= "string" or redis.sha1hex(redis.call("GET", KEYS[1])) ~= ARGV[1] then return false end
end
if ARGV[2] ~= "" then redis.call("PEXPIRE", KEYS[1], ARGV[2]) end
return redis.call("DUMP", KEYS[1])`)

// Repair copies key, holding the value of sha1 digest (hex; "" or
// AnyDigest for any value of any type), to every node that is quarantined (restarted,
// fresh, or its clock jumped) and lacks it, with a lease of ttl, and
// gives that lease to every voting node's copy that holds the value. It
// reports how many quarantined nodes it wrote. With no quarantined node
// it does no I/O, so a renewal may call it every round. It fails when no
// voting node holds the value (ErrNotHeld) or a quarantined node could
// not be written; a node that holds another value of key is left as it
// is.
func (r *Redlock) Repair(ctx context.Context, key, digest string, ttl time.Duration) (int, error) {
	if ttl < time.Millisecond || key == "" {
		return 0, fmt.Errorf("%w: repair %q for %v", ErrInvalid, key, ttl)
	}
	if digest == AnyDigest {
		digest = ""
	}
	var targets, sources []Node
	now := r.now()
	for i, h := range r.health {
		h.mu.Lock()
		state, _ := h.state(now)
		recent := !h.until.IsZero() && now.Before(h.until.Add(ttl))
		h.mu.Unlock()
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
	dump, err := r.dumpFrom(ctx, sources, key, digest, ttl)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, t := range targets {
		cctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
		_, err := t.Do(cctx, "RESTORE", key, millis(ttl), dump)
		cancel()
		switch {
		case err == nil:
			n++
		case strings.HasPrefix(err.Error(), "BUSYKEY"):
			// it holds key already (written since the restart)
		default:
			errs = append(errs, fmt.Errorf("%s: %w", t.Addr(), err))
		}
	}
	if n > 0 {
		r.log.Info("wrote a held key back to backends that restarted empty", "key", key, "nodes", n)
	}
	return n, errors.Join(errs...)
}

// dumpFrom gives ttl to the copies of key on nodes that hold the value of
// digest, and returns the DUMP of one of them.
func (r *Redlock) dumpFrom(ctx context.Context, nodes []Node, key, digest string, ttl time.Duration) (string, error) {
	dumps := make([]string, len(nodes))
	done := make(chan struct{}, len(nodes))
	for i, n := range nodes {
		r.bg.Go(func() {
			defer func() { done <- struct{}{} }()
			cctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
			defer cancel()
			if v, err := n.Eval(cctx, dumpIfScript, []string{key}, digest, millis(ttl)); err == nil {
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
	return "", fmt.Errorf("repair %q: %w on any voting node", key, ErrNotHeld)
}
