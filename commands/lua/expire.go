package lua

import (
	"errors"
	"strings"
)

// ExpireOptions are the conditions EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT
// take after the time, on the key's current expiry. They are parsed here
// once, for the model and for the proxy's own EXPIRE commands.
type ExpireOptions struct {
	NX bool // only when the key has no expiry
	XX bool // only when it has one
	GT bool // only when the new expiry is later (no expiry is infinite: never)
	LT bool // only when it is earlier (no expiry is infinite: always)
}

// ParseExpireOptions reads the options as Redis 7 does: any case, repeats
// allowed. The error's text is Redis's reply to a bad option or a
// combination it refuses.
func ParseExpireOptions(opts []string) (ExpireOptions, error) {
	var o ExpireOptions
	for _, s := range opts {
		switch strings.ToUpper(s) {
		case "NX":
			o.NX = true
		case "XX":
			o.XX = true
		case "GT":
			o.GT = true
		case "LT":
			o.LT = true
		default:
			return o, errors.New("ERR Unsupported option " + s)
		}
	}
	switch {
	case o.NX && (o.XX || o.GT || o.LT):
		return o, errors.New("ERR NX and XX, GT or LT options at the same time are not compatible")
	case o.GT && o.LT:
		return o, errors.New("ERR GT and LT options at the same time are not compatible")
	}
	return o, nil
}

// Allows reports whether the options let a key whose expiry is cur (Unix
// ms, 0 for none) take the expiry at.
func (o ExpireOptions) Allows(cur, at int64) bool {
	has := cur != 0
	switch {
	case o.NX && has, o.XX && !has:
		return false
	case o.GT && (!has || at <= cur), o.LT && has && at >= cur:
		return false
	}
	return true
}
