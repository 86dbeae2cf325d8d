# -*- coding: utf-8 -*-
"""The lab's simulated DRA kubelet plugin (tests/e2e/lib/sim_kubelet_plugin.py) against a real NVML simulator
state file and a fake API server (claims in, Events out): what it makes, what it destroys, what it refuses.

Expected GPU instance ids are the driver's layout over 8 memory slices (docs/nvml-simulator.md): halves 1-2,
quarters 3-6, eighths 7-14, so 4g@0 is GI 1, 2g@4 GI 5, 1g@6 GI 13.
"""
import os
import sys

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml_api
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state, mig_changes
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import state as sim_state

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
from lib.sim_kubelet_plugin import SimKubeletPlugin  # noqa: E402

NODE = "n1"


class FakeCustom(object):
    def __init__(self):
        self.claims = []

    def list_cluster_custom_object(self, group, version, plural):
        assert (group, version, plural) == ("resource.k8s.io", "v1", "resourceclaims")
        return {"items": self.claims}


class FakeCore(object):
    def __init__(self):
        self.events = []

    def create_namespaced_event(self, namespace, body):
        self.events.append((namespace, body))


def claim(name, *devices, pool=NODE, driver="gpu.nvidia.com"):
    return {"metadata": {"name": name, "namespace": "ns", "uid": "uid-" + name},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r%d" % i, "driver": driver, "pool": pool, "device": d} for i, d in enumerate(devices)]}}}}


@pytest.fixture
def lab(tmp_path):
    path = str(tmp_path / "n1.json")
    st = sim_state.new_state([{"model": "h100_80gb", "count": 2}], seed=1)
    for g in st["gpus"]:
        g["mig_mode_current"] = g["mig_mode_pending"] = 1
    sim_state.save_state(path, st)
    plugin = SimKubeletPlugin(None, {NODE: path})
    plugin.custom, plugin.core = FakeCustom(), FakeCore()
    return plugin, path


def gis(path, gpu=0):
    """{(GI profile id, start): GI id} of one simulated GPU, read through the NVML layer."""
    with nvml_api.open_nvml(simulator=path) as nvml:
        return dict(((i["gpu_instance_profile_id"], i["placement"]["start"]), i["gpu_instance_id"])
                    for i in gpu_state.read_gpu(nvml, gpu)["instances"])


def make_alien(path, gpu, profile, start):
    with nvml_api.open_nvml(simulator=path) as nvml:
        return mig_changes.create_instance(nvml, gpu, profile, start)[0]["gpu_instance_id"]


def test_prepares_the_allocated_placements_and_a_second_sync_changes_nothing(lab):
    plugin, path = lab
    plugin.custom.claims = [claim("a", "gpu-0-mig-4g40gb-5-0"), claim("b", "gpu-0-mig-2g20gb-14-4"),
                            claim("c", "gpu-0-mig-1g10gb-19-6"), claim("other-pool", "gpu-1-mig-7g80gb-0-0", pool="n2"),
                            claim("other-driver", "gpu-1-mig-7g80gb-0-0", driver="x.example.com")]
    assert plugin.sync() == {"prepared": ["uid-a", "uid-b", "uid-c"], "unprepared": [], "failed": []}
    assert gis(path) == {(5, 0): 1, (14, 4): 5, (19, 6): 13}
    assert gis(path, 1) == {}
    assert [(d["gpu_instance_id"], d["compute_instance_ids"]) for d in plugin.prepared["uid-b"]["devices"]] == [(5, [0])]
    before = open(path).read()
    assert plugin.sync() == {"prepared": [], "unprepared": [], "failed": []}
    assert open(path).read() == before
    assert not plugin.failures and not plugin.core.events


def test_release_destroys_only_the_claims_instance(lab):
    plugin, path = lab
    alien = make_alien(path, 1, "3g.40gb", 4)
    plugin.custom.claims = [claim("a", "gpu-0-mig-4g40gb-5-0"), claim("b", "gpu-0-mig-2g20gb-14-4"),
                            claim("c", "gpu-0-mig-1g10gb-19-6", "gpu-1-mig-3g40gb-9-0")]
    plugin.sync()
    assert gis(path, 1) == {(9, 4): alien, (9, 0): 1}
    plugin.custom.claims = [c for c in plugin.custom.claims if c["metadata"]["name"] != "b"]
    assert plugin.sync() == {"prepared": [], "unprepared": ["uid-b"], "failed": []}
    assert gis(path) == {(5, 0): 1, (19, 6): 13}
    # deallocated (status.allocation gone) counts as released too; the instance nobody claimed stays
    del plugin.custom.claims[1]["status"]["allocation"]
    assert plugin.sync()["unprepared"] == ["uid-c"]
    assert gis(path) == {(5, 0): 1} and gis(path, 1) == {(9, 4): alien}


def test_a_refused_placement_is_an_event_and_nothing_is_made(lab):
    plugin, path = lab
    blocker = make_alien(path, 0, "1g.10gb", 2)  # slices the 4g.40gb at 0 (0-3) needs
    plugin.custom.claims = [claim("big", "gpu-0-mig-4g40gb-5-0")]
    assert plugin.sync() == {"prepared": [], "unprepared": [], "failed": ["uid-big"]}
    assert gis(path) == {(19, 2): blocker}
    ((ns, event),) = plugin.core.events
    assert ns == "ns" and event["reason"] == "PrepareFailed" and event["type"] == "Warning"
    assert event["involvedObject"] == {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "name": "big",
                                       "namespace": "ns", "uid": "uid-big"}
    assert "gpu-0-mig-4g40gb-5-0" in event["message"] and "INSUFFICIENT_RESOURCES" in event["message"]
    assert [f["reason"] for f in plugin.failures] == ["PrepareFailed"]
    # tried again each round, one Event per failure, not per round
    assert plugin.sync()["failed"] == ["uid-big"]
    assert len(plugin.core.events) == 1 and len(plugin.failures) == 1
    with nvml_api.open_nvml(simulator=path) as nvml:
        mig_changes.destroy_instance(nvml, 0, blocker)
    assert plugin.sync()["prepared"] == ["uid-big"]
    assert gis(path) == {(5, 0): 1}


def test_a_claim_is_all_or_nothing(lab):
    plugin, path = lab
    make_alien(path, 1, "7g.80gb", 0)
    plugin.custom.claims = [claim("two", "gpu-0-mig-3g40gb-9-0", "gpu-1-mig-3g40gb-9-4")]
    assert plugin.sync()["failed"] == ["uid-two"]
    assert gis(path) == {}  # the 3g made on GPU 0 went again
    assert "gpu-1-mig-3g40gb-9-4" in plugin.failures[0]["message"]


def test_unknown_device_or_gpu_is_refused_naming_why(lab):
    plugin, path = lab
    plugin.custom.claims = [claim("bad", "gpu-0-mig-4g40gb-5-4"), claim("gone", "gpu-5-mig-1g10gb-19-0")]
    assert plugin.sync()["failed"] == ["uid-bad", "uid-gone"]
    messages = [f["message"] for f in plugin.failures]
    assert "valid starts: 0" in messages[0]
    assert "no GPU with minor 5" in messages[1]
    assert gis(path) == {} and gis(path, 1) == {}


def test_an_instance_in_use_is_kept_until_it_is_free(lab):
    plugin, path = lab
    plugin.custom.claims = [claim("a", "gpu-0-mig-2g20gb-14-0")]
    plugin.sync()
    st = sim_state.load_state(path)
    st["gpus"][0]["processes"] = [{"pid": 4242, "name": "vllm", "gpu_instance_id": 3, "compute_instance_id": 0,
                                   "used_memory_mib": 100}]
    sim_state.save_state(path, st)
    plugin.custom.claims = []
    assert plugin.sync()["failed"] == ["uid-a"]
    assert gis(path) == {(14, 0): 3} and "uid-a" in plugin.prepared
    assert plugin.core.events[-1][1]["reason"] == "UnprepareFailed" and "4242" in plugin.core.events[-1][1]["message"]
    st = sim_state.load_state(path)
    st["gpus"][0]["processes"] = []
    sim_state.save_state(path, st)
    assert plugin.sync()["unprepared"] == ["uid-a"]
    assert gis(path) == {} and not plugin.prepared


def test_checkpoint_keeps_what_was_made_across_a_restart(lab, tmp_path):
    plugin, path = lab
    ckpt = str(tmp_path / "ckpt.json")
    plugin.checkpoint = ckpt
    plugin.custom.claims = [claim("a", "gpu-0-mig-1g10gb-19-3")]
    plugin.sync()
    again = SimKubeletPlugin(None, {NODE: path}, checkpoint=ckpt)
    again.custom, again.core = FakeCustom(), FakeCore()
    again.custom.claims = plugin.custom.claims
    assert again.sync() == {"prepared": [], "unprepared": [], "failed": []}
    again.custom.claims = []
    assert again.sync()["unprepared"] == ["uid-a"] and gis(path) == {}
