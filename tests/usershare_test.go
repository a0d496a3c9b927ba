package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestUserShareOfPrefixes: the connections of one user hold together at
// most half of the proxy's BCAST prefixes (128 of 256): the fifth
// connection of 32 prefixes is refused with the user's limit, while
// another user still gets its own.
func TestUserShareOfPrefixes(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, `user "tenant" {
  password = "tenant-secret"
  commands = ["*"]
  keys     = ["~tenant:*"]
}
user "other" {
  password = "other-secret"
  commands = ["*"]
  keys     = ["~other:*"]
}`)
	track := func(user, pass, tag string) any {
		c := testkit.Dial(t, p.Addr())
		if v := c.Do("AUTH", user, pass); v != "OK" {
			t.Fatalf("AUTH %s = %#v", user, v)
		}
		c.Do("HELLO", "3")
		cmd := []string{"CLIENT", "TRACKING", "ON", "BCAST"}
		for j := range 32 {
			cmd = append(cmd, "PREFIX", fmt.Sprintf("%s:%s:%d:", user, tag, j))
		}
		return c.Do(cmd...)
	}
	for i := range 4 {
		if v := track("tenant", "tenant-secret", fmt.Sprint(i)); v != "OK" {
			t.Fatalf("tenant connection %d: 32 prefixes = %#v", i, v)
		}
	}
	v := track("tenant", "tenant-secret", "4")
	if e, _ := v.(testkit.Error); !strings.Contains(string(e), "too many tracking prefixes") || !strings.Contains(string(e), "of this user") {
		t.Fatalf("the tenant's fifth connection = %#v, want its user's share refused", v)
	}
	if v := track("other", "other-secret", "0"); v != "OK" {
		t.Fatalf("another user's 32 prefixes = %#v", v)
	}
}
