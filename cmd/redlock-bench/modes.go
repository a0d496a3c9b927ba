package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// releaseScript is the compare-and-delete of the modes that lock with SET
// NX (proxy-setnx, proxy-mux, single): -1 when the key is gone, 0 when
// someone else holds it, 1 when this value held it and it was deleted. The
// proxy recognises what it does and runs it as a quorum release.
var releaseScript = redis.NewScript(releaseSource)

const releaseSource = `local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
if cur ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])`

// targets are the servers a run talks to.
type targets struct {
	proxy string
	// proxy2 is a second proxy over the same backends, for -handoff across
	// proxies: -proxy2, or started by -spawn with -handoff; "" otherwise.
	proxy2   string
	backends []string
	// metrics is the proxy's metrics_listen address, known only when
	// -spawn started the proxy; "" otherwise.
	metrics string
	// proxyPID and backendPIDs are the spawned processes (-spawn): 0 and
	// nil otherwise.
	proxyPID    int
	backendPIDs []int
}

// A locker is one client's view of a mode: it holds its connections and the
// token of the lock it currently holds. It is used by one goroutine.
type locker interface {
	// acquire tries once; false with a nil error means the key is held.
	acquire(ctx context.Context, key string) (bool, error)
	// release gives back the lock acquire took; not releasing it is an error.
	release(ctx context.Context, key string) error
	close()
}

// A mode is one way of taking a lock.
type mode struct {
	name string
	// needs says which targets the mode uses, for the usage check.
	needsProxy, needsBackends bool
	// prepare runs once per run before the clients open (may be nil).
	prepare func(ctx context.Context, t targets) error
	open    func(t targets, ttl time.Duration) locker
	// openAll, when set, opens every client at once instead of open (the
	// clients then share something: proxy-mux's one connection).
	openAll func(t targets, ttl time.Duration, clients int) ([]locker, error)
}

var modes = append([]*mode{
	{name: "proxy", needsProxy: true, open: openProxy},
	{name: "proxy-setnx", needsProxy: true, prepare: prepareProxySetNX, open: openProxySetNX},
	{name: "proxy-mux", needsProxy: true, prepare: prepareProxySetNX, openAll: openProxyMux},
	{name: "redsync", needsBackends: true, open: openRedsync},
	{name: "single", needsBackends: true, prepare: prepareSingle, open: openSingle},
}, legacyModes()...)

func modeNames() []string {
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.name
	}
	return names
}

func modeByName(name string) *mode {
	for _, m := range modes {
		if m.name == name {
			return m
		}
	}
	return nil
}

// quietLogger drops go-redis's own log lines (dial retries and the like):
// the benchmark counts and prints every error itself.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) }

// newClient is a go-redis client with one connection and nothing hidden:
// no retries, no identity or maintenance handshakes on connect.
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                     addr,
		PoolSize:                 1,
		MaxRetries:               -1,
		DialTimeout:              2 * time.Second,
		ReadTimeout:              5 * time.Second,
		WriteTimeout:             2 * time.Second,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// newValue is a fresh 128-bit random lock value.
func newValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func ttlMS(ttl time.Duration) string { return strconv.FormatInt(ttl.Milliseconds(), 10) }

// proxy: LOCK key ttl-ms → [token, validity, fence] | null; UNLOCK key token.
type proxyLocker struct {
	c     *redis.Client
	ttl   string
	token string
}

func openProxy(t targets, ttl time.Duration) locker {
	return &proxyLocker{c: newClient(t.proxy), ttl: ttlMS(ttl)}
}

func (l *proxyLocker) acquire(ctx context.Context, key string) (bool, error) {
	reply, err := l.c.Do(ctx, "LOCK", key, l.ttl).Slice()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var tok string
	if len(reply) == 3 {
		tok, _ = reply[0].(string)
	}
	if tok == "" {
		return false, fmt.Errorf("LOCK: unexpected reply %v", reply)
	}
	l.token = tok
	return true, nil
}

func (l *proxyLocker) release(ctx context.Context, key string) error {
	n, err := l.c.Do(ctx, "UNLOCK", key, l.token).Int64()
	return released("UNLOCK", n, err)
}

// released is a release's error: err, or the lock lost when what replied
// other than 1.
func released(what string, n int64, err error) error {
	if err == nil && n != 1 {
		err = fmt.Errorf("%s replied %d: the lock was lost before its release", what, n)
	}
	return err
}

func (l *proxyLocker) close() { _ = l.c.Close() }

// setNXLocker: SET key value PX ttl NX, then releaseScript by EVALSHA
// (EVAL on NOSCRIPT), through the proxy (proxy-setnx) or on one backend
// (single).
type setNXLocker struct {
	c     *redis.Client
	ttl   string
	value string
}

func openProxySetNX(t targets, ttl time.Duration) locker {
	return &setNXLocker{c: newClient(t.proxy), ttl: ttlMS(ttl)}
}

func openSingle(t targets, ttl time.Duration) locker {
	return &setNXLocker{c: newClient(t.backends[0]), ttl: ttlMS(ttl)}
}

// prepareProxySetNX loads the release script once, so that every release
// is one EVALSHA the proxy carries out as a quorum release.
func prepareProxySetNX(ctx context.Context, t targets) error {
	return loadRelease(ctx, t.proxy, "the proxy")
}

func prepareSingle(ctx context.Context, t targets) error {
	return loadRelease(ctx, t.backends[0], t.backends[0])
}

func loadRelease(ctx context.Context, addr, where string) error {
	c := newClient(addr)
	defer c.Close()
	if err := releaseScript.Load(ctx, c).Err(); err != nil {
		return fmt.Errorf("SCRIPT LOAD on %s: %w", where, err)
	}
	return nil
}

func (l *setNXLocker) acquire(ctx context.Context, key string) (bool, error) {
	l.value = newValue()
	err := l.c.Do(ctx, "SET", key, l.value, "PX", l.ttl, "NX").Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// release runs the script loaded by prepare; should the server have lost
// it, go-redis falls back to EVAL.
func (l *setNXLocker) release(ctx context.Context, key string) error {
	n, err := releaseScript.Run(ctx, l.c, []string{key}, l.value).Int64()
	return released("release script", n, err)
}

func (l *setNXLocker) close() { _ = l.c.Close() }

// redsyncLocker is client-side Redlock: its own redsync instance over one
// PoolSize-1 client per backend, one try per acquire so a latency sample is
// one attempt.
type redsyncLocker struct {
	clients []*redis.Client
	rs      *redsync.Redsync
	ttl     time.Duration
	m       *redsync.Mutex
}

func openRedsync(t targets, ttl time.Duration) locker {
	l := &redsyncLocker{ttl: ttl}
	pools := make([]rsredis.Pool, len(t.backends))
	for i, addr := range t.backends {
		c := newClient(addr)
		l.clients = append(l.clients, c)
		pools[i] = goredis.NewPool(c)
	}
	l.rs = redsync.New(pools...)
	return l
}

func (l *redsyncLocker) acquire(ctx context.Context, key string) (bool, error) {
	l.m = l.rs.NewMutex(key, redsync.WithExpiry(l.ttl), redsync.WithTries(1))
	err := l.m.LockContext(ctx)
	if err == nil {
		return true, nil
	}
	if redsyncBusy(err) {
		return false, nil
	}
	return false, err
}

// redsyncBusy: the lock was refused because others hold it on enough nodes
// to deny a quorum, and no node failed.
func redsyncBusy(err error) bool {
	var nodeErr *redsync.RedisError
	if errors.As(err, &nodeErr) {
		return false
	}
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	return errors.As(err, &taken) || errors.As(err, &nodeTaken)
}

func (l *redsyncLocker) release(ctx context.Context, _ string) error {
	ok, err := l.m.UnlockContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("redsync Unlock: released on fewer than a quorum")
	}
	return nil
}

func (l *redsyncLocker) close() {
	for _, c := range l.clients {
		_ = c.Close()
	}
}
