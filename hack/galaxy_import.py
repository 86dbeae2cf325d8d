"""`make galaxy-import`: run galaxy-importer (what Galaxy / Automation Hub run on an upload) on the
collection tarball and fail on anything we can fix.

1. galaxy-importer, pinned in hack/galaxy-importer.txt, in its own venv (.build/galaxy-importer-venv,
   rebuilt when the pins change): it brings its own ansible-lint and flake8.
2. `ansible-galaxy collection build` into .build/galaxy.
3. The importer on the tarball: ansible-doc of every plugin, flake8 of the Python files, ansible-lint
   (production profile) of the content. ansible-test is not run here (`make sanity` runs it, without
   ignore files).
4. Every ERROR fails. A WARNING fails unless it is one the importer cannot avoid: it installs no
   dependencies, so modules of a collection that galaxy.yml declares (kubernetes.core) are unresolved,
   and playbooks that use them fail its syntax check. Each such playbook is then syntax-checked with the
   dependencies installed (.build/collections, as `make collections` makes it) and must pass.
"""
import hashlib
import os
import re
import subprocess
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINS = os.path.join(TOP, "hack", "galaxy-importer.txt")
VENV = os.path.join(TOP, ".build", "galaxy-importer-venv")
OUT = os.path.join(TOP, ".build", "galaxy")
COLLECTIONS = os.path.join(TOP, ".build", "collections")

UNRESOLVED = re.compile(r"syntax-check\[unknown-module\]: couldn't resolve module/action '([a-z0-9_]+\.[a-z0-9_]+)\.")
SYNTAX_FAILED = re.compile(r"^(\S+?):\d+: internal-error: Unexpected error code \d+ from execution of: "
                           r"ansible-playbook --syntax-check")
LOAD_FAILED = re.compile(r"Failed to load (\S+) playbook due to failing syntax check")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False, **kw)


def ensure_venv():
    want = hashlib.sha256(open(PINS, "rb").read()).hexdigest()
    stamp = os.path.join(VENV, ".stamp")
    if os.path.isfile(stamp) and open(stamp).read().strip() == want:
        return
    print("galaxy-import: installing galaxy-importer (hack/galaxy-importer.txt) into %s" % VENV, flush=True)
    for cmd in ([sys.executable, "-m", "venv", "--clear", VENV],
                [os.path.join(VENV, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 "-r", PINS]):
        proc = run(cmd)
        if proc.returncode:
            sys.exit("galaxy-import: %s failed:\n%s" % (" ".join(cmd), proc.stdout))
    with open(stamp, "w") as f:
        f.write(want + "\n")


def build():
    galaxy = yaml.safe_load(open(os.path.join(TOP, "galaxy.yml")))
    os.makedirs(OUT, exist_ok=True)
    tarball = os.path.join(OUT, "%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"]))
    proc = run([os.path.join(os.path.dirname(sys.executable), "ansible-galaxy"), "collection", "build", TOP,
                "--output-path", OUT, "--force"])
    if proc.returncode or not os.path.isfile(tarball):
        sys.exit("galaxy-import: ansible-galaxy collection build failed:\n" + proc.stdout)
    return tarball, sorted(galaxy.get("dependencies") or {})


def import_tarball(tarball):
    cfg = os.path.join(OUT, "galaxy-importer.cfg")
    with open(cfg, "w") as f:
        f.write("[galaxy-importer]\nRUN_ANSIBLE_TEST = False\nRUN_ANSIBLE_LINT = True\nRUN_FLAKE8 = True\n")
    home = os.path.join(OUT, "home")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, GALAXY_IMPORTER_CONFIG=cfg, HOME=home, PATH=os.path.join(VENV, "bin") + os.pathsep +
               os.environ.get("PATH", ""))
    for var in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_HOME"):
        env.pop(var, None)
    proc = run([os.path.join(VENV, "bin", "python"), "-m", "galaxy_importer.main", tarball], env=env, cwd=OUT)
    with open(os.path.join(OUT, "galaxy-importer.log"), "w") as f:
        f.write(proc.stdout)
    if proc.returncode:
        sys.exit("galaxy-import: the importer failed (rc %d):\n%s" % (proc.returncode, proc.stdout))
    return proc.stdout.splitlines()


def playbook_paths(name):
    """The playbooks of the checkout a name in the importer's output means.

    The importer names a playbook as written where it is imported: ``plan.yml``, ``lab/demo.yml``, or
    relative to the importing playbook (``../site.yml`` from playbooks/lab/, ``demo_cluster.yml`` beside
    it). Every file under playbooks/ whose path ends with the name (``../`` parts dropped) is meant.
    """
    if os.path.isfile(os.path.join(TOP, name)) and not name.startswith(".."):
        return [name]
    tail = "/".join(part for part in name.split("/") if part not in ("..", "."))
    found = []
    for root, _dirs, files in os.walk(os.path.join(TOP, "playbooks")):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), TOP)
            if rel.endswith("/" + tail):
                found.append(rel)
    return sorted(found) or ["playbooks/" + tail]


def syntax_check_with_dependencies(playbook):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
    proc = run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "--syntax-check", "-i",
                "localhost,", os.path.join(TOP, playbook)], env=env)
    return proc.returncode == 0, proc.stdout


def main():
    ensure_venv()
    tarball, dependencies = build()
    lines = import_tarball(tarball)
    errors, fixable, unavoidable, playbooks = [], [], [], set()
    for line in lines:
        if line.startswith("ERROR"):
            errors.append(line)
            continue
        if not line.startswith("WARNING"):
            continue
        text = line.split(":", 1)[1].strip()
        unresolved = UNRESOLVED.search(text)
        failed = SYNTAX_FAILED.search(text) or LOAD_FAILED.search(text)
        if unresolved and unresolved.group(1) in dependencies:
            unavoidable.append(text)
        elif failed:
            playbooks.update(playbook_paths(failed.group(1)))
            unavoidable.append(text)
        else:
            fixable.append(text)
    checked = []
    for playbook in sorted(playbooks):
        ok, out = syntax_check_with_dependencies(playbook)
        if not ok:
            fixable.append("%s fails its syntax check even with the dependencies installed:\n%s" % (playbook, out))
        checked.append(playbook)
    print("galaxy-import: galaxy-importer on %s (log: %s)" % (os.path.relpath(tarball, TOP),
                                                              os.path.relpath(os.path.join(OUT, "galaxy-importer.log"), TOP)))
    print("  errors: %d" % len(errors))
    print("  warnings we can fix: %d" % len(fixable))
    print("  warnings the importer cannot avoid (it installs no dependencies; declared: %s): %d"
          % (", ".join(dependencies) or "none", len(unavoidable)))
    for playbook in checked:
        print("    %s: syntax check passes with the dependencies installed" % playbook)
    for line in errors + fixable:
        print("  FIX: " + line)
    if errors or fixable:
        sys.exit(1)


if __name__ == "__main__":
    main()
