package record

import (
	"testing"
	"time"
)

// TestParse: a field reads as its deadline and digest, one an older proxy
// wrote with an owner alike; one it marked ended, or malformed, does not.
func TestParse(t *testing.T) {
	for f, want := range map[string]Field{"42 d": {Key: "k", Deadline: 42, Digest: "d"}, "proxyA 42 d": {Key: "k", Deadline: 42, Digest: "d"}} {
		if h, err := Parse("k", f); err != nil || h != want {
			t.Fatalf("Parse(%q) = %+v, %v", f, h, err)
		}
	}
	for _, bad := range []string{"", "d", "-1 d", "x d", "a 1 d e", "~ 0 d"} {
		if _, err := Parse("k", bad); err == nil {
			t.Fatalf("Parse(%q) accepted", bad)
		}
	}
}

// TestDecodeScanOnce: a field HSCAN returned twice (it may, across
// pages) is one hold, as last read.
func TestDecodeScanOnce(t *testing.T) {
	got, err := decodeScan([]any{"k", "0 *", int64(1000), "j", "0 *", int64(-1), "k", "5 *", int64(2000)})
	if err != nil || len(got) != 2 || got[0].Key != "k" || got[0].Deadline != 5 || got[0].Lease != 2*time.Second || got[1].Key != "j" {
		t.Fatalf("decodeScan = %+v, %v", got, err)
	}
}
