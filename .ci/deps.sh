#!/usr/bin/env bash
# Installs what the tests need when it is missing: redis-server and
# redis-cli from Debian/Ubuntu packages. As root it runs apt-get; otherwise
# it prints the exact command and fails.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  exit 0
fi
echo "missing test prerequisites: ${missing[*]}" >&2
echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
exit 1
