#!/usr/bin/env bash
# Installs what the tests need when it is missing: redis-server, redis-cli,
# Python's redis client, PHP with phpredis and the PHP lock libraries
# (Symfony Lock, Laravel's cache and redis components, malkusch/lock),
# chromium (the status page rendered headless) and prometheus (promtool and
# the server, for the alert rules and the dashboard's queries) from
# Debian/Ubuntu packages (as root, with apt-get; otherwise it prints the
# exact command and fails), then the node packages of tests/node from its
# package-lock.json with npm ci.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || missing+=(python3-redis)
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
command -v php >/dev/null 2>&1 || missing+=(php-cli)
php -r 'exit(extension_loaded("redis") ? 0 : 1);' >/dev/null 2>&1 || missing+=(php-redis)
[ -f /usr/share/php/Symfony/Component/Lock/autoload.php ] || missing+=(php-symfony-lock)
[ -f /usr/share/php/Illuminate/Cache/autoload.php ] || missing+=(php-illuminate-cache)
[ -f /usr/share/php/Illuminate/Redis/autoload.php ] || missing+=(php-illuminate-redis)
[ -f /usr/share/php/Malkusch/Lock/autoload.php ] || missing+=(php-malkusch-lock)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
{ command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; } || missing+=(prometheus)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    echo "missing test prerequisites: ${missing[*]}" >&2
    echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if [ -f tests/node/package-lock.json ]; then
  (cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
fi
