package conf

import "testing"

func TestEffectiveAnnounce(t *testing.T) {
	for _, tc := range []struct {
		listen, announce, bound, want string
	}{
		{"127.0.0.1:6380", "", "127.0.0.1:6380", "127.0.0.1:6380"},
		{"127.0.0.1:0", "", "127.0.0.1:41234", "127.0.0.1:41234"},
		{"proxy-1.example:6380", "", "10.0.0.5:6380", "proxy-1.example:6380"},
		{"[::1]:6380", "", "", "[::1]:6380"},
		{"0.0.0.0:6380", "", "0.0.0.0:6380", ""},
		{":6380", "", "[::]:6380", ""},
		{"[::]:6380", "", "[::]:6380", ""},
		{"0.0.0.0:6380", "10.0.0.1:6380", "0.0.0.0:6380", "10.0.0.1:6380"},
		{"127.0.0.1:6380", "lb.example:7000", "127.0.0.1:6380", "lb.example:7000"},
	} {
		c := Config{Listen: tc.listen, Announce: tc.announce}
		if got := c.EffectiveAnnounce(tc.bound); got != tc.want {
			t.Errorf("listen %q announce %q bound %q: EffectiveAnnounce = %q, want %q", tc.listen, tc.announce, tc.bound, got, tc.want)
		}
	}
}
