#!/usr/bin/env bash
# Builds the release binaries into dist/: static (CGO_ENABLED=0), -trimpath,
# linux/amd64 and linux/arm64, with a SHA256SUMS file. The version, commit
# and dirty flag come from the Go toolchain's build information (a tag when
# the commit has one).
#
# With DIST_CHECK=1 (the default) it then builds the same commit again with
# an empty build cache — in a fresh clone at another path when the tree is
# clean — and fails unless every binary is byte-identical.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${DIST_DIR:-dist}
PLATFORMS=${DIST_PLATFORMS:-"linux/amd64 linux/arm64"}

build() { # build SRC_DIR OUT_DIR
  local src=$1 out=$2 p os arch
  mkdir -p "$out"
  rm -f "$out"/reconciler-* "$out"/SHA256SUMS
  for p in $PLATFORMS; do
    os=${p%/*} arch=${p#*/}
    (cd "$src" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOFLAGS=-buildvcs=true \
      "$GO" build -trimpath -ldflags "-s -w" -o "$out/reconciler-$os-$arch" ./cmd/reconciler)
  done
  (cd "$out" && sha256sum reconciler-* > SHA256SUMS)
}

tmp=$(mktemp -d /tmp/reconciler-dist.XXXXXX)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
# A clean tree is built from fresh clones of HEAD (what a tag's release is);
# a dirty one in place, and its binaries say "dirty".
clean=1
if [ -n "$(git status --porcelain 2>/dev/null)" ] || ! git rev-parse HEAD >/dev/null 2>&1; then clean=0; fi
source_tree() { # source_tree NAME: a fresh clone of HEAD, or . when dirty
  if [ "$clean" = 1 ]; then
    git clone -q --no-hardlinks . "$tmp/$1"
    git -C "$tmp/$1" checkout -q --detach "$(git rev-parse HEAD)"
    echo "$tmp/$1"
  else
    echo .
  fi
}
[ "$clean" = 1 ] || echo "dist: the tree is dirty: building it in place"

build "$(source_tree a)" "$PWD/$OUT"
cat "$OUT/SHA256SUMS"
host="$OUT/reconciler-$("$GO" env GOOS)-$("$GO" env GOARCH)"
if [ -x "$host" ]; then "$host" version; fi

if [ "${DIST_CHECK:-1}" = 1 ]; then
  src=$(source_tree "b/at/another/depth")
  GOCACHE="$tmp/cache" build "$src" "$tmp/out"
  if ! diff "$OUT/SHA256SUMS" "$tmp/out/SHA256SUMS"; then
    echo "dist: FAIL: a second build of the same commit is not byte-identical" >&2
    exit 1
  fi
  echo "dist: reproducible: a second build (empty build cache, source at $src) is byte-identical"
fi
