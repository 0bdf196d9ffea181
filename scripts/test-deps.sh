#!/usr/bin/env bash
# Makes sure the tools a test target runs are installed: `test` (the
# PostgreSQL server binaries for the private cluster, unless
# RECONCILER_TEST_DATABASE_URL is set; promtool, Debian's prometheus
# package, for the alert rules; chromium for the status page) or
# `objectstack` (redis-server, Node.js 20 or later, npm). What is missing is
# installed with apt-get when this runs as root on a machine that has it;
# otherwise it fails at once, naming the packages to install.
set -euo pipefail

target=${1:?usage: test-deps.sh test|objectstack}
missing=()
need() { # need PACKAGE CHECK...
  local pkg=$1; shift
  "$@" >/dev/null 2>&1 || missing+=("$pkg")
}
has() { command -v "$1"; }
case "$target" in
test)
  if [ -z "${RECONCILER_TEST_DATABASE_URL:-}" ]; then
    need postgresql sh -c 'command -v initdb || ls /usr/lib/postgresql/*/bin/initdb'
  fi
  need prometheus has promtool
  need chromium has chromium
  ;;
objectstack)
  if [ -z "${RECONCILER_TEST_DATABASE_URL:-}" ]; then
    need postgresql sh -c 'command -v initdb || ls /usr/lib/postgresql/*/bin/initdb'
  fi
  need redis-server has redis-server
  need nodejs has node
  need npm has npm
  ;;
*)
  echo "test-deps: unknown target $target (want test or objectstack)" >&2
  exit 2
  ;;
esac
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: installing ${missing[*]} (apt-get)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  exit 0
fi
echo "test-deps: make $target needs these packages, missing here: ${missing[*]}" >&2
echo "  install them (Debian/Ubuntu: sudo apt-get install ${missing[*]}), or run make as root to install them with apt-get" >&2
exit 1
