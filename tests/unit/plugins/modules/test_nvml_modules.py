# -*- coding: utf-8 -*-
"""Argument handling of the nvml_simulator, gpu_info and mig_mode modules (run in-process)."""

import json

import pytest

from ansible_collections.gpuops.k8s.plugins.modules import gpu_info, mig_mode, nvml_simulator

from module_harness import Fail, call


@pytest.fixture
def sim(tmp_path):
    path = str(tmp_path / "h.json")
    call(nvml_simulator, {"path": path, "gpus": [{"model": "a100_80gb", "count": 2}, {"model": "l4_24gb"}]})
    return path


def test_simulator_create_idempotent_check_and_diff(tmp_path):
    path = str(tmp_path / "h.json")
    args = {"path": path, "gpus": [{"model": "h100_80gb", "count": 2}], "seed": 1}
    res = call(nvml_simulator, dict(args, _ansible_check_mode=True))
    assert res["changed"] and not (tmp_path / "h.json").exists()
    res = call(nvml_simulator, dict(args, _ansible_diff=True))
    assert res["changed"] and res["diff"]["before"] == {} and len(res["diff"]["after"]["gpus"]) == 2
    res = call(nvml_simulator, args)
    assert not res["changed"] and "diff" not in res


def test_simulator_rejects_bad_input_without_writing(sim):
    before = open(sim).read()
    res = call(nvml_simulator, {"path": sim, "faults": [{"call": "nvmlFoo", "error": "IN_USE"}]}, Fail)
    assert "valid calls" in res["msg"]
    res = call(nvml_simulator, {"path": sim, "faults": [{"call": "nvmlDeviceGetName", "error": "NOPE"}]}, Fail)
    assert "NVML_ERROR_IN_USE" in res["msg"]
    res = call(nvml_simulator, {"path": sim, "processes": [{"gpu": 0, "gpu_instance_id": 3, "pid": 1}]}, Fail)
    assert "no GPU instance 3" in res["msg"]
    res = call(nvml_simulator, {"path": sim, "health": [{"gpu": 5, "temperature_c": 80}]}, Fail)
    assert "valid indexes: 0-2" in res["msg"]
    res = call(nvml_simulator, {"path": sim, "faults": [{"call": "nvmlInit", "count": 0}]}, Fail)
    assert "count must be 1 or more" in res["msg"]
    # argument spec: pid is required
    res = call(nvml_simulator, {"path": sim, "processes": [{"gpu": 0}]}, Fail)
    assert "pid" in res["msg"]
    assert open(sim).read() == before


def test_simulator_requires_gpus_to_create(tmp_path):
    res = call(nvml_simulator, {"path": str(tmp_path / "new.json")}, Fail)
    assert "gpus is required" in res["msg"] and "a100_80gb" in res["msg"]


def test_simulator_reset_and_absent(sim):
    uuid = json.load(open(sim))["gpus"][0]["uuid"]
    res = call(nvml_simulator, {"path": sim, "gpus": [{"model": "b200_180gb"}], "reset": True})
    assert res["changed"] and res["created"] and json.load(open(sim))["gpus"][0]["uuid"] != uuid
    assert call(nvml_simulator, {"path": sim, "state": "absent"})["changed"]
    assert not call(nvml_simulator, {"path": sim, "state": "absent"})["changed"]


def test_gpu_info_reads_and_takes_simulator_from_env(sim, monkeypatch):
    res = call(gpu_info, {"simulator": sim})
    assert not res["changed"] and len(res["gpus"]) == 3 and res["backend"] == "simulator"
    monkeypatch.setenv("GPUOPS_NVML_SIMULATOR", sim)
    res = call(gpu_info, {"diagram": False})
    assert res["gpus"][2]["model"] == "l4_24gb" and "diagram" not in res


def test_gpu_info_rejects_unknown_options(sim):
    res = call(gpu_info, {"simulator": sim, "gpus": 3}, Fail)
    assert "Unsupported parameters" in res["msg"]


def test_mig_mode_check_mode_and_choices(sim):
    before = open(sim).read()
    res = call(mig_mode, {"simulator": sim, "_ansible_check_mode": True})
    assert res["changed"] and res["reset_required"] and [s["index"] for s in res["skipped_gpus"]] == [2]
    assert open(sim).read() == before
    res = call(mig_mode, {"simulator": sim, "state": "on"}, Fail)
    assert "enabled, disabled" in res["msg"]
    res = call(mig_mode, {"simulator": sim, "devices": [2]}, Fail)
    assert "does not support MIG" in res["msg"] and "gpus" in res
    assert open(sim).read() == before


def test_mig_mode_enable_reset_idempotent(sim):
    res = call(mig_mode, {"simulator": sim, "reset": True, "_ansible_diff": True})
    assert res["changed"] and not res["reset_required"] and res["diff"]["after"]
    res = call(mig_mode, {"simulator": sim, "reset": True})
    assert not res["changed"]
