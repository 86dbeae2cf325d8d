# -*- coding: utf-8 -*-
"""The catalog, the simulator and the facts against what a real GPU answered.

The fixtures under fixtures/hardware/ were read off a real NVIDIA H200 (SXM, driver 580.159.04,
MIG disabled) on 2026-12-04 by hack/device/nvml_capture.py and hack/device/check_mode_plans.py,
read-only: the collection's real NVML backend (nvidia-ml-py 13.615.71), no MIG, clock, power or
reset call (the plans ran behind a guard that refuses every non-read NVML call; it refused none).
"""

import json
import os

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import NOT_SUPPORTED, NvmlError, open_nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "hardware")
DRIVER = "580.159.04"


def _load(name):
    with open(os.path.join(HERE, "h200-%s-%s.json" % (DRIVER, name))) as f:
        return json.load(f)


CAPTURE = _load("nvml-capture")
PLANS = _load("check-mode-plans")
GPU = CAPTURE["nvml"]["gpus"][0]
MODEL = gpu_catalog.find_model("h200_141gb")
LISTED = [row for row in GPU["gi_profiles"] if "id" in row["info_v2"]]


def _strip_mig(name):
    return name[4:] if name.startswith("MIG ") else name


def test_capture_is_a_real_h200_read_with_mig_disabled():
    assert CAPTURE["gpu_info"]["backend"] == "nvml"
    assert CAPTURE["nvml"]["driver_version"] == DRIVER
    assert (GPU["name"], GPU["pci_device_id"], GPU["mig_mode"]) == ("NVIDIA H200", "0x2335", [0, 0])
    assert "error" not in CAPTURE["nvml"]["read_host"]
    assert PLANS["guard"]["refused"] == [] and PLANS["guard"]["read_calls"] > 0


def test_catalog_identifies_the_gpu_and_its_memory():
    assert gpu_catalog.lookup_model(int(GPU["pci_device_id"], 16)).key == MODEL.key == GPU["catalog_model"]
    assert gpu_catalog.lookup_model(GPU["name"]).key == MODEL.key
    assert GPU["memory_total_mib"] == MODEL.total_memory_mib
    assert CAPTURE["gpu_info"]["gpus"][0]["model"] == MODEL.key


def test_catalog_profiles_match_the_driver_row_by_row():
    assert sorted(row["constant"] for row in LISTED) == sorted(p.constant for p in MODEL.profiles)
    for row in LISTED:
        info = row["info_v2"]
        p = gpu_catalog.profile_by_constant(MODEL, row["constant"])
        assert p.name == _strip_mig(info["name"])
        assert (p.profile_id, p.compute_slices, p.max_instances, p.sm) == (
            info["id"], info["sliceCount"], info["instanceCount"], info["multiprocessorCount"])
        assert list(p.placements) == [start for start, size in row["placements"]]
        assert {size for start, size in row["placements"]} == {p.memory_slices}
        engines = gpu_catalog.profile_engines(MODEL, p)
        assert (engines["copy"], engines["decoder"], engines["encoder"], engines["jpeg"], engines["ofa"]) == (
            info["copyEngineCount"], info["decoderCount"], info["encoderCount"], info["jpegCount"], info["ofaCount"])
        # memory sizes move between driver branches (the catalog holds an earlier driver's reading);
        # within 1 % of each other, and the same name either way
        assert abs(p.memory_mib - info["memorySizeMB"]) <= 0.01 * info["memorySizeMB"]
        assert row["remaining_capacity"] == info["instanceCount"] and row["existing_instances"] == 0


def test_constants_the_driver_rejects_are_not_in_the_catalog():
    rejected = {row["constant"] for row in GPU["gi_profiles"] if "id" not in row["info_v2"]}
    assert rejected and not rejected & {p.constant for p in MODEL.profiles}
    codes = {row["info_v2"]["value"] for row in GPU["gi_profiles"] if "id" not in row["info_v2"]}
    assert codes <= {2, 3}  # INVALID_ARGUMENT past the last constant, NOT_SUPPORTED otherwise


@pytest.mark.parametrize("row", LISTED, ids=[r["info_v2"]["name"] for r in LISTED])
def test_naming_rule_reproduces_the_driver_names_from_its_memory_sizes(row):
    info = row["info_v2"]
    name = gpu_catalog.profile_name_from_memory(info["memorySizeMB"], GPU["memory_total_mib"], info["sliceCount"],
                                                suffix=gpu_catalog.CONSTANT_SUFFIX.get(row["constant"], ""))
    assert name == _strip_mig(info["name"])


def test_live_profiles_on_hardware_are_the_catalog_names_and_ids():
    live = GPU["live_profiles"]
    assert [(p["name"], p["profile_id"], tuple(p["placements"])) for p in live] == [
        (p.name, p.profile_id, p.placements) for p in MODEL.profiles]


@pytest.fixture
def sim_h200(tmp_path):
    path = str(tmp_path / "h200.json")
    nvml_sim.save_state(path, nvml_sim.new_state([{"model": "NVIDIA H200", "count": 1}], driver_version=DRIVER,
                                                 seed=1))
    return path


def test_simulator_answers_profile_queries_like_the_driver(sim_h200):
    with open_nvml(sim_h200) as nv:
        h = nv.nvmlDeviceGetHandleByIndex(0)
        assert nv.nvmlDeviceGetMaxMigDeviceCount(h) == GPU["max_mig_device_count"] == 0
        for row in GPU["gi_profiles"]:
            if "id" not in row["info_v2"]:
                with pytest.raises(NvmlError) as e:
                    nv.nvmlDeviceGetGpuInstanceProfileInfo(h, row["constant"])
                # the driver says INVALID_ARGUMENT for a constant newer than itself (17, 3_SLICE_GFX, on
                # 580.159.04) where the simulator, which knows all 18, says NOT_SUPPORTED: both are skipped
                assert e.value.value in (row["info_v2"]["value"], NOT_SUPPORTED)
                continue
            info = nv.nvmlDeviceGetGpuInstanceProfileInfo(h, row["constant"])
            real = row["info_v2"]
            assert (info.id, info.sliceCount, info.instanceCount, info.multiprocessorCount, info.name.decode()) == (
                real["id"], real["sliceCount"], real["instanceCount"], real["multiprocessorCount"], real["name"])
            assert [[p.start, p.size] for p in nv.nvmlDeviceGetGpuInstancePossiblePlacements(h, info.id)] == \
                row["placements"]
            assert nv.nvmlDeviceGetGpuInstanceRemainingCapacity(h, info.id) == row["remaining_capacity"]
            assert len(nv.nvmlDeviceGetGpuInstances(h, info.id)) == 0


def test_simulator_before_r580_does_not_list_profiles_with_mig_off(tmp_path):
    path = str(tmp_path / "old.json")
    nvml_sim.save_state(path, nvml_sim.new_state([{"model": "NVIDIA H200", "count": 1}], driver_version="535.183.01"))
    with open_nvml(path) as nv:
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceGetGpuInstanceProfileInfo(nv.nvmlDeviceGetHandleByIndex(0), 0)
    assert e.value.value == NOT_SUPPORTED


def test_simulated_facts_have_the_real_facts_shape(sim_h200):
    real = CAPTURE["gpu_info"]
    with open_nvml(sim_h200) as nv:
        sim = gpu_state.read_host(nv)
    assert set(sim) == set(real) - {"backend", "diagram"}
    assert set(sim["gpus"][0]) == set(real["gpus"][0])
    keep = ("name", "model", "pci_device_id", "memory_total_mib", "mig_capable", "mig_mode_current", "mig_mode_pending",
            "instances", "processes", "lost")
    assert {k: sim["gpus"][0][k] for k in keep} == {k: real["gpus"][0][k] for k in keep}
    assert (sim["driver_version"], sim["cuda_driver_version"]) == (real["driver_version"], real["cuda_driver_version"])


def _without_uuid(plan):
    out = dict(plan)
    out.pop("seconds", None)
    out["actions"] = [{k: v for k, v in a.items() if k != "uuid"} for a in plan.get("actions") or []]
    return out


@pytest.mark.parametrize("title", sorted(PLANS["real"]))
def test_check_mode_plans_on_the_simulator_equal_those_on_the_real_gpu(title):
    real, sim = _without_uuid(PLANS["real"][title]), _without_uuid(PLANS["simulated"][title])
    assert real == sim
    if real.get("failed"):
        assert "nothing was changed" in real["msg"]


LOAD = _load("under-load")


def test_facts_under_a_real_workload_show_its_process(sim_h200):
    """hack/device/under_load.py: a PyTorch matmul loop on the whole (non-MIG) H200; read_host took about 20 ms."""
    pid = LOAD["workload"]["pid"]
    assert LOAD["idle"]["processes"] == [] and LOAD["after"]["processes"] == []
    for reading in LOAD["loaded"]:
        assert [p["pid"] for p in reading["processes"]] == [pid]
        assert reading["utilization_gpu_pct"] > 0
    real = LOAD["loaded"][0]["processes"][0]
    # the simulator reports a process on a whole GPU with the same fields and nulls
    state = nvml_sim.load_state(sim_h200)
    state["gpus"][0]["processes"] = [{"pid": pid, "name": real["name"], "used_memory_mib": real["used_memory_mib"]}]
    nvml_sim.save_state(sim_h200, state)
    with open_nvml(sim_h200) as nv:
        assert gpu_state.read_gpu(nv, 0)["processes"] == [real]
