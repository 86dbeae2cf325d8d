#!/usr/bin/env bash
# Install Debian packages for the test stages (podman for Molecule, shellcheck for sanity, Java for
# ansible-rulebook), one apt run at a time: `make test` installs Molecule's tools in the background
# while the foreground stages may install theirs. Root only; prints nothing on success.
# Usage: hack/apt-install.sh PACKAGE [PACKAGE ...]   (tries the lists as they are, then apt-get update)
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "apt-install: need root to install $*" >&2; exit 1; }
command -v apt-get >/dev/null 2>&1 || { echo "apt-install: no apt-get to install $*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
exec 8>/tmp/gpuops-apt.lock
flock 8
apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 ||
  { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
