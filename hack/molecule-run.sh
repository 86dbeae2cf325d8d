#!/usr/bin/env bash
# Run Molecule scenarios, MOLECULE_JOBS at a time (default 2: each scenario is one container and
# mostly waits on apt and podman exec), and print the wall time of each. With one job the output
# streams; with more each scenario writes .cache/molecule-logs/<scenario>.log, printed whole when it ends.
# Usage: hack/molecule-run.sh SCENARIO...   (from the repository root; see mk/molecule.mk)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
export CONTAINERS_CONF=${CONTAINERS_CONF:-$top/molecule/containers.conf}
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$top/.cache}
export MOLECULE_GLOB=${MOLECULE_GLOB:-molecule/*/molecule.yml}
jobs=${MOLECULE_JOBS:-2}
case $jobs in ''|*[!0-9]*|0) echo "molecule-run: MOLECULE_JOBS must be a positive integer, not '$jobs'" >&2; exit 2;; esac
times=$top/.cache/molecule-times.txt
logs=$top/.cache/molecule-logs
mkdir -p "$logs"; : > "$times"
failed=()

one() {  # one scenario; its time line goes to $logs/$1.time when it ends
  local s=$1 start rc
  start=$(date +%s)
  # its own ANSIBLE_HOME: Molecule installs this collection into <ANSIBLE_HOME>/collections at the start
  # of each scenario, and two installs into one directory collide
  if ANSIBLE_HOME="${ANSIBLE_HOME:-$top/.cache/ansible}/molecule-$s" molecule test -s "$s"; then rc=ok; else rc=FAILED; fi
  printf '%-20s %4ds  %s\n' "$s" "$(( $(date +%s) - start ))" "$rc" > "$logs/$s.time"
}

report() {  # the scenario's time line (and its log when it ran beside others)
  local s=$1
  if [ "$jobs" -gt 1 ]; then echo "=== molecule test -s $s: log"; cat "$logs/$s.log"; fi
  tee -a "$times" < "$logs/$s.time"
  grep -q ' ok$' "$logs/$s.time" || failed+=("$s")
}

if [ "$jobs" = 1 ]; then
  for s in "$@"; do
    rm -f "$logs/$s.time"
    echo "=== molecule test -s $s"
    one "$s"
    report "$s"
  done
else
  running=()
  reap() {  # report the scenarios that have ended; keep the others in running
    local s left=()
    for s in "${running[@]}"; do
      if [ -e "$logs/$s.time" ]; then report "$s"; else left+=("$s"); fi
    done
    running=("${left[@]}")
  }
  for s in "$@"; do
    while [ ${#running[@]} -ge "$jobs" ]; do wait -n; reap; done
    rm -f "$logs/$s.time"
    echo "=== molecule test -s $s (beside the others, $jobs at a time; log $logs/$s.log)"
    one "$s" > "$logs/$s.log" 2>&1 &
    running+=("$s")
  done
  while [ ${#running[@]} -gt 0 ]; do wait -n; reap; done
fi
echo "=== molecule times"; cat "$times"
[ ${#failed[@]} -eq 0 ] || { echo "molecule: failed: ${failed[*]}" >&2; exit 1; }
