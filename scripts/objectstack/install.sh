#!/usr/bin/env bash
# Installs the pinned ObjectStack platform (package.json + package-lock.json
# beside this script) with `npm ci` into a cache directory keyed by a hash of
# those files, reuses it when it is already complete, and prints the path of
# its node_modules on stdout (everything else goes to stderr).
#
# Cache: $RECONCILER_OBJECTSTACK_CACHE, else
#        ${XDG_CACHE_HOME:-$HOME/.cache}/reconciler-objectstack; one
#        subdirectory per lockfile hash. CI keeps it between runs.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

die() { echo "objectstack install: $*" >&2; exit 1; }

command -v node >/dev/null 2>&1 || die "node not found on PATH: install Node.js 20 or later (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || die "npm not found on PATH: install npm (apt-get install npm)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || die "node $(node --version) is too old: ObjectStack 17.4 needs Node.js 20 or later"

hash=$(cat "$here/package.json" "$here/package-lock.json" "$here/.npmrc" | sha256sum | cut -c1-16)
base=${RECONCILER_OBJECTSTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reconciler-objectstack}
dir="$base/$hash"
mkdir -p "$base"

complete() { [ -f "$dir/.complete" ] && [ -x "$dir/node_modules/.bin/os" ]; }

# One install at a time per cache (two test binaries may start together).
exec 9>"$base/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

if ! complete; then
  echo "objectstack install: npm ci into $dir (takes a few minutes the first time)" >&2
  rm -rf "$dir"
  tmp=$(mktemp -d "$base/.tmp-$hash.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp "$here/package.json" "$here/package-lock.json" "$here/.npmrc" "$tmp/"
  start=$(date +%s)
  if ! (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error) >&2; then
    die "npm ci failed (see above): check that the npm registry is reachable, or remove $base and retry"
  fi
  [ -x "$tmp/node_modules/.bin/os" ] || die "npm ci finished but node_modules/.bin/os is missing in $tmp"
  touch "$tmp/.complete"
  mv "$tmp" "$dir"
  trap - EXIT
  echo "objectstack install: done in $(( $(date +%s) - start ))s" >&2
fi
echo "$dir/node_modules"
