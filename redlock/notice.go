package redlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Release notices. With Options.ReleaseNotices, every release and delete
// this Redlock makes publishes, from the script that deletes on each
// backend, one message per key it deleted there, on that key's notice
// channel (NoticeChannel): a tag of the token it held (TokenTag; empty
// for an unconditional delete). A proxy whose waiters wait for a key held
// elsewhere subscribes to its channel and wakes them at once, instead of
// polling (see package lease); a key nobody waits for costs its release
// one PUBLISH that reaches no one. A backend's native compare-and-delete
// cannot publish, so with notices every release runs the scripts.

// NoticePrefix starts every release notice channel.
const NoticePrefix = ReservedPrefix + "released:"

// NoticeChannel is the channel of key's release notices.
func NoticeChannel(key string) string { return NoticePrefix + key }

// The notifying scripts: the plain ones, and a PUBLISH of the tag to the
// notice prefix (ARGV[2]) .. the key, for each key deleted.
var (
	delNoticeScript = script.New(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	redis.call("DEL", KEYS[1], KEYS[2])
	redis.call("PUBLISH", ARGV[2] .. KEYS[1], ARGV[3])
	return 1
end
return 0`)

	releaseNoticeScript = script.New(`
local out, n = {}, #KEYS / 2
for i = 1, n do
	local key = KEYS[i]
	local held = redis.call("GET", key)
	if held == ARGV[1] then
		redis.call("DEL", key, KEYS[n + i])
		redis.call("PUBLISH", ARGV[2] .. key, ARGV[3])
		out[i] = 1
	elseif held then
		out[i] = -1
	else
		out[i] = 0
	end
end
return out`)
)

// TokenTag is what a release notice says of the token: enough to tell
// whether a lock this proxy remembers is the one released, never the
// token itself (a notice is visible to anyone who subscribes on a
// backend).
func TokenTag(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// releaseCall is Release's command: a compare-and-delete, notifying when
// notices are on.
func (r *Redlock) releaseCall(key, token string) backend.Command {
	if !r.notices.Load() {
		return backend.Command{Kind: backend.CallCAD, Keys: []string{key}, Value: token}
	}
	return backend.Command{Kind: backend.CallEval, Script: delNoticeScript, Keys: []string{key, markKey(key)}, Args: []any{token, NoticePrefix, TokenTag(token)}}
}

// releaseKeysCall is ReleaseKeys' command.
func (r *Redlock) releaseKeysCall(keys []string, token string) backend.Command {
	keys = withMarkers(keys)
	if !r.notices.Load() {
		return backend.Command{Kind: backend.CallEval, Script: releaseScript, Keys: keys, Args: []any{token}}
	}
	return backend.Command{Kind: backend.CallEval, Script: releaseNoticeScript, Keys: keys, Args: []any{token, NoticePrefix, TokenTag(token)}}
}

// checkNotices runs a release notice's PUBLISH once on every node: a node
// whose ACL refuses it would fail every release, so notices are turned
// off instead, and the problem returned ("" when there is none). A node
// that does not answer is not judged.
func (r *Redlock) checkNotices(ctx context.Context) string {
	if !r.notices.Load() {
		return ""
	}
	replies, err := r.DoAll(ctx, "notice check", "EVAL", noticeCheck, 0, NoticePrefix)
	if err != nil {
		return ""
	}
	for i, nr := range replies {
		if nr.Err != nil && aclDenied(nr.Err) {
			r.notices.Store(false)
			return fmt.Sprintf("backend %s: its user may not PUBLISH on %s* (%v): release notices are off, so waiters on other proxies poll; grant it as docs/operations.md says",
				r.health[i].addr, NoticePrefix, nr.Err)
		}
	}
	return ""
}

// aclDenied reports an ACL refusal: NOPERM, or how Redis 7.0 words it
// inside a script.
func aclDenied(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "The user executing the script can't")
}

// noticeCheck is the PUBLISH a release notice makes, alone.
const noticeCheck = `return redis.call("PUBLISH", ARGV[1], "")`
