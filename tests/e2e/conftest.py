# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pytest fixtures for the e2e tests: a real local Kubernetes control plane (docs/local-cluster.md).

``k8s_cluster`` (session): reuses the cluster of ``make cluster-up`` when $KUBECONFIG points at it
and it answers (never another cluster), otherwise builds the binaries if needed (cold: about 6 min on 2 idle cores) and starts
one in .cache/k8s-e2e, stopped at the end of the session. Yields an object with ``kubeconfig``,
``api_url``, ``state_dir``, ``log_dir``, ``reused`` and ``core`` (a kubernetes CoreV1Api).

If Go or the build is missing the fixture FAILS with the reason (it does not skip), unless
GPUOPS_SKIP_E2E=1 is set, an explicit opt-out for people without Go.
"""
import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from lib import cluster as cluster_lib  # noqa: E402
from lib import gpu_nodes  # noqa: E402

E2E_STATE_DIR = os.path.join(cluster_lib.TOP, ".cache", "k8s-e2e")


class ClusterHandle(object):
    def __init__(self, kubeconfig, api_url, state_dir=None, reused=False):
        self.kubeconfig = kubeconfig
        self.api_url = api_url
        self.state_dir = state_dir
        self.log_dir = os.path.join(state_dir, "logs") if state_dir else None
        self.reused = reused
        self._api = None

    @property
    def core(self):
        if self._api is None:
            self._api = gpu_nodes.core_api(self.kubeconfig)
        return self._api

    def api_client(self):
        from kubernetes import config
        return config.new_client_from_config(self.kubeconfig)


def _existing_cluster():
    """The local cluster $KUBECONFIG points at, when it answers; else None.

    Only a cluster started by this harness is reused (its kubeconfig sits in a state directory with a
    state.json, and the server is on 127.0.0.1): the tests create nodes and namespaces, and must never
    do so on whatever other cluster $KUBECONFIG may name.
    """
    path = os.environ.get("KUBECONFIG")
    if not path or not os.path.isfile(path):
        return None
    state_dir = os.path.dirname(os.path.abspath(path))
    local = cluster_lib.LocalCluster(state_dir)
    if os.path.abspath(path) != local.kubeconfig or not (local.api_url or "").startswith("https://127.0.0.1:"):
        return None
    try:
        from kubernetes import client, config
        client.VersionApi(config.new_client_from_config(path)).get_code(_request_timeout=5)
    except Exception:
        return None
    return ClusterHandle(local.kubeconfig, local.api_url, state_dir, reused=True)


@pytest.fixture(scope="session")
def k8s_cluster():
    if os.environ.get("GPUOPS_SKIP_E2E") == "1":
        pytest.skip("GPUOPS_SKIP_E2E=1: e2e tests opted out explicitly")
    existing = _existing_cluster()
    if existing is not None:
        yield existing
        return
    try:
        binaries = cluster_lib.bin_dir()
    except cluster_lib.ClusterError:
        # cold: build now (progress on the terminal); fail loudly with the reason if it cannot
        try:
            binaries = cluster_lib.build()
        except cluster_lib.ClusterError as e:
            pytest.fail("cannot build the local Kubernetes control plane: %s" % e, pytrace=False)
    local = cluster_lib.LocalCluster(E2E_STATE_DIR, binaries=binaries)
    try:
        local.start()
    except cluster_lib.ClusterError as e:
        pytest.fail("cannot start the local Kubernetes control plane: %s" % e, pytrace=False)
    try:
        yield ClusterHandle(local.kubeconfig, local.api_url, local.state_dir)
    finally:
        local.stop(keep_logs=True)


@pytest.fixture
def unique():
    """A short unique suffix for names of per-test objects."""
    return uuid.uuid4().hex[:6]


@pytest.fixture
def namespace(k8s_cluster, unique):
    """A fresh namespace, deleted after the test."""
    from kubernetes import client
    name = "e2e-" + unique
    k8s_cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    k8s_cluster.core.delete_namespace(name)


@pytest.fixture
def kwok_nodes(k8s_cluster):
    """Create kwok nodes through gpu_nodes.ensure_node; all are deleted after the test."""
    created = []

    def make(name, **spec):
        gpu_nodes.ensure_node(k8s_cluster.core, name, **spec)
        created.append(name)
        return name

    yield make
    for name in created:
        gpu_nodes.delete_node(k8s_cluster.core, name)
