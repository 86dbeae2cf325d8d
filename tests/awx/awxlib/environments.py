# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fresh Python environments with exactly what the execution environment (execution-environment/) or the
decision environment (decision-environment/) declares, for running AWX jobs and rulebooks without a container.

* Python packages: the ``ansible_core`` / ``ansible_runner`` pins of the ``*-environment.yml`` file and its
  ``requirements.txt``, installed with pip into a new venv (wheels from PyPI).
* Collections: the ``requirements.yml`` entries, resolved WITHOUT Galaxy (unreachable here): a named collection
  is taken from the ``ansible`` community wheel on PyPI (as hack/install-collections.sh does) and must carry the
  pinned version; the ``type: file`` entry is this checkout, built with ``ansible-galaxy collection build`` and
  installed on every call (the sources change more often than the pins). A collection that cannot be had this
  way is listed in ``unresolved`` with the reason; callers decide whether that matters (tests/awx checks that
  no job playbook needs it).

Nothing else is on the environment's paths: jobs run with its interpreter and its collections directory only,
so a dependency the EE forgets fails the job. The venv and third-party collections are cached under
``.cache/awx-envs/<kind>-<hash of the environment's files>``; a change to those files makes a new one (and removes
the older one).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CACHE = os.path.join(TOP, ".cache", "awx-envs")
PIP_DOWNLOAD = os.path.join(TOP, ".cache", "pip-download")
# The `ansible` community package whose wheel the named collections come from (hack/install-collections.sh).
ANSIBLE_PKG = os.environ.get("GPUOPS_ANSIBLE_PKG_VERSION", "14.5.0")
KINDS = {
    "ee": ("execution-environment", "execution-environment.yml"),
    "de": ("decision-environment", "decision-environment.yml"),
}


class EnvError(Exception):
    pass


def _log(msg):
    sys.stderr.write("awx-envs: %s\n" % msg)
    sys.stderr.flush()


def _run(argv, **kw):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False, **kw)
    if proc.returncode != 0:
        raise EnvError("%s failed (rc %d):\n%s" % (" ".join(argv), proc.returncode, proc.stdout[-4000:]))
    return proc.stdout


def _python_base():
    """The interpreter new venvs are made from: the one this process's venv was made from."""
    return getattr(sys, "_base_executable", None) or sys.executable


def definition(kind):
    folder, name = KINDS[kind]
    path = os.path.join(TOP, folder)
    with open(os.path.join(path, name)) as f:
        spec = yaml.safe_load(f)
    deps = spec.get("dependencies") or {}
    return path, spec, deps


def fingerprint(kind):
    """sha256 over the environment's definition files (not the collection sources)."""
    path, spec, deps = definition(kind)
    digest = hashlib.sha256()
    digest.update(ANSIBLE_PKG.encode())
    digest.update(sys.version.encode())
    names = [KINDS[kind][1]] + [deps[k] for k in ("python", "galaxy", "system") if isinstance(deps.get(k), str)]
    for name in names:
        with open(os.path.join(path, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()[:16]


def python_requirements(kind):
    """The pip requirement lines the environment declares (core and runner pins first)."""
    path, spec, deps = definition(kind)
    lines = []
    for key in ("ansible_core", "ansible_runner"):
        pin = (deps.get(key) or {}).get("package_pip")
        if not pin:
            raise EnvError("%s: dependencies.%s.package_pip is not set" % (KINDS[kind][1], key))
        lines.append(pin)
    extra = deps.get("python")
    if isinstance(extra, str):
        with open(os.path.join(path, extra)) as f:
            lines += [ln.strip() for ln in f if ln.strip() and not ln.strip().startswith("#")]
    elif isinstance(extra, list):
        lines += extra
    return lines


def collection_requirements(kind):
    path, spec, deps = definition(kind)
    galaxy = deps.get("galaxy")
    if not galaxy:
        return []
    with open(os.path.join(path, galaxy)) as f:
        data = yaml.safe_load(f) or {}
    return data.get("collections") or []


def _ansible_wheel():
    whl = os.path.join(PIP_DOWNLOAD, "ansible-%s-py3-none-any.whl" % ANSIBLE_PKG)
    if not os.path.isfile(whl):
        os.makedirs(PIP_DOWNLOAD, exist_ok=True)
        _log("downloading ansible==%s from PyPI (wheel only, for its collections)" % ANSIBLE_PKG)
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
              "--python-version", "3.12", "-d", PIP_DOWNLOAD,
              "ansible==%s" % ANSIBLE_PKG])
    return whl


def _extract_collection(whl, fqcn, version, dest_root):
    """Copy collection ``fqcn`` out of the ansible wheel into dest_root/ansible_collections; check its version."""
    namespace, name = fqcn.split(".", 1)
    prefix = "ansible_collections/%s/%s/" % (namespace, name)
    with zipfile.ZipFile(whl) as z:
        members = [n for n in z.namelist() if n.startswith(prefix)]
        if not members:
            return "not in the ansible %s wheel (and Galaxy is not reachable)" % ANSIBLE_PKG
        manifest = json.loads(z.read(prefix + "MANIFEST.json"))
        found = manifest["collection_info"]["version"]
        if version and str(version) != found:
            return "the ansible %s wheel carries %s %s, the EE pins %s" % (ANSIBLE_PKG, fqcn, found, version)
        z.extractall(dest_root, members)
    return None


def build_collection(out_dir):
    """ansible-galaxy collection build of this checkout; returns the tarball path."""
    os.makedirs(out_dir, exist_ok=True)
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    _run([galaxy, "collection", "build", TOP, "--output-path", out_dir, "--force"])
    with open(os.path.join(TOP, "galaxy.yml")) as f:
        meta = yaml.safe_load(f)
    return os.path.join(out_dir, "%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]))


class Environment(object):
    def __init__(self, kind, root, unresolved, collections):
        self.kind = kind
        self.root = root
        self.venv = os.path.join(root, "venv")
        self.bin = os.path.join(self.venv, "bin")
        self.python = os.path.join(self.bin, "python")
        self.collections_path = os.path.join(root, "collections")
        self.unresolved = unresolved  # {fqcn: reason}
        self.collections = collections  # {fqcn: version} installed

    def env(self, **extra):
        """Process environment for a job: this venv first on PATH, its collections only, no user state."""
        keep = dict((k, v) for k, v in os.environ.items()
                    if not k.startswith(("ANSIBLE_", "VIRTUAL_ENV", "PYTHON", "K8S_AUTH_")) and k != "KUBECONFIG")
        keep["PATH"] = self.bin + os.pathsep + "/usr/local/bin:/usr/bin:/bin"
        keep["ANSIBLE_COLLECTIONS_PATH"] = self.collections_path
        keep["ANSIBLE_COLLECTIONS_SCAN_SYS_PATH"] = "False"
        keep["PYTHONDONTWRITEBYTECODE"] = "1"
        keep.update(extra)
        return keep


def ensure(kind, work_dir=None):
    """The environment of ``kind`` ('ee' or 'de'), created when its definition changed; the gpuops.k8s
    collection of this checkout is (re)installed into it on every call."""
    key = fingerprint(kind)
    root = os.path.join(CACHE, "%s-%s" % (kind, key))
    stamp = os.path.join(root, "ready.json")
    if not os.path.isfile(stamp):
        venv = os.path.join(root, "venv")
        reqs = python_requirements(kind)
        if not os.path.isfile(os.path.join(root, "venv.ok")):
            if os.path.isdir(root):
                shutil.rmtree(root)
            os.makedirs(root)
            _log("%s %s: new venv from %s" % (kind, key, KINDS[kind][1]))
            _run([_python_base(), "-m", "venv", venv])
            py = os.path.join(venv, "bin", "python")
            _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--upgrade", "pip"])
            _log("%s %s: pip install %s" % (kind, key, " ".join(reqs)))
            _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check"] + reqs)
            open(os.path.join(root, "venv.ok"), "w").close()
        colls_root = os.path.join(root, "collections")
        if os.path.isdir(colls_root):
            shutil.rmtree(colls_root)
        os.makedirs(colls_root)
        unresolved, installed = {}, {}
        for req in collection_requirements(kind):
            if req.get("type") == "file":
                continue  # this checkout, installed below on every call
            why = _extract_collection(_ansible_wheel(), req["name"], req.get("version"), colls_root)
            if why:
                unresolved[req["name"]] = why
            else:
                installed[req["name"]] = str(req.get("version") or "")
        with open(stamp, "w") as f:
            json.dump({"unresolved": unresolved, "installed": installed, "python": reqs}, f, indent=1)
        for old in os.listdir(CACHE):  # environments of older definitions of this kind
            if old.startswith(kind + "-") and os.path.join(CACHE, old) != root:
                _log("removing %s (an older definition)" % old)
                shutil.rmtree(os.path.join(CACHE, old), ignore_errors=True)
    with open(stamp) as f:
        state = json.load(f)
    env = Environment(kind, root, state["unresolved"], dict(state["installed"]))
    own = [r for r in collection_requirements(kind) if r.get("type") == "file"]
    if own:
        tarball = build_collection(work_dir or os.path.join(root, "build"))
        galaxy = os.path.join(env.bin, "ansible-galaxy")
        _run([galaxy, "collection", "install", tarball, "-p", env.collections_path, "--offline", "--no-deps",
              "--force"], env=env.env())
        with tarfile.open(tarball) as t:
            manifest = json.load(t.extractfile("MANIFEST.json"))
        info = manifest["collection_info"]
        env.collections["%s.%s" % (info["namespace"], info["name"])] = info["version"]
    return env


if __name__ == "__main__":
    for k in sys.argv[1:] or ["ee"]:
        e = ensure(k)
        print(json.dumps({"kind": k, "root": e.root, "collections": e.collections, "unresolved": e.unresolved}))
