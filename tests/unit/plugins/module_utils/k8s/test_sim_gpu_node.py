import copy

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.node_sim import run_sim_gpu_node


def _merge(target, patch):
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict):
            _merge(target.setdefault(k, {}), v)
        else:
            target[k] = v


class FakeApi(object):
    """Nodes in a dict; a Node update keeps the status, only nodes/status changes it (as the API server)."""

    def __init__(self):
        self.nodes = {}
        self.calls = []

    def get_node(self, name):
        return copy.deepcopy(self.nodes.get(name))

    def create_node(self, body):
        self.calls.append(("create", body["metadata"]["name"]))
        self.nodes[body["metadata"]["name"]] = copy.deepcopy(body)

    def patch_node(self, name, body):
        self.calls.append(("patch", name))
        assert "status" not in body
        _merge(self.nodes[name], body)

    def patch_node_status(self, name, body):
        self.calls.append(("patch_status", name))
        assert set(body) == {"status"}
        _merge(self.nodes[name], body)

    def delete_node(self, name):
        self.calls.append(("delete", name))
        del self.nodes[name]


def P(**kw):
    base = {"name": "n1", "state": "present", "gpus": [{"model": "a100_80gb", "count": 2}], "mig_strategy": "none",
            "mig_config": None, "sharing": None, "gpu_facts": None, "driver_version": None, "labels": None,
            "resources": None}
    base.update(kw)
    return base


def test_create_then_idempotent():
    api = FakeApi()
    r = run_sim_gpu_node(api, P())
    assert r["changed"] and r["created"]
    node = api.nodes["n1"]
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert node["status"]["capacity"]["cpu"] == "128"
    api.calls = []
    r = run_sim_gpu_node(api, P())
    assert r["changed"] is False and api.calls == []


def test_mig_change_updates_labels_and_status_and_removes_stale():
    api = FakeApi()
    run_sim_gpu_node(api, P(mig_strategy="mixed", mig_config={"1g.10gb": 7}))
    api.nodes["n1"]["metadata"]["labels"]["nvidia.com/mig.config"] = "all-1g.10gb"
    r = run_sim_gpu_node(api, P(mig_strategy="mixed", mig_config={"3g.40gb": 2}))
    assert r["changed"]
    node = api.nodes["n1"]
    assert "nvidia.com/mig-1g.10gb" not in node["status"]["capacity"]
    assert "nvidia.com/mig-1g.10gb" not in node["status"]["allocatable"]
    assert node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "4"
    assert "nvidia.com/mig-1g.10gb.count" not in node["metadata"]["labels"]
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert r["diff"]["before"]["capacity"]["nvidia.com/mig-1g.10gb"] == "14"
    assert r["diff"]["after"]["capacity"]["nvidia.com/mig-3g.40gb"] == "4"
    assert ("patch_status", "n1") in api.calls


def test_check_mode_changes_nothing():
    api = FakeApi()
    run_sim_gpu_node(api, P())
    before = copy.deepcopy(api.nodes)
    api.calls = []
    r = run_sim_gpu_node(api, P(mig_strategy="mixed", mig_config={"1g.10gb": 7}), check_mode=True)
    assert r["changed"] and api.calls == [] and api.nodes == before
    r = run_sim_gpu_node(api, P(name="n2"), check_mode=True)
    assert r["changed"] and "n2" not in api.nodes


def test_bad_input_fails_before_any_change():
    api = FakeApi()
    run_sim_gpu_node(api, P())
    api.calls = []
    with pytest.raises(GpuOpsError) as e:
        run_sim_gpu_node(api, P(mig_strategy="mixed", mig_config={"9g.99gb": 1}))
    assert "valid profiles" in e.value.msg
    assert api.calls == []


def test_absent_refuses_real_node():
    api = FakeApi()
    api.nodes["real"] = {"metadata": {"name": "real", "annotations": {}}, "status": {}}
    with pytest.raises(GpuOpsError) as e:
        run_sim_gpu_node(api, P(name="real", state="absent"))
    assert "not a kwok node" in e.value.msg
    run_sim_gpu_node(api, P())
    r = run_sim_gpu_node(api, P(state="absent"))
    assert r["changed"] and "n1" not in api.nodes
    assert run_sim_gpu_node(api, P(state="absent"))["changed"] is False
