# -*- coding: utf-8 -*-
"""gpu_settings: reading, validation before any change, check mode, idempotence, ECC pending, faults."""

import json

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.host import settings as gs
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import open_nvml


@pytest.fixture
def host(tmp_path):
    path = str(tmp_path / "host.json")
    nvml_sim.save_state(path, nvml_sim.new_state(
        [{"model": "h100_80gb", "count": 2}, {"model": "rtx4090_24gb", "count": 1}], seed=3))
    return path


def run(path, check_mode=False, **params):
    params["simulator"] = path
    params.setdefault("devices", "all")
    return gs.gpu_settings(params, check_mode=check_mode)


def settings(path, index):
    with open_nvml(path) as nv:
        return gs.read_settings(nv, index)


def test_read_defaults_and_unsupported(host):
    h100 = settings(host, 0)
    assert h100["persistence_mode"] is False and h100["compute_mode"] == "default"
    assert (h100["power_limit_min_w"], h100["power_limit_max_w"], h100["power_limit_w"]) == (200.0, 700.0, 700.0)
    assert h100["ecc_mode_current"] is True and h100["ecc_mode_pending"] is True
    assert h100["application_clocks"] == {"memory_mhz": 2619, "graphics_mhz": 1755}
    rtx = settings(host, 2)
    assert rtx["ecc_mode_current"] is None and rtx["application_clocks"] is None


def test_change_then_idempotent(host):
    res = run(host, devices=[0, 1], persistence_mode=True, mps=True, power_limit=600)
    assert res["changed"]
    assert sorted(set(a["setting"] for a in res["actions"])) == ["compute_mode", "persistence_mode", "power_limit_w"]
    assert [g["compute_mode"] for g in res["gpus"]] == ["exclusive_process"] * 2
    assert [g["power_limit_w"] for g in res["gpus"]] == [600.0, 600.0]
    assert settings(host, 1)["persistence_mode"] is True
    again = run(host, devices=[0, 1], persistence_mode=True, mps=True, power_limit=600)
    assert not again["changed"] and again["actions"] == []
    back = run(host, devices=[0], mps=False, power_limit="default")
    assert [a["setting"] for a in back["actions"]] == ["compute_mode", "power_limit_w"]
    assert settings(host, 0)["compute_mode"] == "default" and settings(host, 0)["power_limit_w"] == 700.0


def test_check_mode_calls_no_setter(host):
    before = open(host).read()
    res = run(host, check_mode=True, devices=[0], persistence_mode=True, compute_mode="prohibited",
              power_limit="min", ecc=False, application_clocks={"memory_mhz": 2619, "graphics_mhz": 1980})
    assert res["changed"] and len(res["actions"]) == 5
    gpu = res["gpus"][0]
    assert gpu["power_limit_w"] == 200.0 and gpu["ecc_mode_pending"] is False and gpu["reboot_required"]
    assert res["diff"]["before"][gpu["uuid"]]["compute_mode"] == "default"
    assert res["diff"]["after"][gpu["uuid"]]["compute_mode"] == "prohibited"
    assert json.loads(open(host).read()) == json.loads(before)


def test_ecc_is_pending_until_reboot(host):
    res = run(host, devices=[1], ecc=False)
    assert res["changed"] and res["reboot_required"]
    assert res["gpus"][0]["ecc_mode_current"] is True and res["gpus"][0]["ecc_mode_pending"] is False
    assert not run(host, devices=[1], ecc=False)["changed"]


@pytest.mark.parametrize("params, words", [
    ({"power_limit": 750}, ["750 W is out of range", "valid 200 to 700 W"]),
    ({"power_limit": 150}, ["out of range"]),
    ({"power_limit": "lots"}, ["watts"]),
    ({"application_clocks": {"memory_mhz": 2619, "graphics_mhz": 2100}}, ["not supported", "2619"]),
    ({"application_clocks": "fast"}, ["'default' or {memory_mhz, graphics_mhz}"]),
    ({"compute_mode": "exclusive_thread"}, ["compute_mode must be one of"]),
    ({"devices": [7], "persistence_mode": True}, ["not a GPU on this host"]),
])
def test_bad_input_fails_before_any_change(host, params, words):
    before = open(host).read()
    # GPU 0 would change first (persistence) if validation did not come first
    params = dict(params)
    params.setdefault("persistence_mode", True)
    with pytest.raises(GpuOpsError) as e:
        run(host, **params)
    for w in words:
        assert w in e.value.msg
    assert open(host).read() == before


def test_unsupported_feature_named(host):
    with pytest.raises(GpuOpsError) as e:
        run(host, ecc=True)
    assert "GPU 2 (NVIDIA GeForce RTX 4090) does not support ECC" in e.value.msg
    # the same request on the GPUs that have ECC works
    assert not run(host, devices=[0, 1], ecc=True)["changed"]


def test_fault_halfway_reports_done_and_state(host):
    state = nvml_sim.load_state(host)
    state.setdefault("faults", []).append({"call": "nvmlDeviceSetPowerManagementLimit", "error": "NVML_ERROR_NO_PERMISSION",
                                           "gpu": 1})
    nvml_sim.save_state(host, state)
    with pytest.raises(GpuOpsError) as e:
        run(host, devices=[0, 1], persistence_mode=True, power_limit=500)
    d = e.value.details
    done = [a["setting"] for a in d["actions"]]
    assert d["changed"] and done == ["persistence_mode", "power_limit_w", "persistence_mode"]
    assert d["failed_action"]["gpu"] == 1 and d["nvml_error"] == "NVML_ERROR_NO_PERMISSION"
    assert [g["power_limit_w"] for g in d["gpus"]] == [500.0, 700.0]
