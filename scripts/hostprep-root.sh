#!/usr/bin/env bash
# Builds (once) the Debian root the host-preparation tests vet as an ssh host: a debootstrap
# --variant=minbase bookworm with OpenSSH's server, cached under $HOME/.cache/gpuvet-hostprep, so CI
# builds it once and every later run reuses it. Needs root, debootstrap and Debian's mirror; prints
# the root's path on its last line. Usage: scripts/hostprep-root.sh [build|path]
set -euo pipefail
suite=${GPUVET_HOSTPREP_SUITE:-bookworm}
mirror=${GPUVET_HOSTPREP_MIRROR:-http://deb.debian.org/debian}
cache=${GPUVET_HOSTPREP_CACHE:-$HOME/.cache/gpuvet-hostprep}
root=$cache/$suite-minbase
if [ "${1:-build}" = path ]; then echo "$root"; exit 0; fi
if [ -f "$root/.gpuvet-root-ok" ]; then echo "$root"; exit 0; fi
[ "$(id -u)" = 0 ] || { echo "hostprep root: not root: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "hostprep root: no debootstrap (apt-get install debootstrap)" >&2; exit 1; }
rm -rf "$root.tmp"
mkdir -p "$cache"
t0=$SECONDS
debootstrap --variant=minbase --include=openssh-server,procps "$suite" "$root.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 \
  || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
# The root is a host gpuvet logs in to: no sshd started by its package (the tests start their own),
# no apt lists (the tests' own file:// repository is the only source), no debootstrap debris.
rm -f "$root.tmp"/etc/apt/sources.list "$root.tmp"/etc/apt/sources.list.d/*
rm -rf "$root.tmp"/var/lib/apt/lists/* "$root.tmp"/var/cache/apt/archives/*.deb
touch "$root.tmp/.gpuvet-root-ok"
mv "$root.tmp" "$root"
echo "hostprep root built in $((SECONDS - t0)) s" >&2
echo "$root"
