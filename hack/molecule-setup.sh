#!/usr/bin/env bash
# Prepare this machine for the Molecule scenarios (molecule/<role>/):
#  1. podman + runc + debootstrap from Debian's archive when missing (CI starts clean);
#  2. a Debian 12 base image `localhost/gpuops-debian12:latest` built with debootstrap and
#     `podman import` (no container registry is reachable), reused when present.
# The podman configuration is repo-local: molecule/containers.conf, exported as CONTAINERS_CONF by
# mk/molecule.mk (runc, cgroupfs, file events, ulimits under this machine's hard limits).
# Usage: hack/molecule-setup.sh            (idempotent; rebuild with GPUOPS_IMAGE_REBUILD=1)
#        hack/molecule-setup.sh --prefetch (`make test` starts it in the background: installs the
#                                          tools as root (hack/apt-install.sh), else leaves them to
#                                          make molecule, and builds the image; a later run waits
#                                          for it through the lock and finds the image)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
image=${GPUOPS_MOLECULE_IMAGE:-localhost/gpuops-debian12:latest}
mirror=${GPUOPS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=$top/.cache/molecule-image
export CONTAINERS_CONF=${CONTAINERS_CONF:-$top/molecule/containers.conf}

prefetch=0
[ "${1:-}" = --prefetch ] && prefetch=1
if [ $prefetch = 1 ] && [ "${GPUOPS_IMAGE_REBUILD:-0}" = 1 ]; then
  # make molecule would rebuild it once more after waiting: leave the one rebuild to it
  echo "molecule-setup: GPUOPS_IMAGE_REBUILD=1, the rebuild is left to make molecule"; exit 0
fi
missing() {
  need=()
  command -v podman >/dev/null || need+=(podman)
  command -v runc >/dev/null || need+=(runc)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  [ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)   # podman --init
  [ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
}
missing
if [ ${#need[@]} -gt 0 ] && [ $prefetch = 1 ] && { [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; }; then
  echo "molecule-setup: ${need[*]} missing, left to make molecule"; exit 0
fi

mkdir -p "$cache"
# one at a time, the tools' install and the image build (the background prefetch of `make test` and `make molecule`)
exec 9>"$cache/.lock"
if ! flock -n 9; then
  echo "molecule-setup: waiting for the setup already under way (log .cache/molecule-setup.log)"
  flock 9
fi
missing
if [ ${#need[@]} -gt 0 ]; then
  echo "molecule-setup: installing ${need[*]}"
  "$top/hack/apt-install.sh" "${need[@]}" fuse-overlayfs slirp4netns uidmap
fi
if [ "${GPUOPS_IMAGE_REBUILD:-0}" != 1 ] && podman image exists "$image"; then
  echo "molecule-setup: image $image present"
  exit 0
fi

tarball=$cache/debian12-rootfs.tar
if [ "${GPUOPS_IMAGE_REBUILD:-0}" = 1 ] || [ ! -s "$tarball" ]; then
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  echo "molecule-setup: debootstrap bookworm into $root (a few minutes)"
  # python3 for Ansible, systemd for services, apt helpers the roles use.
  debootstrap --variant=minbase --components=main,contrib,non-free,non-free-firmware \
    --include=python3,python3-apt,systemd,systemd-sysv,dbus,ca-certificates,gnupg,procps,kmod,pciutils,iproute2 \
    bookworm "$root" "$mirror" >/dev/null
  cat > "$root/etc/apt/sources.list" <<SRC
deb $mirror bookworm main contrib non-free non-free-firmware
deb $mirror bookworm-updates main contrib non-free non-free-firmware
deb http://deb.debian.org/debian-security bookworm-security main contrib non-free non-free-firmware
SRC
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
  # an empty apt cache must look stale, or apt cache_valid_time would trust it
  touch -d 2000-01-01 "$root"/var/lib/apt/lists
  tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi
echo "molecule-setup: podman import -> $image"
podman import --change 'CMD ["/sbin/init"]' --change 'ENV container=podman' "$tarball" "$image" >/dev/null
podman image exists "$image"
echo "molecule-setup: image $image ready"
