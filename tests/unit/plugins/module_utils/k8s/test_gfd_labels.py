# -*- coding: utf-8 -*-
"""Issue 16 item 11: the simulated GFD labels follow GFD v0.20.0 (internal/lm/resource.go, mig-strategy.go)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.labels import node_gpu_state

ENGINES = ("copy", "decoder", "encoder", "jpeg", "ofa")


def test_no_sharing_config_replicas_one():
    """GFD always runs with a config: getReplicas is 1 for an unshared resource."""
    lab = node_gpu_state([{"model": "l40s_48gb", "count": 2}])["labels"]
    assert lab["nvidia.com/gpu.replicas"] == "1" and lab["nvidia.com/gpu.sharing-strategy"] == "none"


def test_mig_enabled_parents_have_replicas_zero_without_sharing():
    """MIG-enabled parents are labelled without sharing (NewGPUResourceLabelerWithoutSharing): replicas 0."""
    s = node_gpu_state([{"model": "a100_80gb", "count": 2}], "mixed", {"1g.10gb": 7},
                       sharing={"strategy": "time-slicing", "replicas": 4})
    lab = s["labels"]
    assert lab["nvidia.com/gpu.replicas"] == "0" and lab["nvidia.com/gpu.sharing-strategy"] == "none"
    assert lab["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"  # no -SHARED on the parents
    assert lab["nvidia.com/mig-1g.10gb.replicas"] == "4"


def test_a_full_gpu_of_the_same_name_overrides_the_mig_parents():
    s = node_gpu_state([{"model": "a100_80gb", "count": 2}], "mixed",
                       [{"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}])
    lab = s["labels"]
    assert lab["nvidia.com/gpu.replicas"] == "1" and lab["nvidia.com/gpu.count"] == "2"


def test_mig_invalid_has_replicas_zero_and_empty_strategy():
    s = node_gpu_state([{"model": "a100_80gb", "count": 2}], "single",
                       [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                        {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
                       sharing={"strategy": "time-slicing", "replicas": 4})
    lab = s["labels"]
    assert lab["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-INVALID"
    assert lab["nvidia.com/gpu.count"] == "0" and lab["nvidia.com/gpu.memory"] == "0"
    assert lab["nvidia.com/gpu.replicas"] == "0" and lab["nvidia.com/gpu.sharing-strategy"] == ""


@pytest.mark.parametrize("model, profile, want", [
    ("a100_80gb", "1g.10gb", {"copy": 1, "decoder": 0, "encoder": 0, "jpeg": 0, "ofa": 0}),
    ("a100_80gb", "1g.10gb+me", {"copy": 1, "decoder": 1, "encoder": 0, "jpeg": 1, "ofa": 1}),
    ("a100_80gb", "3g.40gb", {"copy": 3, "decoder": 2, "encoder": 0, "jpeg": 0, "ofa": 0}),
    ("a100_80gb", "7g.80gb", {"copy": 7, "decoder": 5, "encoder": 0, "jpeg": 1, "ofa": 1}),
])
def test_mixed_mig_devices_carry_engine_labels(model, profile, want):
    s = node_gpu_state([{"model": model, "count": 1}], "mixed", {profile: 1})
    res = gpu_catalog.resource_name(profile, "mixed")
    lab = s["labels"]
    assert dict((e, int(lab["%s.engines.%s" % (res, e)])) for e in ENGINES) == want


def test_single_mig_devices_carry_engine_labels():
    lab = node_gpu_state([{"model": "h100_80gb", "count": 2}], "single", {"1g.10gb": 7})["labels"]
    for e in ENGINES:
        assert lab["nvidia.com/gpu.engines.%s" % e].isdigit()
    assert lab["nvidia.com/gpu.engines.copy"] == "1"
    assert lab["nvidia.com/gpu.replicas"] == "1"


def test_simulated_nvml_reports_the_same_engine_counts():
    """gpu_info's profile info (the simulator's nvmlDeviceGetGpuInstanceProfileInfo) and the labels agree."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
    model = gpu_catalog.find_model("a100_80gb")
    backend = nvml_sim.SimBackend("/nonexistent")
    for p in model.profiles:
        info = backend._gi_profile_info("x", model, p)
        eng = gpu_catalog.profile_engines(model, p)
        assert (info.copyEngineCount, info.decoderCount, info.encoderCount, info.jpegCount, info.ofaCount) == \
            (eng["copy"], eng["decoder"], eng["encoder"], eng["jpeg"], eng["ofa"]), p.name
