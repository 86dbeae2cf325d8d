# Shared pytest setup: make `ansible_collections.gpuops.k8s` importable from this checkout and keep
# every ansible/molecule write inside the work tree.
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS_ROOT = os.path.join(TOP, ".build", "collections")
_link = os.path.join(COLLECTIONS_ROOT, "ansible_collections", "gpuops", "k8s")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    os.symlink(TOP, _link)
if COLLECTIONS_ROOT not in sys.path:
    sys.path.insert(0, COLLECTIONS_ROOT)

_cache = os.path.join(TOP, ".cache", "ansible")
os.environ.setdefault("ANSIBLE_HOME", _cache)
os.environ.setdefault("ANSIBLE_REMOTE_TMP", os.path.join(_cache, "tmp"))
os.environ.setdefault("ANSIBLE_LOCAL_TEMP", os.path.join(_cache, "tmp-local"))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", COLLECTIONS_ROOT)
os.environ.setdefault("ANSIBLE_NOCOWS", "1")
