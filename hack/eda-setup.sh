#!/usr/bin/env bash
# ansible-rulebook (drools_jpy) needs a Java 17+ runtime. Install Debian's when it is missing and we may
# (root with apt-get), as hack/molecule-setup.sh does for podman; otherwise fail with what to install.
set -euo pipefail
java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1
}
if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "eda: installing a Java 17+ runtime (Debian package openjdk-17-jre-headless) for ansible-rulebook"
  "$(dirname "$0")/apt-install.sh" openjdk-17-jre-headless 2>/dev/null ||
    "$(dirname "$0")/apt-install.sh" default-jre-headless 2>/dev/null || true
fi
if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
echo "eda: FAILED: ansible-rulebook needs a Java 17+ runtime on PATH (Debian: apt-get install openjdk-17-jre-headless)" >&2
exit 1
