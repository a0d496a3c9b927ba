package commands

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
)

// catalog lists the lock scripts the proxy recognises. SHA1s are of the
// exact bytes each library sends (recomputed from the
// libraries' sources); fingerprints are of the normalised text (see
// fingerprint). K1 is the first key, A1.. the arguments.
var catalog = []script{
	// redsync v4 (Go).
	{library: "redsync", role: "release", fingerprint: "34b1e2231b54d37a0e6d3e924d4eed1bc8105bed", minKeys: 1, minArgs: 1,
		sha1s: []string{"e950836ed1e694540c503ef9972b8de518044d3b"}, run: releaseTernary},
	{library: "redsync", role: "extend", fingerprint: "c50343e01dd9310b37fcced0dccd5ac1eecff492", minKeys: 1, minArgs: 2,
		sha1s: []string{"d75bb8b5bd13532ddedd17762e772346e39b321e"}, run: extendBool(redlock.Replace)},
	{library: "redsync", role: "extend-or-acquire", fingerprint: "2a284f4023ab08fe40436afd3e4b2a90d7f089ea", minKeys: 1, minArgs: 2,
		sha1s: []string{"b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79"}, run: acquireBool(redlock.IfAbsentOrMine)},

	// node-redlock v4 and v5 (Node.js): multi-resource, all-or-nothing.
	{library: "node-redlock", role: "acquire", fingerprint: "553dd04ae84661066255e93d1f84179ceb51e041", minKeys: 1, minArgs: 2,
		sha1s: []string{"e5a322e2634ef59a516e8ea150cb085afafee684", "96da70f7716f27d278a5218544df37fd8b0a5e4c"}, run: acquireCount},
	{library: "node-redlock", role: "extend", fingerprint: "bdc4520f56bc05f928e229c28338dca2c3c1fd91", minKeys: 1, minArgs: 2,
		sha1s: []string{"ce46f80993d5dac20dd066eb301a4e37994bdbed", "aed6f382e410db8ba7926d4e5e9aab410bf2a78a"}, run: extendCount},
	{library: "node-redlock", role: "release", fingerprint: "9a480bddcbbcf77bfd83f4de59809637ef1c4a3c", minKeys: 1, minArgs: 1,
		sha1s: []string{"0f0f23b9048b36752b5be114f357ba083449f908", "e4612211c9f8f51c257e26e056b0a654b3187242"}, run: releaseCount},

	// redis-py Lock (Python), 3.x to 8.x.
	{library: "redis-py", role: "release", fingerprint: "2aef8d7ce63503709a01cbf6ad6bb4b93d5c3909", minKeys: 1, minArgs: 1,
		sha1s: []string{"c3f8721cbb97f72bc19e972846bd7aaf91901658"}, run: releaseBool},
	{library: "redis-py", role: "extend", fingerprint: "829408cc83d4524666232bd8beebe3bcf873ac70", minKeys: 1, minArgs: 3,
		sha1s: []string{"a4e8783852e6b949f9ef3a97212805108459a890"}, run: extendRedisPy},
	{library: "redis-py", role: "reacquire", fingerprint: "042112cf75a3fdabb4e02600ce494eff4b2d2906", minKeys: 1, minArgs: 2,
		sha1s: []string{"1cac51482acf5858da00f6d685d68f886cd6b6b2"}, run: extendBool(redlock.Replace)},

	// pottery (Python).
	{library: "pottery", role: "release", fingerprint: "e9f69f2beb755be68b5e456ee2ce9aadfbc4ebf4", minKeys: 1, minArgs: 1,
		sha1s: []string{"a4aada0b36710970eedaaaeec4a6b7d8c78c4f80"}, run: releaseBool},
	{library: "pottery", role: "extend", fingerprint: "9136fcf51831e5cf49f109b6e9c97d5b675280d6", minKeys: 1, minArgs: 2,
		sha1s: []string{"ba015a80261b616e7a62d35df0b8e3edbe6c9414"}, run: extendBool(redlock.Replace)},
	{library: "pottery", role: "remaining", fingerprint: "dbe2502e4a14a4e11508e847678c4f8c9781a40a", minKeys: 1, minArgs: 1,
		sha1s: []string{"f5f7bd3a3aa4a63c507c1155c5ea1219b350d992"}, run: remainingMs},

	// aioredlock (Python asyncio): errors are the library's "ERROR".
	{library: "aioredlock", role: "set", fingerprint: "e8ac5dc2944ad24c5dd9a6747c669e4d83acd1b1", minKeys: 1, minArgs: 2,
		sha1s: []string{"c75a9bf1538efcdb1f383acc3e273c5089d57e58"}, run: aioSet},
	{library: "aioredlock", role: "release", fingerprint: "f83825e5bb60ed38eaf8a329c3f4daf2da1ee7bb", minKeys: 1, minArgs: 1,
		sha1s: []string{"241e4ca540a1cc4ec1f32d9eb9f879e607d7e6e5"}, run: aioRelease},
	{library: "aioredlock", role: "ttl", fingerprint: "15869a6cca4050b51ffee82b6f94bd06bac818c2", minKeys: 1, minArgs: 1,
		sha1s: []string{"f908d3f43dbcabc68fc0c9ecaf1fa4a285ecdb0a"}, run: aioTTL},

	// redlock-rb 2 (Ruby).
	{library: "redlock-rb", role: "acquire", fingerprint: "b2eb2880b8b708780c9d6dc78af94644fec63c94", minKeys: 1, minArgs: 3,
		sha1s: []string{"ceb2b2062e40c51a2b3963fd078bc71f11bdc65c"}, run: rbAcquire},
	{library: "redlock-rb", role: "release", fingerprint: "b70c2384248f88e6b75b9f89241a180f856ad852", minKeys: 1, minArgs: 1,
		sha1s: []string{"8e4905cee18e7c3188d10f2b8b170e403baed34f"}, run: releaseBool},
	{library: "redlock-rb", role: "get", fingerprint: "5306e7b9af49775f32d6ad215504420c185dff0e", minKeys: 1, minArgs: 0,
		sha1s: []string{"78d2ca48a6dc9ef6892059792a3a0c5237733d64"}, run: rbGet},

	// RedLock.net 2.3 (C#), built with LF or CRLF line endings.
	// Its fingerprint is pottery's release: same text, same meaning.
	{library: "RedLock.net", role: "release", minKeys: 1, minArgs: 1,
		sha1s: []string{"18b2a577dbe847b16bebde190d69a1613d68e60e", "cb0427378f700ddb2f0e9394dbb0a40bd6dba04a"}, run: releaseBool},
	{library: "RedLock.net", role: "extend", fingerprint: "7f17b1a6ff1889668e77763900d04e8257f6a861", minKeys: 1, minArgs: 2,
		sha1s: []string{"9f614a785a5f9ae8c6396c6b4bf94d2087342603", "3e7c6bf3e080bb97a92e77362149c26252b98212"}, run: netExtend},

	// redlock-php (plain EVAL every time): the upstream text and its forks'.
	{library: "redlock-php", role: "release", fingerprint: "013976d92eab7585a652ddbf0f4ae3746f38b191", minKeys: 1, minArgs: 1,
		sha1s: []string{"bec85b1c518b7ba0348a49c79b24adbb1ca95d3b", "ccd35e8ab1f9d465d6610127d234bfd0e2855c72"}, run: releaseBool},
}

// ttlArg reads a ttl in ms from a script argument within [min_ttl, max_ttl].
func (d *Dispatcher) ttlArg(s string) (time.Duration, Reply) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errNotInteger
	}
	return d.ttlIn(ms, time.Millisecond)
}

// acquireKeys runs an acquisition for a script and reports granted or not.
func (d *Dispatcher) acquireKeys(ctx context.Context, keys []string, token, ttlArg string, mode redlock.AcquireMode) (bool, Reply) {
	ttl, r := d.ttlArg(ttlArg)
	if r != nil {
		return false, r
	}
	_, err := d.leases.Acquire(ctx, nil, lease.Request{Keys: keys, Token: token, TTL: ttl, Mode: mode})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redlock.ErrHeld):
		return false, nil
	}
	return false, d.lockError(err)
}

// extendKeys runs an extension for a script and reports done or not.
func (d *Dispatcher) extendKeys(ctx context.Context, keys []string, token, ttlArg string, mode redlock.ExtendMode) (bool, Reply) {
	ttl, r := d.ttlArg(ttlArg)
	if r != nil {
		return false, r
	}
	_, err := d.leases.Extend(ctx, keys, token, ttl, mode)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redlock.ErrNotHeld):
		return false, nil
	}
	return false, d.lockError(err)
}

// releaseKeys releases for a script and returns each key's state.
func (d *Dispatcher) releaseKeys(ctx context.Context, keys []string, token string) ([]redlock.KeyState, Reply) {
	states, err := d.leases.ReleaseKeys(ctx, keys, token)
	if err != nil {
		return nil, d.lockError(err)
	}
	return states, nil
}

// acquireBool: 1 granted, 0 not.
func acquireBool(mode redlock.AcquireMode) scriptFunc {
	return func(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
		ok, r := d.acquireKeys(ctx, keys[:1], argv[0], argv[1], mode)
		if r != nil {
			return r
		}
		return boolInt(ok)
	}
}

// extendBool: 1 extended, 0 not held.
func extendBool(mode redlock.ExtendMode) scriptFunc {
	return func(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
		ok, r := d.extendKeys(ctx, keys[:1], argv[0], argv[1], mode)
		if r != nil {
			return r
		}
		return boolInt(ok)
	}
}

// releaseBool: 1 released, 0 not held.
func releaseBool(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	states, r := d.releaseKeys(ctx, keys[:1], argv[0])
	if r != nil {
		return r
	}
	return boolInt(states[0] == redlock.Released)
}

// releaseTernary (redsync): 1 released, 0 another owner, -1 absent.
func releaseTernary(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	states, r := d.releaseKeys(ctx, keys[:1], argv[0])
	if r != nil {
		return r
	}
	switch states[0] {
	case redlock.Released:
		return Int(1)
	case redlock.Absent:
		return Int(-1)
	}
	return Int(0)
}

// acquireCount (node-redlock): the number of keys locked, or 0.
func acquireCount(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	ok, r := d.acquireKeys(ctx, keys, argv[0], argv[1], redlock.IfAbsent)
	if r != nil {
		return r
	}
	if !ok {
		return Int(0)
	}
	return Int(len(keys))
}

// extendCount (node-redlock): the number of keys extended, or 0.
func extendCount(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	ok, r := d.extendKeys(ctx, keys, argv[0], argv[1], redlock.Replace)
	if r != nil {
		return r
	}
	if !ok {
		return Int(0)
	}
	return Int(len(keys))
}

// releaseCount (node-redlock): the number of keys released.
func releaseCount(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	states, r := d.releaseKeys(ctx, keys, argv[0])
	if r != nil {
		return r
	}
	return Int(countReleased(states))
}

// extendRedisPy: A3 "0" adds A2 ms to the remaining ttl, else sets it.
func extendRedisPy(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	mode := redlock.Replace
	if argv[2] == "0" {
		mode = redlock.Add
	}
	return extendBool(mode)(d, ctx, keys, argv)
}

// remainingMs (pottery): the key's remaining ms if it holds A1, else 0.
func remainingMs(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	v, err := d.read(ctx, keys[0])
	if err != nil {
		return d.lockError(err)
	}
	if !v.Exists || v.Data != argv[0] || v.PTTL < 0 {
		return Int(0)
	}
	return Int(v.PTTL.Milliseconds())
}

// aioredlock answers failures with a script error whose text is ERROR.
const aioError = Error("ERROR")

// aioSet: set if absent or already ours, PX A2: OK, else the ERROR error.
func aioSet(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	ok, r := d.acquireKeys(ctx, keys[:1], argv[0], argv[1], redlock.IfAbsentOrMine)
	if r != nil {
		return r
	}
	if !ok {
		return aioError
	}
	return OK
}

// aioRelease: absent → OK, ours → deleted (1), another owner → ERROR.
func aioRelease(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	states, r := d.releaseKeys(ctx, keys[:1], argv[0])
	if r != nil {
		return r
	}
	switch states[0] {
	case redlock.Released:
		return Int(1)
	case redlock.Absent:
		return OK
	}
	return aioError
}

// aioTTL: the remaining ttl in seconds when the key holds A1, else ERROR.
func aioTTL(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	v, err := d.read(ctx, keys[0])
	if err != nil {
		return d.lockError(err)
	}
	if !v.Exists || v.Data != argv[0] {
		return aioError
	}
	if v.PTTL < 0 {
		return Int(-1)
	}
	return Int((v.PTTL.Milliseconds() + 500) / 1000)
}

// rbAcquire (redlock-rb): A3 "yes" allows an absent key; a key holding A1
// is re-set. OK on success, null otherwise.
func rbAcquire(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	var ok bool
	var r Reply
	if argv[2] == "yes" {
		ok, r = d.acquireKeys(ctx, keys[:1], argv[0], argv[1], redlock.IfAbsentOrMine)
	} else {
		ok, r = d.extendKeys(ctx, keys[:1], argv[0], argv[1], redlock.Replace)
	}
	if r != nil {
		return r
	}
	if !ok {
		return Null{}
	}
	return OK
}

// rbGet (redlock-rb): [value, pttl] as a quorum sees them.
func rbGet(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	v, err := d.read(ctx, keys[0])
	if err != nil {
		return d.lockError(err)
	}
	if !v.Exists {
		return Array{Null{}, Int(-2)}
	}
	pttl := int64(-1)
	if v.PTTL >= 0 {
		pttl = v.PTTL.Milliseconds()
	}
	return Array{BulkString(v.Data), Int(pttl)}
}

// netExtend (RedLock.net): absent → set, ours → re-expire: 1; another
// owner: -1 (the library's "conflicted").
func netExtend(d *Dispatcher, ctx context.Context, keys, argv []string) Reply {
	ok, r := d.acquireKeys(ctx, keys[:1], argv[0], argv[1], redlock.IfAbsentOrMine)
	if r != nil {
		return r
	}
	if !ok {
		return Int(-1)
	}
	return Int(1)
}
