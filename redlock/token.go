package redlock

import (
	"crypto/rand"
	"encoding/base64"
)

// tokenBytes is the token's entropy: 128 bits.
const tokenBytes = 16

// NewToken returns 16 bytes from crypto/rand as unpadded base64url text
// (22 characters, safe in URLs and Redis arguments).
func NewToken() (string, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
