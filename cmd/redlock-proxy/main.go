// Command redlock-proxy serves Redlock quorum locks over the Redis protocol.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/redlock-proxy/redlock-proxy/conf"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

// backendFlags collects repeated -backend flags.
type backendFlags []string

func (b *backendFlags) String() string     { return strings.Join(*b, ",") }
func (b *backendFlags) Set(v string) error { *b = append(*b, v); return nil }

func run(args []string) int {
	fs := flag.NewFlagSet("redlock-proxy", flag.ContinueOnError)
	configFile := fs.String("config", "", "HCL configuration `file`")
	listen := fs.String("listen", "", "listen `address` (default 127.0.0.1:6380)")
	var backends backendFlags
	fs.Var(&backends, "backend", "backend `URL` or host:port (repeatable; replaces the file's list)")
	migrateFrom := fs.String("migrate-from", "", "the old single Redis `URL` (or host:port) that every lock operation also takes while clients move to the proxy")
	dev := fs.Bool("dev", false, "serve with five embedded in-process backends (no Redis needed; not for production)")
	logLevel := fs.String("log-level", "", "trace|debug|info|warn|error")
	logFormat := fs.String("log-format", "", "text|json")
	maxTTL := fs.Duration("max-ttl", 0, "longest lock ttl accepted")
	showVersion := fs.Bool("version", false, "print the version and exit")
	checkConfig := fs.String("check-config", "", "load `file` (with the environment and flags) and its TLS files, validate, print the effective config and exit: 0 ok, 2 invalid")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to `file` until shutdown (diagnostics)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Println("redlock-proxy", version)
		return 0
	}

	// load builds the effective config: defaults < file < environment <
	// flags. It runs at start and again on SIGHUP.
	load := func(file string) (conf.Config, error) {
		cfg := conf.Default()
		if file != "" {
			var err error
			if cfg, err = conf.LoadFile(file, cfg); err != nil {
				return cfg, err
			}
		}
		cfg.ApplyEnv(os.LookupEnv)
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "listen":
				cfg.Listen = *listen
			case "backend":
				cfg.Backends = backends
			case "migrate-from":
				cfg.MigrateFrom = *migrateFrom
			case "dev":
				cfg.Dev = *dev
			case "log-level":
				cfg.LogLevel = *logLevel
			case "log-format":
				cfg.LogFormat = *logFormat
			case "max-ttl":
				// A smaller max_ttl brings the default ttl down with it.
				cfg.MaxTTL = *maxTTL
				cfg.DefaultTTL = min(cfg.DefaultTTL, cfg.MaxTTL)
			}
		})
		if err := cfg.ResolveSecrets(); err != nil {
			return cfg, err
		}
		return cfg, cfg.Validate()
	}
	if *checkConfig != "" {
		cfg, err := load(*checkConfig)
		if err == nil {
			_, _, err = loadTLS(cfg) // the certificate files, as a start reads them
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "redlock-proxy:", err)
			return 2
		}
		fmt.Println("config ok")
		fmt.Println(cfg.String())
		for _, w := range cfg.Warnings() {
			fmt.Println("warning:", w)
		}
		return 0
	}
	cfg, err := load(*configFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redlock-proxy:", err)
		return 2
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "redlock-proxy:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "redlock-proxy:", err)
			return 2
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	d, err := newDaemon(cfg, newLogger(cfg))
	if err == nil {
		err = d.run(sigs, func() (conf.Config, error) { return load(*configFile) })
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "redlock-proxy:", err)
		return 1
	}
	return 0
}
