package main

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/conf"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// reloader applies a re-read configuration to the running proxy on SIGHUP.
// Only what is safe to change under live connections is applied: the log
// level (hclog's level is shared by every Named sub-logger), max_clients
// (for connections accepted from then on), and the listener's TLS files,
// read again on every SIGHUP so that a rotated certificate is served from
// the next handshake on (paths may change too; turning TLS on or off may
// not). Every other key keeps its running value and is logged as refused:
// the backends, ttl bounds and quarantine length are safety parameters
// that the locks already granted depend on, and the listeners would drop
// connections.
type reloader struct {
	log     hclog.Logger
	running conf.Config // what runs now, as configured (before -dev)
	load    func() (conf.Config, error)
	srv     *proxy.Server
	certs   *certReloader // nil without a tls block
}

func (r *reloader) reload() {
	next, err := r.load()
	if err != nil {
		r.log.Error("config reload failed: keeping the running config", "error", err)
		return
	}
	certsReloaded := r.reloadCerts(next)
	changes := conf.Changes(r.running, next)
	if len(changes) == 0 {
		r.log.Info("config reloaded: nothing changed")
		return
	}
	for _, ch := range changes {
		switch ch.Key {
		case "log_level":
			// Log where both the old and the new level show it.
			lvl := hclog.LevelFromString(next.LogLevel)
			if lvl > r.log.GetLevel() {
				r.changed(ch)
				r.log.SetLevel(lvl)
			} else {
				r.log.SetLevel(lvl)
				r.changed(ch)
			}
			r.running.LogLevel = next.LogLevel
		case "max_clients":
			r.srv.SetMaxClients(next.MaxClients)
			r.running.MaxClients = next.MaxClients
			r.changed(ch)
		case "tls":
			if !certsReloaded {
				r.log.Warn("config change refused: restart to turn TLS on or off, or fix the files", "key", ch.Key, "running", ch.Old, "file", ch.New)
				continue
			}
			r.running.TLS = next.TLS
			r.changed(ch)
		default:
			r.log.Warn("config change refused: restart to apply", "key", ch.Key, "running", ch.Old, "file", ch.New)
		}
	}
}

// reloadCerts reads the tls block's files again when TLS runs and the file
// still has the block, and reports whether the new ones are served.
func (r *reloader) reloadCerts(next conf.Config) bool {
	if r.certs == nil || next.TLS == nil {
		return false
	}
	leaf, err := r.certs.reload(next.TLS)
	if err != nil {
		r.log.Error("TLS reload failed: keeping the running certificate", "error", err)
		return false
	}
	r.log.Info("TLS files reloaded", "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(), "not-after", leaf.NotAfter)
	return true
}

func (r *reloader) changed(ch conf.Change) {
	r.log.Info("config changed", "key", ch.Key, "old", ch.Old, "new", ch.New)
}

// releaseSessions is the shutdown step between draining the clients and
// closing the backends: the dispatcher releases every SESSION lock still
// held and waits for its renewals and releases to end.
func releaseSessions(ctx context.Context, disp *commands.Dispatcher) error {
	return disp.Shutdown(ctx)
}
