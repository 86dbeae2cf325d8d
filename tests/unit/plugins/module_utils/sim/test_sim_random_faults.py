# -*- coding: utf-8 -*-
"""The simulator's seeded random-fault mode (issue 16 item 13)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def _host(tmp_path, name, rate, seed):
    path = str(tmp_path / name)
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": 2}], seed=1)
    for gpu in state["gpus"]:
        gpu["mig_mode_current"] = gpu["mig_mode_pending"] = 1
    state["random_faults"] = {"rate": rate, "seed": seed}
    nvml_sim.save_state(path, state)
    return path


def _converge(path, runs=30):
    outcomes = []
    for dummy in range(runs):
        try:
            with nvml.open_nvml(path) as backend:
                mig_engine.run_mig_partition(backend, {"layout": [
                    {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]})
            outcomes.append("ok")
            return outcomes
        except GpuOpsError as e:
            assert e.details["failed_action"]["error_details"].get("random_fault") is True or \
                e.details["failed_action"]["error_details"].get("nvml_error") == "NVML_ERROR_UNKNOWN"
            outcomes.append("fault")
    return outcomes


def test_random_faults_hit_only_mutating_calls_reproducibly(tmp_path):
    a = _host(tmp_path, "a.json", 0.3, 42)
    b = _host(tmp_path, "b.json", 0.3, 42)
    ra, rb = _converge(a), _converge(b)
    assert ra == rb and ra[-1] == "ok" and "fault" in ra  # same seed, same story; it converges
    sa, sb = nvml_sim.load_state(a), nvml_sim.load_state(b)
    assert sa["random_faults"] == sb["random_faults"]
    # every failed run is one injected fault (a fault in a rollback adds one more)
    assert sa["random_faults"]["injected"] >= ra.count("fault") and sa["random_faults"]["draws"] > 14
    # reads never fail
    with nvml.open_nvml(a) as backend:
        for dummy in range(20):
            gpu_state.read_host(backend)


def test_rate_zero_injects_nothing_and_rate_one_everything(tmp_path):
    zero = _host(tmp_path, "z.json", 0.0, 1)
    assert _converge(zero, runs=1) == ["ok"]
    assert nvml_sim.load_state(zero)["random_faults"]["injected"] == 0
    one = _host(tmp_path, "o.json", 1.0, 1)
    assert _converge(one, runs=3) == ["fault"] * 3
    # every run tries both GPUs (a failed GPU does not stop the other) and the first mutating call of each fails:
    # 3 runs x 2 GPUs
    assert nvml_sim.load_state(one)["random_faults"]["injected"] == 6


@pytest.mark.parametrize("spec, field", [({"rate": 2}, "random_faults.rate"), ({}, "random_faults.rate"),
                                         ({"rate": 0.1, "calls": ["nope"]}, "random_faults.calls[0]")])
def test_random_faults_are_validated(tmp_path, spec, field):
    path = _host(tmp_path, "v.json", 0.1, 1)
    state = nvml_sim.load_state(path)
    state["random_faults"] = spec
    nvml_sim.save_state(path, state)
    with pytest.raises(GpuOpsError) as e:
        nvml_sim.load_state(path)
    assert field in e.value.msg


def test_fault_mix_is_drawn_by_weight():
    from ansible_collections.gpuops.k8s.plugins.module_utils.sim.writer import _fault_kind
    spec = {"mix": [{"error": "A", "weight": 3}, {"error": "B", "weight": 1}]}
    # weights 3 and 1: [0, 0.75) is A, [0.75, 1) is B
    assert [_fault_kind(spec, x)["error"] for x in (0.0, 0.74, 0.75, 0.99)] == ["A", "A", "B", "B"]
    assert _fault_kind({"error": "NVML_ERROR_IN_USE"}, 0.5) == {"error": "NVML_ERROR_IN_USE", "weight": 1}
    assert _fault_kind({}, 0.5)["error"] == "NVML_ERROR_UNKNOWN"


def test_after_change_fault_makes_the_change_then_fails(tmp_path):
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import NvmlError
    path = _host(tmp_path, "m.json", 1.0, 7)
    state = nvml_sim.load_state(path)
    state["random_faults"].update(calls=["nvmlDeviceCreateGpuInstanceWithPlacement"],
                                  mix=[{"error": "NVML_ERROR_TIMEOUT", "after_change": True}])
    nvml_sim.save_state(path, state)
    with nvml.open_nvml(path) as backend:
        handle = backend.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(NvmlError) as e:
            # 7g.80gb: profile id 0, placement 0:8 (nvidia-smi mig -lgipp)
            backend.nvmlDeviceCreateGpuInstanceWithPlacement(handle, 0, {"start": 0, "size": 8})
    assert e.value.name == "NVML_ERROR_TIMEOUT" and e.value.details["after_change"] is True
    state = nvml_sim.load_state(path)
    assert [(g["profile_id"], g["start"]) for g in state["gpus"][0]["gpu_instances"]] == [(0, 0)]
    spec = state["random_faults"]
    assert spec["injected"] == 1 and spec["injected_after_change"] == 1
    assert spec["injected_by_error"] == {"NVML_ERROR_TIMEOUT": 1}


def test_counted_after_change_fault_makes_the_change_then_fails(tmp_path):
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import NvmlError
    path = _host(tmp_path, "c.json", 0.0, 7)
    state = nvml_sim.load_state(path)
    state["faults"] = [{"call": "nvmlDeviceCreateGpuInstanceWithPlacement", "error": "NVML_ERROR_TIMEOUT", "count": 1,
                        "after_change": True}]
    nvml_sim.save_state(path, state)
    with nvml.open_nvml(path) as backend:
        handle = backend.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(NvmlError) as e:
            backend.nvmlDeviceCreateGpuInstanceWithPlacement(handle, 0, {"start": 0, "size": 8})
    assert e.value.name == "NVML_ERROR_TIMEOUT"
    state = nvml_sim.load_state(path)
    assert [(g["profile_id"], g["start"]) for g in state["gpus"][0]["gpu_instances"]] == [(0, 0)]
    assert state.get("faults") in ([], None)
