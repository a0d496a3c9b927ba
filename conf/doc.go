// Package conf holds the proxy's configuration: the Config struct, its
// defaults, the HCL config file, the environment, and the checks that make a
// Config safe to serve with.
//
// # Precedence
//
// Later sources override earlier ones:
//
//	defaults (Default) < file (LoadFile) < environment (ApplyEnv) < flags
//
// Flags are parsed and applied by cmd/redlock-proxy, the only place that
// touches argv, the environment and os.Exit; this package never reads
// os.Environ itself. The expected order in main is
//
//	cfg := conf.Default()
//	cfg, err = conf.LoadFile(path, cfg)   // if -config is given
//	cfg.ApplyEnv(os.LookupEnv)
//	// apply flags that were set
//	err = cfg.ResolveSecrets()
//	err = cfg.Validate()
//	logger.Info("config", "config", cfg.String()); for _, w := range cfg.Warnings() { logger.Warn(w) }
//
// # The file
//
// The file is HCL. Keys present replace the value from the layer below; keys
// absent leave it. An unknown key or block is an error naming the key and its
// file:line:col; a value of the wrong type is an error naming the key.
// Durations are Go duration strings ("50ms", "30s", "1h"); "0" (or the
// number 0) is zero. HCL converts between strings and numbers where it can,
// so max_clients = "100" is accepted, max_clients = "many" is not.
//
//	listen       = "127.0.0.1:6380"
//	backends     = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"]
//	node_timeout = "50ms"
//	max_ttl      = "60s"
//	requirepass_file = "/etc/redlock-proxy/password"
//
// # Secrets
//
// The password comes, best first, from REDLOCK_PROXY_REQUIREPASS, from
// requirepass_file (first line, trailing "\r\n" removed), or from requirepass
// in the file. The environment variable, when set and non-empty, replaces
// both file keys. Setting requirepass and requirepass_file together is an
// error. String and GoString show the password only as <set>/<unset> and
// replace credentials in backend URLs by "xxxxx"; validation errors redact
// backend URLs the same way.
//
// # Keys, defaults and bounds
//
//	key               default          bound
//	listen            127.0.0.1:6380   host:port, port in [0, 65535] (0 = any free port; empty host = all interfaces)
//	backends          []               at least 1 unless dev; each redis://host[:port][/db], rediss://… or host:port;
//	                                   port in [1, 65535] (default 6379); no query string; no two on the same host:port
//	dev               false            five embedded in-process backends; configured backends are then ignored (warned)
//	node_timeout      50ms             (0, 10s]
//	script_timeout    500ms            [10ms, 1m]          a script by vote runs this long on a backend, then SCRIPT KILL
//	drift_factor      0.01             [0, 0.1]
//	min_ttl           10ms             [1ms, 24h]
//	max_ttl           60s              [min_ttl, 24h]
//	default_ttl       30s              0 (no expiry, warned) or [min_ttl, max_ttl]
//	max_wait          10s              [0, 5m]
//	max_hold          1h               [1s, 168h]
//	log_level         info             trace | debug | info | warn | error
//	log_format        text             text | json
//	max_clients       10000            [1, 1000000]
//	idle_timeout      5m               >= 0 (0 = never)
//	write_timeout     10s              (0, 5m]
//	shutdown_timeout  10s              (0, 10m]
//	strict            false            refuse to start on backend problems that are otherwise warnings
//	protected_mode    true             with no password, accept loopback clients only
//	allow_flush       false            let clients flush lock state
//	startup_quarantine true            backends with uptime < max_ttl+drift do not vote at start
//	health_interval   1s               [10ms, 1m]          backend probes: run_id, clock, loading, down
//	down_after        3                [1, 1000]           consecutive failures that mark a backend down
//	requirepass       ""               any; never logged
//	requirepass_file  ""               readable file with a non-empty first line; not together with requirepass
//	auth_fail_limit   10               [1, 100000]         failed AUTHs per client network (IPv4 address, IPv6 /64) …
//	auth_fail_window  10s              [1s, 1h]            … within this window; then AUTH is refused until it passes
//	max_args          1024             [16, 1048576]       arguments per command (after AUTH)
//	max_bulk_bytes    1048576          [4096, 536870912]   bytes per argument (after AUTH)
//	max_inline_bytes  65536            [1024, 1048576]     bytes per inline command line
//	max_key_bytes     1024             [1, max_bulk_bytes]
//	max_value_bytes   4096             [1, max_bulk_bytes] lock tokens and values
//	scripts           vote             vote or catalog: scripts not recognised as lock operations run by vote on every backend, or are refused
//	max_pipeline      1024             [1, 1048576] commands in flight per client connection; then the proxy stops reading it
//	announce          ""               "" or host:port (not a wildcard host), port in [1, 65535]: how clients
//	                                   reach this proxy, announced to the tier; "" = listen's address, or
//	                                   none (warned) when listen is a wildcard
//	service_name      redlock          1 to 128 printable ASCII characters, no spaces: the master name the
//	                                   SENTINEL commands answer for; proxies of one service see each other
//	metrics_listen    ""               "" (off) or host:port, port in [0, 65535], not listen's address;
//	                                   serves /metrics (Prometheus), /healthz and /readyz over HTTP
//
// Blocks:
//
//	tls { cert_file key_file [client_ca_file] }
//	    client-facing TLS; with client_ca_file, clients need a certificate it signed
//	backend_tls { [ca_file] [cert_file key_file] [server_name] [insecure_skip_verify] }
//	    TLS to rediss:// backends; system roots when ca_file is empty
//	user "name" { password | password_file, commands = ["LOCK", …] or ["*"],
//	              [keys = ["orders:*"]], [admin = true] }
//	    proxy-level users, separate from backend credentials; passwords are
//	    never shown by String, GoString or Validate
//
// Durations reject negatives. Validate reports every broken bound as a
// *ValidationError ("conf: max_ttl = 48h: must be <= 24h").
//
// # Reload
//
// Changes lists the keys that differ between two configurations, secrets
// redacted; cmd/redlock-proxy uses it on SIGHUP to apply what can change at
// run time (log_level, max_clients) and to refuse, by key, what needs a
// restart.
//
// # Where safety depends on this package
//
// max_ttl is a safety parameter, not a convenience: a restarted backend's
// votes are ignored for max_ttl plus drift, so a lock can never outlive the
// quarantine. default_ttl = 0 lets SETNX-style writes live forever, which a
// backend restart without persistence turns into two holders; it is allowed
// because clients asked for it, and warned. Fewer than 3 or an even number of
// backends is allowed and warned: 2 tolerate no failure, 4 no more than 3.
package conf
