package main

import (
	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/conf"
)

// proxyUsers converts the user blocks (passwords already read from their
// files by ResolveSecrets) for the dispatcher; commands does not import conf.
func proxyUsers(users []conf.User) []commands.User {
	out := make([]commands.User, len(users))
	for i, u := range users {
		out[i] = commands.User{Name: u.Name, Password: u.Password, Commands: u.Commands, Keys: u.Keys, Admin: u.Admin, Scripts: u.Scripts}
	}
	return out
}

// passwordConfigured is what protected mode asks: does any credential
// (requirepass or a user) stand between a client and the locks?
func passwordConfigured(cfg conf.Config) bool {
	return cfg.RequirePass != "" || len(cfg.Users) > 0
}
