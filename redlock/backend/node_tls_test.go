package backend

import (
	"crypto/tls"
	"testing"
)

func TestDialNodeTLSOptions(t *testing.T) {
	custom := &tls.Config{InsecureSkipVerify: true}
	for _, tc := range []struct {
		url        string
		tc         *tls.Config
		wantTLS    bool
		serverName string
		insecure   bool
	}{
		{"redis://127.0.0.1:6379", custom, false, "", false},
		{"127.0.0.1:6379", custom, false, "", false},
		{"rediss://db.example:6380", nil, true, "db.example", false},
		{"rediss://db.example:6380", custom, true, "db.example", true},
		{"rediss://db.example:6380", &tls.Config{ServerName: "other"}, true, "other", false},
		{"rediss://db.example:6380?skip_verify=true", &tls.Config{}, true, "db.example", true},
	} {
		n, err := DialNodeTLS(tc.url, tc.tc)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		got := n.opts.TLSConfig
		n.Close()
		if (got != nil) != tc.wantTLS {
			t.Fatalf("%s: TLS = %v, want %v", tc.url, got != nil, tc.wantTLS)
		}
		if got == nil {
			continue
		}
		if got.ServerName != tc.serverName || got.InsecureSkipVerify != tc.insecure || got.MinVersion < tls.VersionTLS12 {
			t.Errorf("%s: ServerName %q insecure %v min %x, want %q %v ≥ TLS 1.2",
				tc.url, got.ServerName, got.InsecureSkipVerify, got.MinVersion, tc.serverName, tc.insecure)
		}
	}
	if custom.ServerName != "" || custom.MinVersion != 0 {
		t.Fatal("DialNodeTLS changed the caller's tls.Config")
	}
}
