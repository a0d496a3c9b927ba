package redlock

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Mirror is a required participant beside the quorum (Options.Mirror):
// package migrate's old single Redis, which every lock operation also
// takes while clients move to the nodes. Each hook starts its part beside
// the nodes' operation and returns what waits for it and combines its
// answer with the nodes' (the operation's answer, or its error). Exists
// and Stats answer at once.
type Mirror interface {
	// Acquire's wait is called once the nodes granted the keys, settle
	// once the acquisition ended (failed or not).
	Acquire(ctx context.Context, keys []string, token string, ttl time.Duration, mode AcquireMode) (wait func() error, settle func(failed bool))
	Release(ctx context.Context, keys []string, token string) func()
	Write(ctx context.Context, op string, args ...any) func() // SET, DEL, PEXPIRE, PERSIST
	Extend(ctx context.Context, keys []string, token string, ttl time.Duration, mode ExtendMode) func(time.Duration, error) (time.Duration, error)
	CompareAndSet(ctx context.Context, key, old, new string, ttl time.Duration) func(Lock, error) (Lock, error)
	RenewHold(ctx context.Context, key, digest string, ttl time.Duration) func(error) error
	GetSet(ctx context.Context, key, value string, ttl time.Duration) func(v Value, agreed bool, err error) (Value, error)
	Incr(ctx context.Context, key string, by int64) func(int64, error) (int64, error)
	Read(ctx context.Context, key string) func(Value, error) (Value, error)
	Vote(ctx context.Context, s *script.Script, keys, args []string) func(any, error) error
	// Exists returns the keys it does not hold, for the nodes to count,
	// and how many it holds.
	Exists(ctx context.Context, keys []string) (rest []string, held int)
	Stats() MigrateStats
	Close(ctx context.Context) error // after the Redlock's background work
	CloseNodes() error
}

// MigrateStats is what the old instance of a move (Options.Mirror) showed
// since the start.
type MigrateStats struct {
	Addr string // "" without one
	// HeldAcquires counts acquisitions it refused: a key held there for
	// another value.
	HeldAcquires uint64
	// LegacyHolds counts keys seen held there and not on a quorum of
	// nodes: an acquisition the nodes granted and it refused, or a read
	// that found the key only there.
	LegacyHolds uint64
}

// MigrateStats reports the old instance's counters.
func (r *Redlock) MigrateStats() MigrateStats { return r.mirror.Stats() }

// noMirror is the Mirror of a Redlock without one: the nodes' answer.
type noMirror struct{}

func (noMirror) Acquire(context.Context, []string, string, time.Duration, AcquireMode) (func() error, func(bool)) {
	return func() error { return nil }, func(bool) {}
}
func (noMirror) Release(context.Context, []string, string) func() { return func() {} }
func (noMirror) Write(context.Context, string, ...any) func()     { return func() {} }
func (noMirror) Extend(context.Context, []string, string, time.Duration, ExtendMode) func(time.Duration, error) (time.Duration, error) {
	return func(v time.Duration, err error) (time.Duration, error) { return v, err }
}
func (noMirror) CompareAndSet(context.Context, string, string, string, time.Duration) func(Lock, error) (Lock, error) {
	return func(l Lock, err error) (Lock, error) { return l, err }
}
func (noMirror) RenewHold(context.Context, string, string, time.Duration) func(error) error {
	return func(err error) error { return err }
}
func (noMirror) GetSet(context.Context, string, string, time.Duration) func(Value, bool, error) (Value, error) {
	return func(v Value, _ bool, err error) (Value, error) { return v, err }
}
func (noMirror) Incr(context.Context, string, int64) func(int64, error) (int64, error) {
	return func(v int64, err error) (int64, error) { return v, err }
}
func (noMirror) Read(context.Context, string) func(Value, error) (Value, error) {
	return func(v Value, err error) (Value, error) { return v, err }
}
func (noMirror) Vote(context.Context, *script.Script, []string, []string) func(any, error) error {
	return func(_ any, err error) error { return err }
}
func (noMirror) Exists(_ context.Context, keys []string) ([]string, int) { return keys, 0 }
func (noMirror) Stats() MigrateStats                                     { return MigrateStats{} }
func (noMirror) Close(context.Context) error                             { return nil }
func (noMirror) CloseNodes() error                                       { return nil }
