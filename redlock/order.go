package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Writes by vote (VoteClamped) of one key through one Redlock run one at
// a time: the key's gate is held until every node's call returned. Two
// proxies have no gate in common, so their writes of one key could reach
// the nodes in different orders, and a write whose result depends on the
// order (HSET of one field to two values, APPEND, LPUSH) would leave nodes
// that differ for good: with more than two writers, no quorum agrees on
// any value. So, inside the gate, a write by vote also takes the keys'
// order lock: a Redlock lock of OrderPrefix+key on a quorum, with a token
// of its own, held like the gate until every node's call returned and
// then released in the background. Of two writes at once through two
// proxies, one waits for the other; each node then applies them in the
// order the order lock was held, as long as no call is delayed past the
// lock's ttl (orderTTL), which is Redlock's own assumption.

// OrderPrefix starts the keys of the order locks (reserved: clients
// cannot name them).
const OrderPrefix = ReservedPrefix + "order:"

// orderWait bounds the wait for another proxy's writes of the same keys;
// past it the write fails with ErrOrderBusy.
const orderWait = 10 * time.Second

// ErrOrderBusy: another proxy kept writing the keys for orderWait.
var ErrOrderBusy = errors.New("writes of these keys through another proxy kept their order lock")

// orderTTL is the order lock's ttl: long enough for the acquisition and
// the vote with its script timeout and kills, within MaxTTL (the restart
// quarantine covers it) when there is one.
func (r *Redlock) orderTTL() time.Duration {
	ttl := max(time.Second, 2*(r.scriptTimeout+2*r.nodeTimeout))
	if r.maxTTL > 0 {
		ttl = min(ttl, r.maxTTL)
	}
	return ttl
}

// order takes the order lock of keys for one write by vote, waiting for
// other proxies' writes of them, and returns its release (run in the
// background once every node's call of the write returned). With one
// node there is one order: nothing to take.
func (r *Redlock) order(ctx context.Context, keys []string) (release func(), err error) {
	if len(r.nodes) == 1 || len(keys) == 0 {
		return func() {}, nil
	}
	send, _ := unique(keys)
	locks := make([]string, len(send))
	for i, k := range send {
		locks[i] = OrderPrefix + k
	}
	token, err := NewToken()
	if err != nil {
		return nil, err
	}
	ttl := r.orderTTL()
	deadline := r.now().Add(orderWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		_, err := r.AcquireKeys(ctx, locks, token, ttl, IfAbsent)
		switch {
		case err == nil:
			return func() { r.bg.Go(func() { r.releaseOrder(locks, token, ttl) }) }, nil
		case !errors.Is(err, ErrHeld):
			return nil, fmt.Errorf("order: %w", err)
		case r.now().After(deadline):
			return nil, fmt.Errorf("%w (%v)", ErrOrderBusy, orderWait)
		}
		// Held through another proxy: its write ends within ttl. A
		// random pause, so that two proxies that split the nodes do not
		// meet again.
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("order: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// releaseOrder gives the order lock back; a failure is logged, and the
// lock ends at its ttl.
func (r *Redlock) releaseOrder(locks []string, token string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), ttl)
	defer cancel()
	if _, err := r.ReleaseKeys(ctx, locks, token); err != nil {
		r.log.Debug("order lock not released: it ends at its ttl", "keys", locks, "error", err)
	}
}
