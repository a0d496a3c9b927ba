package main

import (
	"github.com/alicebob/miniredis/v2"
)

// devBackends are in-process miniredis servers for -dev mode.
type devBackends []*miniredis.Miniredis

// startDevBackends starts n embedded backends. They live and die with this
// process, so the locks they hold are neither durable nor fault tolerant;
// conf.Config.Warnings says so first thing in the log.
func startDevBackends(n int) (devBackends, error) {
	var dev devBackends
	for range n {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			dev.Close()
			return nil, err
		}
		dev = append(dev, m)
	}
	return dev, nil
}

// Addrs are the backends' host:port addresses.
func (d devBackends) Addrs() []string {
	out := make([]string, len(d))
	for i, m := range d {
		out[i] = m.Addr()
	}
	return out
}

// Close stops every backend.
func (d devBackends) Close() {
	for _, m := range d {
		m.Close()
	}
}
