#!/bin/sh
# Lays out the image's whole root file system in OUT: the static binary at
# /reconciler, the CA bundle (BUNDLE, then every EXTRA_CA appended: a
# private CA of your database), a passwd/group naming the non-root user
# 65532 "reconciler", and its state directory /var/lib/reconciler (0700).
# Nothing else: no shell, no libc. The Dockerfile's build stage runs it and
# its final stage (FROM scratch) copies OUT; deploy/image_test.go runs it too
# and runs the daemon chrooted into OUT.
#
#   rootfs.sh OUT BINARY BUNDLE [EXTRA_CA...]
set -eu
out=$1 bin=$2 bundle=$3
shift 3
mkdir -p "$out/etc/ssl/certs" "$out/var/lib/reconciler"
cp "$bin" "$out/reconciler"
chmod 0755 "$out/reconciler"
cat "$bundle" > "$out/etc/ssl/certs/ca-certificates.crt"
for ca in "$@"; do
  # An unmatched glob (no extra CA) stays a pattern: skip it.
  if [ -f "$ca" ]; then cat "$ca" >> "$out/etc/ssl/certs/ca-certificates.crt"; fi
done
chmod 0644 "$out/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/:/nonexistent\nreconciler:x:65532:65532:reconciler:/var/lib/reconciler:/nonexistent\n' > "$out/etc/passwd"
printf 'root:x:0:\nreconciler:x:65532:\n' > "$out/etc/group"
chmod 0644 "$out/etc/passwd" "$out/etc/group"
chown 65532:65532 "$out/var/lib/reconciler"
chmod 0700 "$out/var/lib/reconciler"
