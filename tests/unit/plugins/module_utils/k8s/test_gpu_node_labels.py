import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.labels import (
    node_changes, node_gpu_state, owned_label, owned_resource)

A100x2 = [{"model": "a100_80gb", "count": 2}]


def test_none_strategy_full_gpus():
    s = node_gpu_state([{"model": "h100_80gb", "count": 8}], driver_version="550.127.08")
    assert s["capacity"] == {"nvidia.com/gpu": "8"}
    lab = s["labels"]
    assert lab["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert lab["nvidia.com/gpu.count"] == "8"
    assert lab["nvidia.com/gpu.memory"] == "81559"
    assert lab["nvidia.com/gpu.family"] == "hopper"
    assert lab["nvidia.com/gpu.present"] == "true"
    assert lab["nvidia.com/mig.capable"] == "true"
    assert lab["nvidia.com/gpu.replicas"] == "1"  # GFD runs with a config: an unshared GPU has 1 replica
    assert lab["nvidia.com/gpu.sharing-strategy"] == "none"
    assert lab["nvidia.com/cuda.driver-version.full"] == "550.127.08"
    assert lab["nvidia.com/cuda.driver-version.revision"] == "08"
    assert "nvidia.com/mig.strategy" not in lab


def test_none_strategy_hides_mig_devices():
    s = node_gpu_state(A100x2, "none", {"1g.10gb": 7})
    assert s["capacity"] == {"nvidia.com/gpu": "2"}


def test_mixed_strategy_per_profile_resources_and_labels():
    s = node_gpu_state(A100x2, "mixed", [{"devices": [0], "mig-enabled": True,
                                          "mig-devices": {"1g.10gb": 2, "3g.40gb": 1}}])
    assert s["capacity"] == {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-3g.40gb": "1"}
    lab = s["labels"]
    assert lab["nvidia.com/mig.strategy"] == "mixed"
    assert lab["nvidia.com/gpu.count"] == "2"
    assert lab["nvidia.com/mig-1g.10gb.count"] == "2"
    assert lab["nvidia.com/mig-1g.10gb.memory"] == "9728"
    assert lab["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert lab["nvidia.com/mig-3g.40gb.slices.gi"] == "3"
    assert lab["nvidia.com/mig-3g.40gb.multiprocessors"] == "42"


def test_mixed_me_profile_is_label_safe():
    s = node_gpu_state([{"model": "h100_80gb", "count": 1}], "mixed", {"1g.10gb+me": 1, "1g.10gb": 5})
    assert s["capacity"]["nvidia.com/mig-1g.10gb.me"] == "1"
    assert s["capacity"]["nvidia.com/mig-1g.10gb"] == "5"
    assert s["labels"]["nvidia.com/mig-1g.10gb.me.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me"


def test_mixed_skips_split_compute_instances():
    facts = [{"model": "a100_80gb", "name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920,
              "mig_mode_current": True,
              "instances": [{"profile": "3g.40gb"}, {"profile": "1c.3g.40gb"}, {"profile": "1c.3g.40gb"}]}]
    s = node_gpu_state(gpu_facts=facts, mig_strategy="mixed")
    assert s["capacity"] == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "1"}


def test_single_strategy_uniform():
    s = node_gpu_state(A100x2, "single", {"1g.10gb": 7})
    assert s["capacity"] == {"nvidia.com/gpu": "14"}
    lab = s["labels"]
    assert lab["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert lab["nvidia.com/gpu.count"] == "14"
    assert lab["nvidia.com/gpu.memory"] == "9728"
    assert lab["nvidia.com/mig.strategy"] == "single"


def test_single_strategy_invalid_layout():
    s = node_gpu_state(A100x2, "single", {"1g.10gb": 2, "3g.40gb": 1})
    assert s["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-INVALID"
    assert s["labels"]["nvidia.com/gpu.count"] == "0"
    assert s["capacity"] == {"nvidia.com/gpu": "0"}


def test_single_strategy_mig_disabled_behaves_as_none():
    s = node_gpu_state(A100x2, "single")
    assert s["capacity"] == {"nvidia.com/gpu": "2"}
    assert s["labels"]["nvidia.com/mig.strategy"] == "single"


def test_time_slicing_replicas_and_shared_suffix():
    s = node_gpu_state([{"model": "l40s_48gb", "count": 4}], sharing={"strategy": "time-slicing", "replicas": 4})
    assert s["capacity"] == {"nvidia.com/gpu": "16"}
    assert s["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    assert s["labels"]["nvidia.com/gpu.replicas"] == "4"
    assert s["labels"]["nvidia.com/mig.capable"] == "false"


def test_time_slicing_rename_by_default():
    s = node_gpu_state([{"model": "l40s_48gb", "count": 1}],
                       sharing={"strategy": "time-slicing", "replicas": 2, "rename_by_default": True})
    assert s["capacity"] == {"nvidia.com/gpu.shared": "2"}
    assert s["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L40S"


def test_time_slicing_mig_mixed():
    s = node_gpu_state(A100x2, "mixed", {"1g.10gb": 7}, sharing={"strategy": "time-slicing", "replicas": 2})
    assert s["capacity"]["nvidia.com/mig-1g.10gb"] == "28"
    assert s["labels"]["nvidia.com/mig-1g.10gb.product"].endswith("-MIG-1g.10gb-SHARED")
    assert s["labels"]["nvidia.com/mig-1g.10gb.replicas"] == "2"


def test_time_slicing_only_the_listed_resources():
    """As GFD's resource labeler: a resource the sharing config does not list keeps replicas 1, no -SHARED suffix
    and sharing-strategy none; each listed one has its own replicas."""
    gpu_only = {"strategy": "time-slicing", "replicas": 4, "resources": {"nvidia.com/gpu": 4}}
    mixed = [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}, {"devices": [1], "mig-enabled": False}]
    s = node_gpu_state(A100x2, "mixed", mixed, sharing=gpu_only)
    assert s["capacity"] == {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "7"}
    assert s["labels"]["nvidia.com/gpu.replicas"] == "4"
    assert s["labels"]["nvidia.com/gpu.product"].endswith("-SHARED")
    assert s["labels"]["nvidia.com/mig-1g.10gb.replicas"] == "1"
    assert s["labels"]["nvidia.com/mig-1g.10gb.sharing-strategy"] == "none"
    assert not s["labels"]["nvidia.com/mig-1g.10gb.product"].endswith("-SHARED")
    renamed = dict(gpu_only, rename_by_default=True, resources={"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 2})
    s = node_gpu_state(A100x2, "mixed", mixed, sharing=renamed)
    assert s["capacity"] == {"nvidia.com/gpu.shared": "4", "nvidia.com/mig-1g.10gb.shared": "14"}
    assert s["labels"]["nvidia.com/mig-1g.10gb.replicas"] == "2"
    assert s["labels"]["nvidia.com/mig-1g.10gb.sharing-strategy"] == "time-slicing"
    # a config that shares only the MIG slices leaves the full GPUs alone
    s = node_gpu_state(A100x2, "mixed", mixed, sharing=dict(gpu_only, resources={"nvidia.com/mig-1g.10gb": 3}))
    assert s["capacity"] == {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "21"}
    assert s["labels"]["nvidia.com/gpu.replicas"] == "1" and s["labels"]["nvidia.com/gpu.sharing-strategy"] == "none"


def test_gpu_instance_without_compute_instance_is_no_device():
    facts = [{"index": 0, "model": "a100_80gb", "mig_mode_current": True, "instances": [
        {"profile": "3g.40gb", "has_compute_instance": True, "compute_slices": 3},
        {"profile": "3g.40gb", "has_compute_instance": False, "compute_slices": 0}]}]
    assert node_gpu_state(gpu_facts=facts, mig_strategy="mixed")["capacity"]["nvidia.com/mig-3g.40gb"] == "1"


def test_sharing_none_config_replicas_one():
    s = node_gpu_state(A100x2, sharing={"strategy": "none"})
    assert s["labels"]["nvidia.com/gpu.replicas"] == "1"


def test_mps():
    s = node_gpu_state([{"model": "h100_80gb", "count": 2}], sharing={"strategy": "mps", "replicas": 10})
    assert s["capacity"] == {"nvidia.com/gpu": "20"}
    assert s["labels"]["nvidia.com/mps.capable"] == "true"
    assert s["labels"]["nvidia.com/gpu.sharing-strategy"] == "mps"


@pytest.mark.parametrize("kwargs, words", [
    (dict(gpus=A100x2, mig_strategy="mixed", sharing={"strategy": "mps", "replicas": 2}), "mixed"),
    (dict(gpus=A100x2, mig_strategy="single", mig_config={"1g.10gb": 7}, sharing={"strategy": "mps", "replicas": 2}),
     "MIG devices"),
    (dict(gpus=A100x2, mig_strategy="weird"), "none, single, mixed"),
    (dict(gpus=A100x2, sharing={"strategy": "time-slicing", "replicas": 1}), ">= 2"),
    (dict(gpus=A100x2, sharing={"strategy": "magic"}), "time-slicing"),
    (dict(gpus=A100x2, sharing={"strategy": "time-slicing", "replicas": 2, "resources": {"nvidia.com/gpu": 1}}),
     ">= 2"),
    (dict(gpus=A100x2, sharing={"strategy": "time-slicing", "replicas": 2, "resources": ["nvidia.com/gpu"]}),
     "map each shared resource"),
    (dict(gpus=A100x2, mig_strategy="mixed", mig_config={"2g.10gb": 1}), "valid profiles"),
    (dict(gpus=A100x2, mig_strategy="mixed", mig_config={"1g.10gb": 8}), "at most 7"),
    (dict(gpus=A100x2, mig_strategy="mixed", mig_config={"4g.40gb": 1, "3g.40gb": 2}), "slices"),
    (dict(gpus=[{"model": "l40s_48gb", "count": 1}], mig_strategy="mixed", mig_config={"1g.10gb": 1}),
     "does not support MIG"),
    (dict(gpus=A100x2, mig_config=[{"devices": [5], "mig-devices": {"1g.10gb": 1}}]), "GPUs 0-1"),
    (dict(gpus=[{"model": "nope", "count": 1}]), "valid catalog keys"),
    (dict(gpus=[]), "non-empty"),
])
def test_bad_input_names_what_is_valid(kwargs, words):
    with pytest.raises(GpuOpsError) as e:
        node_gpu_state(**kwargs)
    assert words in e.value.msg


def test_node_changes_removes_only_stale_owned_keys():
    desired = node_gpu_state(A100x2, "mixed", {"3g.40gb": 2})
    current_labels = {"nvidia.com/mig-1g.10gb.count": "14", "nvidia.com/mig.config": "all-1g.10gb",
                      "nvidia.com/device-plugin.config": "x", "kubernetes.io/hostname": "n1",
                      "nvidia.com/gpu.deploy.device-plugin": "true"}
    current_cap = {"cpu": "128", "nvidia.com/mig-1g.10gb": "14", "nvidia.com/gpu": "0"}
    ch = node_changes(current_labels, current_cap, desired)
    assert ch["labels"]["nvidia.com/mig-1g.10gb.count"] is None
    assert "nvidia.com/mig.config" not in ch["labels"]
    assert "nvidia.com/device-plugin.config" not in ch["labels"]
    assert "nvidia.com/gpu.deploy.device-plugin" not in ch["labels"]
    assert ch["capacity"] == {"nvidia.com/mig-1g.10gb": None, "nvidia.com/mig-3g.40gb": "4"}
    again = node_changes(desired["labels"], dict(desired["capacity"], cpu="1"), desired)
    assert again == {"labels": {}, "capacity": {}}


def test_owned_keys():
    assert owned_label("nvidia.com/gpu.product")
    assert owned_label("nvidia.com/mig-1g.10gb.count")
    assert not owned_label("nvidia.com/mig.config.state")
    assert not owned_label("example.com/gpu.product")
    assert owned_resource("nvidia.com/gpu.shared")
    assert not owned_resource("cpu")
