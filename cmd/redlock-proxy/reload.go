package main

import (
	"os"
	"runtime"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/conf"
)

// reload applies a re-read configuration to the running proxy on SIGHUP.
// Only what is safe to change under live connections is applied: the log
// level (hclog's level is shared by every Named sub-logger), procs, max_clients
// (for connections accepted from then on), and the listener's TLS files,
// read again on every SIGHUP so that a rotated certificate is served from
// the next handshake on (paths may change too; turning TLS on or off may
// not). Every other key keeps its running value and is logged as refused:
// the backends, ttl bounds and quarantine length are safety parameters
// that the locks already granted depend on, and the listeners would drop
// connections.
func (d *daemon) reload(load func() (conf.Config, error)) {
	next, err := load()
	if err != nil {
		d.log.Error("config reload failed: keeping the running config", "error", err)
		return
	}
	certsReloaded := d.reloadCerts(next)
	changes := conf.Changes(d.cfg, next)
	if len(changes) == 0 {
		d.log.Info("config reloaded: nothing changed")
		return
	}
	for _, ch := range changes {
		switch ch.Key {
		case "log_level":
			// Log where both the old and the new level show it.
			lvl := hclog.LevelFromString(next.LogLevel)
			if lvl > d.log.GetLevel() {
				d.changed(ch)
				d.log.SetLevel(lvl)
			} else {
				d.log.SetLevel(lvl)
				d.changed(ch)
			}
			d.cfg.LogLevel = next.LogLevel
		case "max_clients":
			d.srv.SetMaxClients(next.MaxClients)
			d.cfg.MaxClients = next.MaxClients
			d.changed(ch)
		case "procs":
			setProcs(next.Procs)
			d.cfg.Procs = next.Procs
			d.changed(ch)
			d.log.Info("threads", "threads", runtime.GOMAXPROCS(0))
		case "tls":
			if !certsReloaded {
				d.log.Warn("config change refused: restart to turn TLS on or off, or fix the files", "key", ch.Key, "running", ch.Old, "file", ch.New)
				continue
			}
			d.cfg.TLS = next.TLS
			d.changed(ch)
		default:
			d.log.Warn("config change refused: restart to apply", "key", ch.Key, "running", ch.Old, "file", ch.New)
		}
	}
}

// reloadCerts reads the tls block's files again when TLS runs and the file
// still has the block, and reports whether the new ones are served.
func (d *daemon) reloadCerts(next conf.Config) bool {
	if d.certs == nil || next.TLS == nil {
		return false
	}
	leaf, err := d.certs.reload(next.TLS)
	if err != nil {
		d.log.Error("TLS reload failed: keeping the running certificate", "error", err)
		return false
	}
	d.log.Info("TLS files reloaded", "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(), "not-after", leaf.NotAfter)
	return true
}

func (d *daemon) changed(ch conf.Change) {
	d.log.Info("config changed", "key", ch.Key, "old", ch.Old, "new", ch.New)
}

// isReload reports the signal that asks for a reload.
func isReload(sig os.Signal) bool { return sig == syscall.SIGHUP }
