// Command redlock-proxy serves Redlock quorum locks over the Redis protocol.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/redlock-proxy/redlock-proxy/conf"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("redlock-proxy", flag.ContinueOnError)
	configFile := fs.String("config", "", "HCL configuration `file`")
	showVersion := fs.Bool("version", false, "print the version and exit")
	checkConfig := fs.String("check-config", "", "load `file` (with the environment and flags) and its TLS files, validate, print the effective config and exit: 0 ok, 2 invalid")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to `file` until shutdown (diagnostics)")
	settings := conf.NewFlags(fs) // one flag per setting: -listen, -backend, -max-ttl, …
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Println("redlock-proxy", version)
		return 0
	}

	// load builds the effective config: defaults < file < environment <
	// flags. It runs at start and again on SIGHUP.
	load := func(file string) (conf.Config, error) { return conf.Load(file, os.LookupEnv, settings) }
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
