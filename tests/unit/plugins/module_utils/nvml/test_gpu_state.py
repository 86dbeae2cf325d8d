# -*- coding: utf-8 -*-
"""gpu_state: facts shape, naming from live NVML values, MIG primitives."""

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import mig_changes
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import IN_USE, NvmlError, open_nvml

FACT_KEYS = {
    "index", "uuid", "name", "model", "pci_device_id", "pci_bus_id", "memory_total_mib", "mig_capable",
    "mig_mode_current", "mig_mode_pending", "instances", "ecc_errors", "retired_pages_pending",
    "remapped_rows_failure", "temperature_c", "power_w", "utilization_gpu_pct", "processes",
}
INSTANCE_KEYS = {"profile", "placement", "gpu_instance_id", "compute_instance_id", "uuid", "memory_mib", "busy"}


@pytest.fixture
def host(tmp_path):
    path = str(tmp_path / "host.json")
    nvml_sim.save_state(path, nvml_sim.new_state(
        [{"model": "a100_80gb", "count": 1}, {"model": "h100_80gb", "count": 1}, {"model": "l40s_48gb"}],
        driver_version="550.127.08", seed=3))
    return path


def enable(nv, index):
    mig_changes.set_mig_mode(nv, index, True)
    if not gpu_state.read_gpu(nv, index)["mig_mode_current"]:
        mig_changes.reset_gpu(nv, index)


def test_read_host_shape(host):
    with open_nvml(host) as nv:
        facts = gpu_state.read_host(nv)
    assert facts["driver_version"] == "550.127.08"
    assert facts["cuda_driver_version"] == "12.4"
    assert [g["model"] for g in facts["gpus"]] == ["a100_80gb", "h100_80gb", "l40s_48gb"]
    for g in facts["gpus"]:
        assert FACT_KEYS <= set(g)
        assert g["lost"] is False
    a100, h100, l40s = facts["gpus"]
    assert a100["pci_device_id"] == "0x20B2" and a100["memory_total_mib"] == 81920
    assert a100["mig_capable"] and not a100["mig_mode_current"]
    assert not l40s["mig_capable"] and l40s["instances"] == []
    assert a100["ecc_errors"] == {"volatile_uncorrected": 0, "aggregate_uncorrected": 0}


def test_set_mig_mode_reports_activation(host):
    with open_nvml(host) as nv:
        assert mig_changes.set_mig_mode(nv, 0, True) == {"current": False, "pending": True, "activation_status": 16}
        assert mig_changes.set_mig_mode(nv, 1, True) == {"current": True, "pending": True, "activation_status": 0}


def test_live_profiles_catalog_fallback_then_live(host):
    with open_nvml(host) as nv:
        # MIG not active yet: NVML cannot list profiles, the catalog answers
        assert gpu_state.live_profiles(nv, 0) == list(gpu_catalog.CATALOG["a100_80gb"].profiles)
        assert gpu_state.live_profiles(nv, 2) == []
        enable(nv, 0)
        live = gpu_state.live_profiles(nv, 0)
        assert [p.name for p in live] == [p.name for p in gpu_catalog.CATALOG["a100_80gb"].profiles]
        assert all(p.placements for p in live)


def test_live_values_win_over_the_catalog(host, monkeypatch):
    """Profile ids and memory sizes come from NVML; names from the v2 name, else the naming rule."""
    with open_nvml(host) as nv:
        enable(nv, 1)
        real = nv.nvmlDeviceGetGpuInstanceProfileInfo

        def patched(handle, const, version=2):
            info = real(handle, const, version)
            info.id = info.id + 100  # a driver with other ids
            info.memorySizeMB = info.memorySizeMB + 64
            info.name = b""  # no v2 name: the naming rule is used
            return info

        real_pl = nv.nvmlDeviceGetGpuInstancePossiblePlacements

        def patched_pl(handle, pid):
            return real_pl(handle, pid - 100)

        monkeypatch.setattr(nv, "nvmlDeviceGetGpuInstanceProfileInfo", patched)
        monkeypatch.setattr(nv, "nvmlDeviceGetGpuInstancePossiblePlacements", patched_pl)
        gpu_state.invalidate(nv)
        live = dict((p.constant, p) for p in gpu_state.live_profiles(nv, 1))
        one = live[gpu_catalog.GI_PROFILE_1_SLICE]
        assert one.profile_id == 119
        assert one.memory_mib == 9984 + 64
        assert one.name == "1g.10gb"
        assert live[gpu_catalog.GI_PROFILE_1_SLICE_REV1].name == "1g.10gb+me"
        assert live[gpu_catalog.GI_PROFILE_7_SLICE].name == "7g.80gb"


def test_create_read_destroy(host):
    with open_nvml(host) as nv:
        enable(nv, 0)
        made = mig_changes.create_instance(nv, 0, "3g.40gb", 4, [2, 1])
        assert [i["profile"] for i in made] == ["2c.3g.40gb", "1c.3g.40gb"]
        assert all(INSTANCE_KEYS <= set(i) for i in made)
        assert made[0]["placement"] == {"start": 4, "size": 4}
        assert made[0]["gpu_instance_id"] == 2
        full = mig_changes.create_instance(nv, 0, gpu_catalog.get_profile(gpu_catalog.CATALOG["a100_80gb"], "1g.10gb"), 0)
        assert [i["profile"] for i in full] == ["1g.10gb"]
        assert full[0]["uuid"].startswith("MIG-") and full[0]["memory_mib"] == 9728
        gpu = gpu_state.read_gpu(nv, 0)
        assert [(i["profile"], i["gpu_instance_id"], i["compute_instance_id"]) for i in gpu["instances"]] == [
            ("1g.10gb", 7, 0), ("2c.3g.40gb", 2, 0), ("1c.3g.40gb", 2, 1)]
        mig_changes.destroy_instance(nv, 0, 2)
        assert [i["profile"] for i in gpu_state.read_gpu(nv, 0)["instances"]] == ["1g.10gb"]


def test_create_validates_before_touching_nvml(host):
    with open_nvml(host) as nv:
        enable(nv, 0)
        with pytest.raises(GpuOpsError) as e:
            mig_changes.create_instance(nv, 0, "5g.50gb", 0)
        assert "valid profiles" in e.value.msg and "3g.40gb" in e.value.msg
        with pytest.raises(GpuOpsError) as e:
            mig_changes.create_instance(nv, 0, "3g.40gb", 2)
        assert "valid starts: 0, 4" in e.value.msg
        with pytest.raises(GpuOpsError) as e:
            mig_changes.create_instance(nv, 0, "4g.40gb", 0, [3])
        assert "valid sizes: 1, 2, 4" in e.value.msg
        with pytest.raises(GpuOpsError) as e:
            mig_changes.create_instance(nv, 2, "1g.10gb", 0)
        assert "does not support MIG" in e.value.msg
        assert gpu_state.read_gpu(nv, 0)["instances"] == []


def test_create_rolls_back_when_a_compute_instance_fails(host):
    with open_nvml(host) as nv:
        enable(nv, 1)
    state = nvml_sim.load_state(host)
    state["faults"] = [{"call": "nvmlGpuInstanceCreateComputeInstance", "error": "NVML_ERROR_UNKNOWN", "count": 1}]
    nvml_sim.save_state(host, state)
    with open_nvml(host) as nv:
        with pytest.raises(NvmlError) as e:
            mig_changes.create_instance(nv, 1, "2g.20gb", 0)
        assert e.value.details["rolled_back"] is True
        assert gpu_state.read_gpu(nv, 1)["instances"] == []
        # the re-run converges
        assert [i["profile"] for i in mig_changes.create_instance(nv, 1, "2g.20gb", 0)] == ["2g.20gb"]


def test_busy_instance_is_reported_and_not_destroyed(host):
    with open_nvml(host) as nv:
        enable(nv, 1)
        mig_changes.create_instance(nv, 1, "1g.10gb", 0)
        mig_changes.create_instance(nv, 1, "1g.10gb", 1)
    state = nvml_sim.load_state(host)
    state["gpus"][1]["processes"] = [{"pid": 1234, "name": "python", "gpu_instance_id": 8}]
    nvml_sim.save_state(host, state)
    with open_nvml(host) as nv:
        gpu = gpu_state.read_gpu(nv, 1)
        assert [(i["gpu_instance_id"], i["busy"]) for i in gpu["instances"]] == [(7, False), (8, True)]
        assert gpu["processes"] == [{"pid": 1234, "name": "python", "gpu_instance_id": 8, "compute_instance_id": 0,
                                     "used_memory_mib": 0}]
        with pytest.raises(NvmlError) as e:
            mig_changes.destroy_instance(nv, 1, 8)
        assert e.value.value == IN_USE and "1234" in e.value.msg
        with pytest.raises(NvmlError) as e:
            mig_changes.reset_gpu(nv, 1)
        assert e.value.value == IN_USE
        mig_changes.destroy_instance(nv, 1, 7)
        assert [i["gpu_instance_id"] for i in gpu_state.read_gpu(nv, 1)["instances"]] == [8]


def test_gpu_instance_without_compute_instance(host):
    with open_nvml(host) as nv:
        enable(nv, 1)
        h = nv.nvmlDeviceGetHandleByIndex(1)
        nv.nvmlDeviceCreateGpuInstance(h, gpu_catalog.get_profile(gpu_catalog.CATALOG["h100_80gb"], "2g.20gb").profile_id)
        (inst,) = gpu_state.read_gpu(nv, 1)["instances"]
        assert inst["profile"] == "2g.20gb"
        assert inst["compute_instance_id"] is None and inst["uuid"] is None
        assert inst["has_compute_instance"] is False
        mig_changes.destroy_instance(nv, 1, inst["gpu_instance_id"])
        assert gpu_state.read_gpu(nv, 1)["instances"] == []


def test_lost_gpu_is_reported_not_raised(host):
    state = nvml_sim.load_state(host)
    state["gpus"][1]["health"] = {"lost": True}
    nvml_sim.save_state(host, state)
    with open_nvml(host) as nv:
        facts = gpu_state.read_host(nv)
    assert facts["gpus"][1]["lost"] is True and facts["gpus"][1]["uuid"] is None
    assert facts["gpus"][0]["lost"] is False


def test_gpu_info_of_a_partitioned_eight_gpu_host(tmp_path):
    """gpu_info on 8 fully partitioned GPUs (the speed is measured by benchmarks/nvml_sim_speed.py)."""
    path = str(tmp_path / "dgx.json")
    nvml_sim.save_state(path, nvml_sim.new_state([{"model": "h100_80gb", "count": 8}]))
    with open_nvml(path) as nv:
        for i in range(8):
            enable(nv, i)
            for s in range(7):
                mig_changes.create_instance(nv, i, "1g.10gb", s)
    info = gpu_state.gpu_info(path, diagram=False)
    assert [len(g["instances"]) for g in info["gpus"]] == [7] * 8
    assert len(set(i["uuid"] for g in info["gpus"] for i in g["instances"])) == 56


def test_cuda_version_string():
    assert gpu_state.cuda_version_string(12040) == "12.4"
    assert gpu_state.cuda_version_string(11080) == "11.8"
    assert gpu_state.cuda_version_string(None) is None


def test_old_driver_without_v2_profile_info_uses_v1_and_the_naming_rule(host, monkeypatch):
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import FUNCTION_NOT_FOUND
    with open_nvml(host) as nv:
        enable(nv, 0)
        real = nv.nvmlDeviceGetGpuInstanceProfileInfo
        versions = []

        def v1_only(handle, const, version=2):
            versions.append(version)
            if version == 2:
                raise NvmlError(FUNCTION_NOT_FOUND, call="nvmlDeviceGetGpuInstanceProfileInfo")
            return real(handle, const, version)

        monkeypatch.setattr(nv, "nvmlDeviceGetGpuInstanceProfileInfo", v1_only)
        gpu_state.invalidate(nv)
        names = [p.name for p in gpu_state.live_profiles(nv, 0)]
    assert names == [p.name for p in gpu_catalog.CATALOG["a100_80gb"].profiles]
    assert 1 in versions and 2 in versions


@pytest.mark.parametrize("rendered", ["GPU0 a\nGPU1 b", ["GPU0 a", "GPU1 b"]])
def test_gpu_info_adds_the_slice_diagram_as_lines(host, monkeypatch, rendered):
    import sys
    import types
    fake = types.ModuleType("diagram")
    seen = []
    fake.render = lambda gpus: seen.append(len(gpus)) or rendered
    monkeypatch.setitem(sys.modules, "ansible_collections.gpuops.k8s.plugins.module_utils.report.diagram", fake)
    from ansible_collections.gpuops.k8s.plugins.module_utils import report
    monkeypatch.setattr(report, "diagram", fake, raising=False)
    info = gpu_state.gpu_info(host)
    assert info["diagram"] == ["GPU0 a", "GPU1 b"] and seen == [3]
    assert "diagram" not in gpu_state.gpu_info(host, diagram=False)


def test_create_on_a_gpu_whose_mig_mode_is_pending_says_so(host):
    with open_nvml(host) as nv:
        mig_changes.set_mig_mode(nv, 0, True)
        with pytest.raises(NvmlError) as e:
            mig_changes.create_instance(nv, 0, "1g.10gb", 0)
    assert e.value.value == 3
    assert "MIG mode is not enabled (current: off, pending: on)" in e.value.msg and "reset" in e.value.msg
