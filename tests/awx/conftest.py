# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the AWX-runner and EDA tests (make awx-jobs, make eda).

``k8s_cluster`` is the e2e fixture (tests/e2e/conftest.py): the cluster of ``make cluster-up`` when $KUBECONFIG
points at it, else a fresh local control plane for the session. ``ee`` / ``de``: fresh environments with only what
execution-environment/ and decision-environment/ declare (tests/awx/awxlib/environments.py, cached by hash).
"""
import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(os.path.dirname(HERE), "e2e")
for path in (HERE, E2E):
    if path not in sys.path:
        sys.path.insert(0, path)

_spec = importlib.util.spec_from_file_location("gpuops_e2e_conftest", os.path.join(E2E, "conftest.py"))
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)
k8s_cluster = _e2e.k8s_cluster

from awxlib import environments  # noqa: E402  (tests/awx/awxlib)


@pytest.fixture(scope="session")
def ee(tmp_path_factory):
    if os.environ.get("GPUOPS_SKIP_E2E") == "1":
        pytest.skip("GPUOPS_SKIP_E2E=1: e2e tests opted out explicitly")
    try:
        return environments.ensure("ee", work_dir=str(tmp_path_factory.mktemp("ee-build")))
    except environments.EnvError as e:
        pytest.fail("cannot create the execution environment: %s" % e, pytrace=False)


@pytest.fixture(scope="session")
def de(tmp_path_factory):
    if os.environ.get("GPUOPS_SKIP_E2E") == "1":
        pytest.skip("GPUOPS_SKIP_E2E=1: e2e tests opted out explicitly")
    try:
        return environments.ensure("de", work_dir=str(tmp_path_factory.mktemp("de-build")))
    except environments.EnvError as e:
        pytest.fail("cannot create the decision environment: %s" % e, pytrace=False)
