// Package conf holds the proxy's configuration: the Config struct, its
// defaults, the HCL config file, the environment, the flags, and the checks
// that make a Config safe to serve with.
//
// # Precedence
//
// Later sources override earlier ones:
//
//	defaults (Default) < file (LoadFile) < environment (ApplyEnv) < flags (Flags.Apply)
//
// cmd/redlock-proxy is the only place that touches argv, the environment
// and os.Exit; this package never reads os.Environ itself. Main declares
// the settings' flags with NewFlags and builds the configuration with
// Load, which runs
//
//	Default → LoadFile (if -config) → ApplyEnv(os.LookupEnv) → Flags.Apply → ResolveSecrets → Validate
//
// and the daemon logs cfg.String() and each of cfg.Warnings() at start.
//
// # One declaration per setting
//
// Each setting is one field of Config, and its tags are all there is to
// it; settings.go reads them once, at start. For example
//
//	MaxTTL time.Duration `hcl:"max_ttl,optional" default:"60s" bound:"[min_ttl, 24h]" doc:"…"`
//
// The tags:
//
//	hcl      its key in the file, which gohcl decodes
//	default  its value when nothing sets it (none: the zero value)
//	bound    what Validate enforces and -help shows: "[lo, hi]", "(lo, hi]", ">= lo" or
//	         "0 or [lo, hi]" for numbers and durations, where an end may name another
//	         key of the same type ("[1, max_bulk_bytes]"); "a|b|c" for strings
//	check    instead of bound, a function of validate.go's checks, for what an
//	         interval cannot say (addresses, backend URLs)
//	flag     the flag's name when it is not the key with dashes (-max-ttl);
//	         "-" for none (the password stays out of argv)
//	alias    deprecated values and what they stand for ("catalog=recognised"),
//	         accepted and warned at start
//	secret   "true": shown as <set> or <unset>, never as it is
//	url      "true": a backend URL, shown with its credentials hidden
//	doc      the line -help prints
//
// Adding a setting is adding its field to Config: its file key, flag,
// default, bound, help line and place in String and Changes follow. Then
// the daemon hands the field to the one constructor that uses it
// (cmd/redlock-proxy/daemon.go), and a setting that SIGHUP may change gets
// a case in cmd/redlock-proxy/reload.go. The table of keys, defaults and
// bounds is Config itself; `redlock-proxy -help` prints it.
//
// # The file
//
// The file is HCL, decoded with gohcl. Keys present replace the value from
// the layer below; keys absent leave it. An unknown key or block is hcl's
// error, at its file:line:col, with "Did you mean …?" when a known name is
// close; a value of the wrong type is an error naming the key
// ("tls.cert_file" inside a block). Problems come one per place, in file
// order, ten at most. Durations are Go duration strings ("50ms", "30s",
// "1h"); "0" (or the number 0) is zero. HCL converts between strings and
// numbers where it can, so max_clients = "100" is accepted, max_clients =
// "many" is not.
//
//	listen       = "127.0.0.1:6380"
//	backends     = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"]
//	node_timeout = "50ms"
//	max_ttl      = "60s"
//	requirepass_file = "/etc/redlock-proxy/password"
//
// Blocks, each a Go struct with hcl tags decoded by gohcl (blocks.go), with
// its bounds in validator.blocks:
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
// Validate reports every broken bound as a *ValidationError naming the key,
// its value and the bound ("conf: max_ttl = 48h: must be <= 24h"); a bound
// set by another key names it ("must be <= max_bulk_bytes 8192"), unless
// that key is broken itself, so that one bad value gives one error.
//
// # Secrets
//
// The password comes, best first, from REDLOCK_PROXY_REQUIREPASS, from
// requirepass_file (first line, trailing "\r\n" removed), or from requirepass
// in the file; never from a flag. The environment variable, when set and
// non-empty, replaces both file keys. Setting requirepass and
// requirepass_file together is an error. String and GoString show the
// password only as <set>/<unset> and replace credentials in backend URLs by
// "xxxxx"; validation errors redact backend URLs the same way.
//
// # Reload
//
// Changes lists the keys that differ between two configurations, secrets
// redacted; cmd/redlock-proxy uses it on SIGHUP to apply what can change at
// run time (log_level, max_clients, the tls block's certificate files) and
// to refuse, by key, what needs a restart.
//
// # Where safety depends on this package
//
// max_ttl is a safety parameter, not a convenience: a restarted backend's
// votes are ignored for max_ttl plus drift, so a lock can never outlive the
// quarantine. default_ttl is the lease of locks without expiry (holds):
// with 0, acquisitions without expiry (SETNX, SET NX) and PERSIST of a
// lock are refused: they need the renewed lease. Data (a plain SET, HSET
// …) never depends on it: it carries exactly the expiry the client gave. Fewer than 3 or an even number of backends is allowed
// and warned: 2 tolerate no failure, 4 no more than 3.
package conf
