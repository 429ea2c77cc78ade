#!/usr/bin/env bash
# Builds (once) what the host-preparation tests need, cached under $HOME/.cache/gpuvet-hostprep so CI
# builds it once and every later run reuses it:
#   build: the Debian root they vet as an ssh host, a debootstrap --variant=minbase bookworm with
#          OpenSSH's server (needs root, debootstrap and Debian's mirror); prints its path.
#   repo:  the local apt repository of the stand-in packages (equivs-build of
#          internal/hostprep/hostpreptest/testdata/standin, real names and versions) and Debian's own
#          numactl (apt-get download); prints its path. Rebuilt when the stand-ins change.
# Usage: scripts/hostprep-root.sh [build|repo|path]
set -euo pipefail
suite=${GPUVET_HOSTPREP_SUITE:-bookworm}
mirror=${GPUVET_HOSTPREP_MIRROR:-http://deb.debian.org/debian}
cache=${GPUVET_HOSTPREP_CACHE:-$HOME/.cache/gpuvet-hostprep}
root=$cache/$suite-minbase
if [ "${1:-build}" = path ]; then echo "$root"; exit 0; fi
if [ "${1:-build}" = repo ]; then
  src=$(cd "$(dirname "$0")/.." && pwd)/internal/hostprep/hostpreptest/testdata
  sum=$(cd "$src" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
  repo=$cache/repo-$sum
  if [ -f "$repo/Packages.gz" ]; then echo "$repo"; exit 0; fi
  for t in equivs-build dpkg-scanpackages; do command -v $t >/dev/null || { echo "hostprep repo: no $t (apt-get install equivs dpkg-dev)" >&2; exit 1; }; done
  t0=$SECONDS
  rm -rf "$repo.tmp"; mkdir -p "$repo.tmp/build"
  cp -r "$src"/standin/. "$src"/*.xml "$src"/*.txt "$src"/*.json "$repo.tmp/build/"
  (cd "$repo.tmp/build" && for c in *.ctl; do equivs-build "$c" >equivs.log 2>&1 || { cat equivs.log >&2; exit 1; }; done && mv ./*.deb ..) || exit 1
  # Debian's own numactl (the lists may be empty on a fresh machine: update them once then).
  (cd "$repo.tmp" && { timeout 120 apt-get download -q numactl libnuma1 || { timeout 300 apt-get update -qq && timeout 120 apt-get download -q numactl libnuma1; }; } >download.log 2>&1) \
    || { cat "$repo.tmp/download.log" >&2; exit 1; }
  rm -rf "$repo.tmp/build" "$repo.tmp/download.log"
  (cd "$repo.tmp" && dpkg-scanpackages -m . /dev/null 2>/dev/null | gzip -9 > Packages.gz)
  mv "$repo.tmp" "$repo"
  echo "hostprep repo built in $((SECONDS - t0)) s" >&2
  echo "$repo"; exit 0
fi
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
