package redlock

import (
	"regexp"
	"testing"
)

func TestNewToken(t *testing.T) {
	urlSafe := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	seen := make(map[string]bool)
	for range 1000 {
		tok, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if !urlSafe.MatchString(tok) {
			t.Fatalf("token %q is not 22 URL-safe characters", tok)
		}
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
}
