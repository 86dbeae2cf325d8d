#!/usr/bin/env bash
# ansible-test sanity needs the collection at .../ansible_collections/gpuops/k8s: copy the files git
# knows (tracked and untracked-not-ignored) there and run it, with no ignore files.
# ansible-test's --venv mode bootstraps pip from a host that is not reachable here, so the sanity
# requirements (pinned by ansible-test itself) go into a dedicated venv and the tests run --local.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$top/.venv}
svenv=$top/.build/sanity-venv
core=$("$venv/bin/python" -c 'import ansible.release as r; print(r.__version__)')
reqdir=$("$venv/bin/python" -c 'import ansible_test, os; print(os.path.join(os.path.dirname(ansible_test.__file__), "_data", "requirements"))')
stamp="$core $(cat "$reqdir"/sanity.*.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$svenv/.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "sanity: preparing $svenv (ansible-core $core + ansible-test sanity requirements)"
  rm -rf "$svenv"
  python3 -m venv "$svenv"
  "$svenv/bin/python" -m pip install -q --disable-pip-version-check "ansible-core==$core"
  for f in "$reqdir"/sanity.*.txt; do
    "$svenv/bin/python" -m pip install -q --disable-pip-version-check -r "$f"
  done
  echo "$stamp" > "$svenv/.stamp"
fi
# the shellcheck sanity test is skipped (with a warning only) when the program is missing
if ! command -v shellcheck >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "sanity: installing shellcheck (Debian package)"
  "$top/hack/apt-install.sh" shellcheck 2>/dev/null || true
fi
command -v shellcheck >/dev/null 2>&1 || { echo "sanity: shellcheck is required (apt-get install shellcheck)" >&2; exit 1; }
dest=$top/.build/sanity/ansible_collections/gpuops/k8s
rm -rf "$dest"; mkdir -p "$dest"
(cd "$top" && git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$dest"
# tooling that is not collection content
rm -rf "$dest/.ci"
# collections this one depends on (galaxy.yml dependencies: kubernetes.core), as `make collections`
# installs them, so that doc fragments and module_utils imports of kubernetes.core resolve
if [ -d "$top/.build/collections/ansible_collections/kubernetes" ]; then
  ln -sfn "$top/.build/collections/ansible_collections/kubernetes" "$top/.build/sanity/ansible_collections/kubernetes"
fi
cd "$dest"
# the copy lives inside this (ignored) checkout: make it a repository of its own so that
# ansible-test lists its files instead of the outer repository's (which ignores .build/)
git init -q . && git add -A && git -c user.name=sanity -c user.email=sanity@localhost commit -qm sanity
export PATH=$svenv/bin:$PATH
# ansible-test keeps its own venvs and caches under ~/.ansible: keep them in the work tree, and give
# it the get-pip stand-in (see hack/sanity/get_pip.py)
export HOME=$top/.build/sanity-home
pipver=$(sed -n "s/^ *pip='\\([0-9.]*\\)',.*/\\1/p" "$reqdir/../../_internal/python_requirements.py" | head -n1)
[ -n "$pipver" ] || pipver=24.2
mkdir -p "$HOME/.ansible/test/cache"
cp "$top/hack/sanity/get_pip.py" "$HOME/.ansible/test/cache/get_pip_${pipver//./_}.py"
python=$("$svenv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
exec ansible-test sanity --local --python "$python" --color no "$@"
