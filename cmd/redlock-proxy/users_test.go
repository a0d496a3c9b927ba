package main

import (
	"testing"

	"github.com/redlock-proxy/redlock-proxy/conf"
)

func TestPasswordConfigured(t *testing.T) {
	user := conf.User{Name: "orders", Password: "p1", Commands: []string{"LOCK"}, Keys: []string{"orders:*"}, Admin: true}
	for _, tt := range []struct {
		cfg  conf.Config
		want bool
	}{
		{conf.Config{}, false},
		{conf.Config{RequirePass: "x"}, true},
		{conf.Config{Users: []conf.User{user}}, true}, // protected mode counts users
	} {
		if got := passwordConfigured(tt.cfg); got != tt.want {
			t.Errorf("passwordConfigured(requirepass=%q, %d users) = %v", tt.cfg.RequirePass, len(tt.cfg.Users), got)
		}
	}
	got := proxyUsers([]conf.User{user})
	if len(got) != 1 || got[0].Name != "orders" || got[0].Password != "p1" || got[0].Keys[0] != "orders:*" || got[0].Commands[0] != "LOCK" || !got[0].Admin {
		t.Errorf("proxyUsers = %+v", got)
	}
}
