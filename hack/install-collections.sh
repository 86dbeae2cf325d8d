#!/usr/bin/env bash
# Install the Ansible collections the tests need, without Galaxy (unreachable here):
# kubernetes.core, containers.podman and ansible.posix are taken from the `ansible` community
# package on PyPI (its wheel bundles them), and gpuops.k8s is linked to this checkout.
# Usage: hack/install-collections.sh [COLLECTIONS_ROOT]   (default: .build/collections)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-$top/.build/collections}
ansible_pkg=${GPUOPS_ANSIBLE_PKG_VERSION:-14.5.0}   # bundles kubernetes.core 6.6.0, containers.podman 1.21.0
wanted=(kubernetes/core containers/podman ansible/posix)
dl=$top/.cache/pip-download
mkdir -p "$dl" "$root/ansible_collections/gpuops"
whl=$dl/ansible-$ansible_pkg-py3-none-any.whl
if [ ! -f "$whl" ]; then
  echo "collections: downloading ansible==$ansible_pkg from PyPI (wheel only, no install)"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d "$dl" "ansible==$ansible_pkg"
fi
for c in "${wanted[@]}"; do
  if [ ! -f "$root/ansible_collections/$c/MANIFEST.json" ]; then
    echo "collections: extracting $c"
    rm -rf "$root/ansible_collections/$c"
    tmp=$(mktemp -d)
    python3 - "$whl" "$c" "$tmp" <<'PY'
import sys, zipfile
whl, coll, dest = sys.argv[1:]
prefix = "ansible_collections/%s/" % coll
with zipfile.ZipFile(whl) as z:
    members = [n for n in z.namelist() if n.startswith(prefix)]
    if not members:
        sys.exit("collection %s not found in %s" % (coll, whl))
    z.extractall(dest, members)
PY
    mkdir -p "$(dirname "$root/ansible_collections/$c")"
    mv "$tmp/ansible_collections/$c" "$root/ansible_collections/$c"
    rm -rf "$tmp"
  fi
done
ln -sfn "$top" "$root/ansible_collections/gpuops/k8s"
echo "collections: ready under $root"
