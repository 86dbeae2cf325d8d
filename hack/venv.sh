#!/usr/bin/env bash
# Create or update the pinned toolchain venv. Re-installs only when requirements-dev.txt changed
# (the stamp holds its hash), so worktrees can share one venv.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$top/.venv}
want=$(sha256sum "$top/requirements-dev.txt" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "venv: installing the pinned toolchain into $venv (requirements-dev.txt)"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$top/requirements-dev.txt"
echo "$want" > "$venv/.stamp"
echo "venv: ready"
