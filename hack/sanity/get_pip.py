"""Stand-in for pip's get-pip.py bootstrap, used by ansible-test when it creates its own venvs.

ansible-test downloads get-pip.py from a host that is not reachable here; ensurepip (bundled with
CPython) plus a normal `pip install` from PyPI does the same job. hack/sanity.sh installs this file
where ansible-test looks for its cached copy.
"""
import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"], stdout=subprocess.DEVNULL)
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check"] + args))
