package relay

import "github.com/redlock-proxy/redlock-proxy/redlock/resp"

// The relay's backend connections speak RESP3 (HELLO 3) and encode and
// read it with package resp: resp.Read's values, error replies among them
// as values (ServerError), never as its error.

// Push is an out-of-band frame: ["message", channel, payload], …
type Push = resp.Push

// ServerError is an error reply from a backend.
type ServerError = resp.Error

// str reads a string value, bulk or simple; ok false for anything else.
func str(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case resp.Status:
		return string(s), true
	}
	return "", false
}
