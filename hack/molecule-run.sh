#!/usr/bin/env bash
# Run Molecule scenarios one after the other and print the wall time of each.
# Usage: hack/molecule-run.sh SCENARIO...   (from the repository root; see mk/molecule.mk)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export CONTAINERS_CONF=${CONTAINERS_CONF:-$top/molecule/containers.conf}
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$top/.cache}
export MOLECULE_GLOB=${MOLECULE_GLOB:-molecule/*/molecule.yml}
times=$top/.cache/molecule-times.txt
mkdir -p "$(dirname "$times")"; : > "$times"
failed=()
for s in "$@"; do
  echo "=== molecule test -s $s"
  start=$(date +%s)
  if molecule test -s "$s"; then rc=ok; else rc=FAILED; failed+=("$s"); fi
  printf '%-20s %4ds  %s\n' "$s" "$(( $(date +%s) - start ))" "$rc" | tee -a "$times"
done
echo "=== molecule times"; cat "$times"
[ ${#failed[@]} -eq 0 ] || { echo "molecule: failed: ${failed[*]}" >&2; exit 1; }
