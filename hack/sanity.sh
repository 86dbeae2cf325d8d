#!/usr/bin/env bash
# ansible-test sanity needs the collection at .../ansible_collections/gpuops/k8s: copy the files git
# knows (tracked and untracked-not-ignored) there and run it, with no ignore files.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dest=$top/.build/sanity/ansible_collections/gpuops/k8s
rm -rf "$dest"; mkdir -p "$dest"
(cd "$top" && git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$dest"
# nested tooling that ansible-test must not read as collection content
rm -rf "$dest/.ci" "$dest/.cache"
cd "$dest"
python=${SANITY_PYTHON:-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
exec ansible-test sanity --venv --python "$python" --color no "$@"
