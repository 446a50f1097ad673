#!/usr/bin/env bash
# Build ddbench's local base image without any registry: Debian bookworm (minbase + python3)
# made by debootstrap from the Debian mirror apt uses here, then `docker import`ed.
#   containers/base/build.sh [TAG]          default TAG: ddbench/base:bookworm
# Env: DDBENCH_DEBIAN_MIRROR overrides the mirror; DDBENCH_BASE_FORCE=1 rebuilds an existing tag.
# Needs root (debootstrap) and a Docker daemon.
set -euo pipefail

TAG=${1:-ddbench/base:bookworm}
SUITE=bookworm
# python3 is what the refengine image runs; bookworm's is 3.11, the ABI our wheels are built for
PACKAGES=python3
CPYTHON=${DDBENCH_BASE_CPYTHON:-}
if [ -n "$CPYTHON" ]; then
  [ -x "$CPYTHON/bin/python3" ] || { echo "base: DDBENCH_BASE_CPYTHON=$CPYTHON has no bin/python3" >&2; exit 1; }
  "$CPYTHON/bin/python3" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' \
    || { echo "base: DDBENCH_BASE_CPYTHON=$CPYTHON is not CPython 3.12" >&2; exit 1; }
  # what _ssl, _ctypes, _sqlite3, _lzma, _bz2, readline, _uuid, _hashlib link; gcc/g++ and the C
  # headers for triton's launcher stubs and flashinfer's JIT (nvcc comes with the CUDA wheels)
  PACKAGES=ca-certificates,libssl3,libffi8,libsqlite3-0,liblzma5,libbz2-1.0,zlib1g,libexpat1,libreadline8,libncursesw6,libuuid1,libgssapi-krb5-2,libnsl2,libtirpc3,libnuma1,gcc,g++,libc6-dev,procps
fi

if [ "${DDBENCH_BASE_FORCE:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base: $TAG exists ($(docker image inspect -f '{{.Id}}' "$TAG")); DDBENCH_BASE_FORCE=1 rebuilds it"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "base: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "base: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

mirror() {
  # the first Debian URI apt is configured with, deb822 (URIs:) or one-line (deb URL suite) format
  local f
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    [ -f "$f" ] || continue
    awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit} /^deb / && $2 ~ /debian\/?$/ {print $2; exit} /^deb \[/ {for(i=3;i<=NF;i++) if ($i ~ /debian\/?$/) {print $i; exit}}' "$f"
  done | head -n1
}
MIRROR=${DDBENCH_DEBIAN_MIRROR:-$(mirror)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

ROOT=$(mktemp -d /tmp/ddbench-base.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
echo "base: debootstrap $SUITE (minbase + $PACKAGES) from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT/rootfs" "$MIRROR" >"$ROOT/debootstrap.log" 2>&1 \
  || { tail -n 30 "$ROOT/debootstrap.log" >&2; echo "base: debootstrap failed" >&2; exit 1; }

# what an image never needs: package caches, docs, man pages, translations
rm -rf "$ROOT"/rootfs/var/cache/apt/archives/*.deb "$ROOT"/rootfs/var/lib/apt/lists/* \
       "$ROOT"/rootfs/usr/share/doc/* "$ROOT"/rootfs/usr/share/man/* "$ROOT"/rootfs/usr/share/info/* \
       "$ROOT"/rootfs/usr/share/locale/* "$ROOT"/rootfs/var/log/*.log
if [ -n "$CPYTHON" ]; then
  tar -C "$CPYTHON" --exclude='./lib/python3*/test' --exclude='./lib/python3*/site-packages/*' \
      --exclude='__pycache__' -cf - . | { mkdir -p "$ROOT/rootfs/opt/python3.12" && tar -C "$ROOT/rootfs/opt/python3.12" -xf -; }
  echo /opt/python3.12/lib > "$ROOT/rootfs/etc/ld.so.conf.d/python3.12.conf"
  chroot "$ROOT/rootfs" ldconfig
  for name in python3 python3.12 python; do ln -sf /opt/python3.12/bin/python3.12 "$ROOT/rootfs/usr/local/bin/$name"; done
fi
python_version=$(chroot "$ROOT/rootfs" python3 -c 'import platform, ssl, ctypes, sqlite3, lzma, bz2, zlib; print(platform.python_version())') \
  || { echo "base: the image's python3 does not start or lacks a standard module" >&2; exit 1; }
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)

tar -C "$ROOT/rootfs" --numeric-owner -cf - . | docker import \
  --change 'CMD ["/bin/bash"]' \
  --change 'ENV LANG=C.UTF-8' \
  --change "LABEL org.opencontainers.image.title=ddbench-base org.opencontainers.image.created=$created ddbench.debian.suite=$SUITE ddbench.debian.mirror=$MIRROR ddbench.python=$python_version ddbench.python.source=${CPYTHON:-debian}" \
  - "$TAG" >/dev/null
echo "base: $TAG ($(docker image inspect -f '{{.Id}} {{.Size}}' "$TAG") bytes), python $python_version"
