package backend

import (
	"testing"
	"time"
)

func TestParseInfo(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\n" +
		"# Memory\r\nmaxmemory_policy:allkeys-lru\r\n# Persistence\r\nloading:1\r\n" +
		"# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"
	want := Probe{RunID: "abc123", Uptime: 42 * time.Second, Loading: true,
		MaxMemoryPolicy: "allkeys-lru", Role: "master", Replicas: 2}
	if got := parseInfo(info); got != want {
		t.Fatalf("parseInfo = %+v, want %+v", got, want)
	}
	if got := parseInfo("# Clients\nconnected_clients:1\n"); got != (Probe{Uptime: -1}) {
		t.Fatalf("parseInfo of miniredis = %+v", got)
	}
}
