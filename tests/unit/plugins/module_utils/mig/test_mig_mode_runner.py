# -*- coding: utf-8 -*-
"""mig_mode runner: device selection, validation before change, check mode, resets, faults halfway."""

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import mig_changes
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import mode_runner as mig_mode_runner
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import open_nvml


@pytest.fixture
def host(tmp_path):
    path = str(tmp_path / "host.json")
    nvml_sim.save_state(path, nvml_sim.new_state(
        [{"model": "a100_80gb", "count": 2}, {"model": "h200_141gb", "count": 1}, {"model": "t4_16gb"}], seed=5))
    return path


def run(path, check_mode=False, **params):
    params.setdefault("state", "enabled")
    params.setdefault("devices", "all")
    params["simulator"] = path
    return mig_mode_runner.mig_mode(params, check_mode=check_mode)


def modes(path):
    with open_nvml(path) as nv:
        return [(g["mig_mode_current"], g["mig_mode_pending"]) for g in gpu_state.read_host(nv)["gpus"]]


def test_resolve_devices_by_index_uuid_and_all(host):
    with open_nvml(host) as nv:
        gpus = gpu_state.read_host(nv)["gpus"]
    targets, skipped = mig_mode_runner.resolve_devices(gpus, "all")
    assert [g["index"] for g in targets] == [0, 1, 2] and [s["index"] for s in skipped] == [3]
    targets, dummy = mig_mode_runner.resolve_devices(gpus, [gpus[2]["uuid"], "1", 1])
    assert [g["index"] for g in targets] == [2, 1]
    targets, dummy = mig_mode_runner.resolve_devices(gpus, 0)
    assert [g["index"] for g in targets] == [0]
    with pytest.raises(GpuOpsError) as e:
        mig_mode_runner.resolve_devices(gpus, [5])
    assert "valid devices" in e.value.msg and gpus[0]["uuid"] in e.value.msg
    with pytest.raises(GpuOpsError) as e:
        mig_mode_runner.resolve_devices(gpus, ["GPU-unknown"])
    assert "GPU-unknown" in e.value.msg
    with pytest.raises(GpuOpsError) as e:
        mig_mode_runner.resolve_devices(gpus, [3])
    assert "does not support MIG" in e.value.msg and "0, 1, 2" in e.value.msg


def test_check_mode_predicts_without_setting(host):
    before = open(host).read()
    res = run(host, check_mode=True)
    assert res["changed"] and open(host).read() == before
    assert [(m["current"], m["pending"]) for m in res["mig_mode"]] == [(False, True), (False, True), (True, True)]
    assert res["reset_required"]
    res = run(host, check_mode=True, reset=True)
    assert [a["action"] for a in res["actions"]] == [
        "set_mig_mode", "reset_gpu", "set_mig_mode", "reset_gpu", "set_mig_mode"]
    assert not res["reset_required"]
    assert open(host).read() == before


def test_enable_then_idempotent_then_reset(host):
    res = run(host)
    assert res["changed"] and res["reset_required"]
    assert modes(host)[:3] == [(False, True), (False, True), (True, True)]
    again = run(host)
    assert not again["changed"] and again["actions"] == [] and again["reset_required"]
    res = run(host, reset=True)
    assert res["changed"] and [a["action"] for a in res["actions"]] == ["reset_gpu", "reset_gpu"]
    assert not res["reset_required"]
    assert modes(host)[:3] == [(True, True)] * 3
    assert not run(host, reset=True)["changed"]


def test_diff_is_per_uuid(host):
    res = run(host, devices=[2])
    assert len(res["diff"]["before"]) == 1
    uuid = next(iter(res["diff"]["before"]))
    assert res["diff"]["before"][uuid] == {"current": False, "pending": False}
    assert res["diff"]["after"][uuid] == {"current": True, "pending": True}


def test_busy_gpu_fails_before_anything_changes(host):
    state = nvml_sim.load_state(host)
    state["gpus"][1]["processes"] = [{"pid": 4711, "name": "train"}]
    nvml_sim.save_state(host, state)
    with pytest.raises(GpuOpsError) as e:
        run(host)
    assert "4711" in e.value.msg and "GPU 1" in e.value.msg
    assert modes(host)[:3] == [(False, False)] * 3


def test_reset_refused_while_busy_names_pids(host):
    run(host, devices=[0])
    state = nvml_sim.load_state(host)
    state["gpus"][0]["processes"] = [{"pid": 99, "name": "x"}]
    nvml_sim.save_state(host, state)
    with pytest.raises(GpuOpsError) as e:
        run(host, devices=[0], reset=True)
    assert "99" in e.value.msg
    assert modes(host)[0] == (False, True)


def test_disable_with_instances_fails_and_destroys_nothing(host):
    run(host, devices=[2])
    with open_nvml(host) as nv:
        mig_changes.create_instance(nv, 2, "3g.71gb", 0)
    with pytest.raises(GpuOpsError) as e:
        run(host, state="disabled", devices=[2])
    assert "3g.71gb" in e.value.msg and "mig_partition" in e.value.msg
    with open_nvml(host) as nv:
        assert len(gpu_state.read_gpu(nv, 2)["instances"]) == 1


def test_fault_halfway_reports_accurately_and_rerun_converges(host):
    state = nvml_sim.load_state(host)
    state["faults"] = [{"call": "nvmlDeviceSetMigMode", "error": "NVML_ERROR_UNKNOWN", "count": 1, "gpu": 1}]
    nvml_sim.save_state(host, state)
    with pytest.raises(GpuOpsError) as e:
        run(host)
    d = e.value.details
    assert [a["gpu"] for a in d["actions"]] == [0]
    assert d["failed_action"]["gpu"] == 1 and d["changed"]
    assert [g["mig_mode_pending"] for g in d["gpus"]][:3] == [True, False, False]
    res = run(host)
    assert [a["gpu"] for a in res["actions"]] == [1, 2]
    assert modes(host)[:3] == [(False, True), (False, True), (True, True)]


def test_transient_mode_error_is_retried_once_and_not_set_twice(host):
    # GPU 1 (A100 80GB): the mode is set, then the call answers TIMEOUT; GPU 2 (H200): IN_USE once before the change
    state = nvml_sim.load_state(host)
    state["faults"] = [{"call": "nvmlDeviceSetMigMode", "error": "NVML_ERROR_TIMEOUT", "count": 1, "gpu": 1,
                        "after_change": True},
                       {"call": "nvmlDeviceSetMigMode", "error": "NVML_ERROR_IN_USE", "count": 1, "gpu": 2},
                       # tripwire: a second SetMigMode on GPU 1 would fail the run
                       {"call": "nvmlDeviceSetMigMode", "error": "NVML_ERROR_UNKNOWN", "count": 1, "gpu": 1}]
    nvml_sim.save_state(host, state)
    res = run(host)
    assert [(r["gpu"], r["error"], r["attempt"], r["backoff_s"]) for r in res["nvml_retries"]] == [
        (1, "NVML_ERROR_TIMEOUT", 1, 1.0), (2, "NVML_ERROR_IN_USE", 1, 1.0)]
    # Ampere: pending until a reset; H200: at once (Hopper toggles without a reset); T4: no MIG
    assert modes(host)[:3] == [(False, True), (False, True), (True, True)]
    assert nvml_sim.load_state(host)["faults"] == [
        {"call": "nvmlDeviceSetMigMode", "error": "NVML_ERROR_UNKNOWN", "count": 1, "gpu": 1}]


def test_permanent_mode_error_is_not_retried(host):
    state = nvml_sim.load_state(host)
    state["faults"] = [{"call": "nvmlDeviceSetMigMode", "error": "NVML_ERROR_NO_PERMISSION", "count": 2, "gpu": 0}]
    nvml_sim.save_state(host, state)
    with pytest.raises(GpuOpsError) as e:
        run(host)
    assert e.value.details["nvml_retries"] == [] and e.value.details["attempts"] == 1
    assert nvml_sim.load_state(host)["faults"][0]["count"] == 1
