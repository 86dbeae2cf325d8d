# -*- coding: utf-8 -*-
"""Issue 35 section 3: mig_partition tries transient NVML errors again, safely, and reports each retry.

One H100 80GB (MIG on) in the simulator; every expected value is worked out from the layout by hand:
a 3g.40gb GPU instance is one NVML GPU instance create plus one compute instance create; destroying a
1g.10gb instance is one compute instance destroy plus one GPU instance destroy."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim


def _host(tmp_path):
    path = str(tmp_path / "host.json")
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": 1}], seed=5)
    state["gpus"][0]["mig_mode_current"] = state["gpus"][0]["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)
    return path


def _run(path, mig_devices, **params):
    params["layout"] = [{"devices": "all", "mig-enabled": True, "mig-devices": mig_devices}]
    with nvml.open_nvml(path) as backend:
        try:
            return mig_engine.run_mig_partition(backend, params), getattr(backend, "slept", [])
        finally:
            _run.slept = getattr(backend, "slept", [])


def _faults(path, *faults):
    state = nvml_sim.load_state(path)
    state["faults"] = list(faults)
    nvml_sim.save_state(path, state)


def _gis(path):
    """[(profile_id, start, [CI slices])] of GPU 0 in the state file."""
    return [(g["profile_id"], g["start"], [c["slices"] for c in g["compute_instances"]])
            for g in nvml_sim.load_state(path)["gpus"][0]["gpu_instances"]]


def test_transient_error_then_success_is_one_retry_and_the_layout_is_made_once(tmp_path):
    path = _host(tmp_path)
    _faults(path, {"call": "nvmlDeviceCreateGpuInstanceWithPlacement", "error": "NVML_ERROR_IN_USE", "count": 1})
    result, slept = _run(path, {"3g.40gb": 1})
    create = [a for a in result["actions"] if a["action"] == "create"][0]
    assert result["changed"] is True
    assert result["nvml_retries"] == [{"gpu": 0, "action": "create", "profile": "3g.40gb", "error": "NVML_ERROR_IN_USE",
                                       "nvml_call": "nvmlDeviceCreateGpuInstanceWithPlacement", "attempt": 1,
                                       "backoff_s": 1.0}]
    assert slept == [1.0]  # the simulator records the wait and does not wait
    # one GPU instance of profile 3g.40gb (profile id 9, as `nvidia-smi mig -lgip` lists it; `-cgi 9,19,14,19`) with one CI of 3 slices, where the plan put it
    assert _gis(path) == [(9, create["placement"]["start"], [3])]
    assert nvml_sim.load_state(path).get("faults") in ([], None)


def test_permanent_error_fails_at_once_without_a_retry(tmp_path):
    path = _host(tmp_path)
    _faults(path, {"call": "nvmlDeviceCreateGpuInstanceWithPlacement", "error": "NVML_ERROR_INSUFFICIENT_RESOURCES",
                   "count": 2})
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"3g.40gb": 1})
    d = e.value.details
    assert d["nvml_retries"] == [] and _run.slept == []
    assert d["failed_action"]["error_details"]["attempts"] == 1
    assert "NVML_ERROR_INSUFFICIENT_RESOURCES" in e.value.msg and "attempts" not in e.value.msg
    # the call was made once: one of the two counted faults is left
    assert nvml_sim.load_state(path)["faults"][0]["count"] == 1
    assert _gis(path) == []


def test_create_that_the_driver_made_before_failing_is_not_made_twice(tmp_path):
    path = _host(tmp_path)
    # the compute instance is created, then the call answers TIMEOUT (the handle never comes back)
    # a tripwire: destroying any compute instance fails the run (the instance made must stay as it is)
    _faults(path, {"call": "nvmlGpuInstanceCreateComputeInstance", "error": "NVML_ERROR_TIMEOUT", "count": 1,
                   "after_change": True},
            {"call": "nvmlComputeInstanceDestroy", "error": "NVML_ERROR_UNKNOWN", "count": 1})
    result, slept = _run(path, {"3g.40gb": 1})
    assert nvml_sim.load_state(path)["faults"] == [
        {"call": "nvmlComputeInstanceDestroy", "error": "NVML_ERROR_UNKNOWN", "count": 1}]
    assert [(r["error"], r["nvml_call"], r["attempt"]) for r in result["nvml_retries"]] == [
        ("NVML_ERROR_TIMEOUT", "nvmlGpuInstanceCreateComputeInstance", 1)]
    create = [a for a in result["actions"] if a["action"] == "create"][0]
    # one GI with one CI: the re-read found the instance made, no second create
    assert _gis(path) == [(9, create["placement"]["start"], [3])]
    assert create["gpu_instance_id"] == nvml_sim.load_state(path)["gpus"][0]["gpu_instances"][0]["id"]
    # and a second run changes nothing
    again, dummy = _run(path, {"3g.40gb": 1})
    assert again["changed"] is False and again["nvml_retries"] == []


def test_gpu_instance_made_before_the_error_is_rolled_back_and_made_once(tmp_path):
    path = _host(tmp_path)
    _faults(path, {"call": "nvmlDeviceCreateGpuInstanceWithPlacement", "error": "NVML_ERROR_TIMEOUT", "count": 1,
                   "after_change": True})
    result, dummy = _run(path, {"3g.40gb": 1})
    create = [a for a in result["actions"] if a["action"] == "create"][0]
    assert len(result["nvml_retries"]) == 1 and _gis(path) == [(9, create["placement"]["start"], [3])]


def _busy_kept_host(tmp_path):
    """3g.40gb (with a process) + 4 x 1g.10gb; the target 3g.40gb + 2g.20gb + 2 x 1g.10gb keeps the 3g.40gb."""
    path = _host(tmp_path)
    _run(path, {"3g.40gb": 1, "1g.10gb": 4})
    state = nvml_sim.load_state(path)
    big = [g for g in state["gpus"][0]["gpu_instances"] if g["size"] == 4][0]
    state["gpus"][0]["processes"] = [{"pid": 4242, "name": "llm", "gpu_instance_id": big["id"],
                                      "compute_instance_id": 0, "used_memory_mib": 1000}]
    nvml_sim.save_state(path, state)
    return path, big["id"], big["compute_instances"][0]["uuid"]


def test_destroy_that_the_driver_did_before_failing_is_not_tried_again_and_the_kept_instance_stays(tmp_path):
    path, kept_id, kept_uuid = _busy_kept_host(tmp_path)
    _faults(path, {"call": "nvmlGpuInstanceDestroy", "error": "NVML_ERROR_TIMEOUT", "count": 1, "after_change": True})
    result, dummy = _run(path, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})
    assert [(r["action"], r["error"], r["attempt"]) for r in result["nvml_retries"]] == [
        ("destroy", "NVML_ERROR_TIMEOUT", 1)]
    gis = nvml_sim.load_state(path)["gpus"][0]["gpu_instances"]
    kept = [g for g in gis if g["id"] == kept_id]
    assert len(kept) == 1 and kept[0]["compute_instances"][0]["uuid"] == kept_uuid
    # 3g.40gb (4 memory slices) + 2g.20gb (2) + 2 x 1g.10gb (1 each) = 8 memory slices, 4 GIs
    assert sorted(g["size"] for g in gis) == [1, 1, 2, 4]
    assert nvml_sim.load_state(path)["gpus"][0]["processes"][0]["pid"] == 4242


def test_attempts_exhausted_fail_with_the_error_and_its_attempts(tmp_path):
    path, kept_id, kept_uuid = _busy_kept_host(tmp_path)
    _faults(path, {"call": "nvmlGpuInstanceDestroy", "error": "NVML_ERROR_IN_USE", "count": 3})
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})
    d = e.value.details
    assert "NVML_ERROR_IN_USE" in e.value.msg and "after 3 attempts" in e.value.msg
    assert d["failed_action"]["error_details"]["attempts"] == 3
    assert d["failed_action"]["error_details"]["retries_exhausted"] is True
    assert [(r["attempt"], r["backoff_s"]) for r in d["nvml_retries"]] == [(1, 1.0), (2, 2.0)]
    assert _run.slept == [1.0, 2.0]
    # the first try destroyed the compute instance before its GPU instance refused: reported as done
    assert [c["action"] for c in d["completed"]] == ["destroy_compute_instance"]
    assert d["changed"] is True
    assert [g["compute_instances"][0]["uuid"] for g in nvml_sim.load_state(path)["gpus"][0]["gpu_instances"]
            if g["id"] == kept_id] == [kept_uuid]


def test_one_attempt_is_the_old_behaviour(tmp_path):
    path = _host(tmp_path)
    _faults(path, {"call": "nvmlDeviceCreateGpuInstanceWithPlacement", "error": "NVML_ERROR_IN_USE", "count": 1})
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"3g.40gb": 1}, nvml_attempts=1)
    assert e.value.details["nvml_retries"] == [] and e.value.details["failed_action"]["error_details"]["attempts"] == 1


def test_busy_instance_seen_with_its_processes_is_not_retried(tmp_path):
    path, kept_id, _uuid = _busy_kept_host(tmp_path)
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"7g.80gb": 1}, force=True)
    d = e.value.details
    assert d["nvml_retries"] == [] and "4242" in e.value.msg and d["failed_action"]["gpu_instance_id"] == kept_id


def test_check_mode_is_unaffected_and_bad_options_are_refused(tmp_path):
    path = _host(tmp_path)
    _faults(path, {"call": "nvmlDeviceCreateGpuInstanceWithPlacement", "error": "NVML_ERROR_IN_USE", "count": 1})
    with nvml.open_nvml(path) as backend:
        plan = mig_engine.run_mig_partition(backend, {"layout": [
            {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1}}]}, check_mode=True)
    assert plan["nvml_retries"] == [] and _gis(path) == []
    assert nvml_sim.load_state(path)["faults"][0]["count"] == 1
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"3g.40gb": 1}, nvml_attempts=0)
    assert "nvml_attempts" in e.value.msg and _gis(path) == []
