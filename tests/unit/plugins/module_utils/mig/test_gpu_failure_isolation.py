# -*- coding: utf-8 -*-
"""Issue 35 section 3: a permanent NVML fault costs only the GPU it hit. The GPUs' changes are independent, so
mig_partition goes on with the host's other GPUs, reports per GPU done / failed / not attempted, and fails at the
end naming the failed GPU; a re-run redoes that GPU only. A host-wide error (no permission, no driver) still stops
the run.

Four H100 80GB (MIG on), each in the chaos fleet's layout A = 3g.40gb + 4 x 1g.10gb with a workload on the
3g.40gb, moved to B = 3g.40gb + 2g.20gb + 2 x 1g.10gb. Worked out by hand: B keeps the 3g.40gb and two of the
1g.10gb, destroys the other two 1g.10gb (the 2g.20gb needs two free adjacent slices) and creates one 2g.20gb:
per GPU 2 destroys then 1 create. A destroy is a compute instance destroy then a GPU instance destroy, so a
fault on GPU 1's first nvmlComputeInstanceDestroy changes nothing on GPU 1 and leaves its second destroy and its
create not attempted."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import error_code
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim

LAYOUT_A = {"3g.40gb": 1, "1g.10gb": 4}
LAYOUT_B = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
A = ["1g.10gb"] * 4 + ["3g.40gb"]
B = ["1g.10gb"] * 2 + ["2g.20gb", "3g.40gb"]


def _params(mig_devices):
    return {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": mig_devices}]}


def _run(path, mig_devices, check_mode=False):
    with nvml.open_nvml(path) as backend:
        return mig_engine.run_mig_partition(backend, _params(mig_devices), check_mode=check_mode)


def _host(tmp_path):
    path = str(tmp_path / "host.json")
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": 4}], seed=3)
    for gpu in state["gpus"]:
        gpu["mig_mode_current"] = gpu["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)
    _run(path, LAYOUT_A)
    state = nvml_sim.load_state(path)
    for gpu in state["gpus"]:
        big = [gi for gi in gpu["gpu_instances"] if gi["size"] == 4][0]
        gpu["processes"] = [{"pid": 5000 + gpu["index"], "name": "serve", "gpu_instance_id": big["id"],
                             "compute_instance_id": 0, "used_memory_mib": 1000}]
    nvml_sim.save_state(path, state)
    return path


def _faults(path, *faults):
    state = nvml_sim.load_state(path)
    state["faults"] = list(faults)
    nvml_sim.save_state(path, state)


def _read(path):
    with nvml.open_nvml(path) as backend:
        return gpu_state.read_host(backend)["gpus"]


def _profiles(gpu):
    return sorted(i.profile for i in mig_instances.instances_from_gpu(gpu))


def _survivors(path):
    """{(gpu, GPU instance id): MIG device uuids} of every instance the plan to B does not destroy."""
    plan = _run(path, LAYOUT_B, check_mode=True)
    destroyed = set((a["gpu"], a["gpu_instance_id"]) for a in plan["actions"] if a["action"] == "destroy")
    out = {}
    for gpu in _read(path):
        for row in gpu["instances"]:
            key = (gpu["index"], row["gpu_instance_id"])
            if key not in destroyed:
                out.setdefault(key, []).append(row["uuid"])
    return out


def _assert_survived(path, survivors):
    now = {}
    for gpu in _read(path):
        for row in gpu["instances"]:
            now.setdefault((gpu["index"], row["gpu_instance_id"]), []).append(row["uuid"])
    for key, uuids in survivors.items():
        assert sorted(now.get(key, [])) == sorted(uuids), key
    procs = [(g["index"], p["pid"]) for g in nvml_sim.load_state(path)["gpus"] for p in g.get("processes", [])]
    assert procs == [(0, 5000), (1, 5001), (2, 5002), (3, 5003)]


@pytest.mark.parametrize("error", ["NVML_ERROR_UNKNOWN", "NVML_ERROR_GPU_IS_LOST"])
def test_permanent_fault_on_gpu1_leaves_the_other_gpus_converged(tmp_path, error):
    path = _host(tmp_path)
    survivors = _survivors(path)
    assert len(survivors) == 4 * 3  # the 3g.40gb and two 1g.10gb per GPU
    _faults(path, {"call": "nvmlComputeInstanceDestroy", "error": error, "count": 1, "gpu": 1})
    with pytest.raises(GpuOpsError) as e:
        _run(path, LAYOUT_B)
    d = e.value.details
    # the task fails naming GPU 1 and the error
    assert "GPU 1" in e.value.msg and error in e.value.msg and "failed GPU(s): 1;" in e.value.msg
    assert "GPU(s) 0, 2, 3 done" in e.value.msg and "run again" in e.value.msg
    assert d["failed_gpus"] == [1]
    assert d["failed_action"]["gpu"] == 1 and d["failed_action"]["action"] == "destroy"
    assert d["failed_action"]["nvml_return"] == error_code(error)
    assert [a["gpu"] for a in d["failed_actions"]] == [1]
    assert [(r["gpu"], r["status"]) for r in d["gpu_results"]] == [(0, "done"), (1, "failed"), (2, "done"), (3, "done")]
    assert error in d["gpu_results"][1]["error"]
    # GPUs 0, 2, 3: 2 destroys and 1 create each; GPU 1: nothing done, its 2nd destroy and its create not attempted
    assert sorted((a["gpu"], a["action"]) for a in d["completed"]) == sorted(
        [(g, "destroy") for g in (0, 2, 3) for dummy in range(2)] + [(g, "create") for g in (0, 2, 3)])
    assert [(a["gpu"], a["action"], a.get("profile")) for a in d["not_attempted"]] == [
        (1, "destroy", "1g.10gb"), (1, "create", "2g.20gb")]
    assert [(r["gpu"], r["completed"], r["not_attempted"]) for r in d["gpu_results"]] == [
        (0, 3, 0), (1, 0, 2), (2, 3, 0), (3, 3, 0)]
    assert d["not_attempted_gpus"] == [] and d["changed"] is True
    # the state as left, and the report says the same
    now = _read(path)
    assert [_profiles(g) for g in now] == [B, A, B, B]
    assert [_profiles(g) for g in d["gpus"]] == [B, A, B, B]
    assert d["resources"] == {"nvidia.com/mig-1g.10gb": 2 * 3 + 4, "nvidia.com/mig-2g.20gb": 3,
                              "nvidia.com/mig-3g.40gb": 4}
    _assert_survived(path, survivors)
    # the re-run redoes GPU 1 only and converges; one more run changes nothing
    r = _run(path, LAYOUT_B)
    assert r["changed"] is True
    assert sorted(set(a["gpu"] for a in r["actions"] if a["action"] != "keep")) == [1]
    assert [_profiles(g) for g in _read(path)] == [B, B, B, B]
    _assert_survived(path, survivors)
    assert _run(path, LAYOUT_B)["changed"] is False


def test_two_gpus_fail_both_named_the_others_done(tmp_path):
    path = _host(tmp_path)
    survivors = _survivors(path)
    _faults(path, {"call": "nvmlDeviceCreateGpuInstanceWithPlacement", "error": "NVML_ERROR_UNKNOWN", "count": 1,
                   "gpu": 1},
            {"call": "nvmlComputeInstanceDestroy", "error": "NVML_ERROR_UNKNOWN", "count": 1, "gpu": 3})
    with pytest.raises(GpuOpsError) as e:
        _run(path, LAYOUT_B)
    d = e.value.details
    assert d["failed_gpus"] == [1, 3] and "failed GPU(s): 1, 3;" in e.value.msg
    assert "create of 2g.20gb on GPU 1" in e.value.msg and "destroy of 1g.10gb on GPU 3" in e.value.msg
    # the first failure stays in failed_action, every one is in failed_actions
    assert d["failed_action"]["gpu"] == 1 and [a["action"] for a in d["failed_actions"]] == ["create", "destroy"]
    assert [r["status"] for r in d["gpu_results"]] == ["done", "failed", "done", "failed"]
    # GPU 1 did its two destroys before the create failed: 3g.40gb + 2 x 1g.10gb, the 2g.20gb slot free
    assert [_profiles(g) for g in _read(path)] == [B, ["1g.10gb"] * 2 + ["3g.40gb"], B, A]
    assert [(a["gpu"], a["action"]) for a in d["not_attempted"]] == [(3, "destroy"), (3, "create")]
    _assert_survived(path, survivors)
    r = _run(path, LAYOUT_B)
    assert sorted(set(a["gpu"] for a in r["actions"] if a["action"] != "keep")) == [1, 3]
    assert [_profiles(g) for g in _read(path)] == [B, B, B, B]
    _assert_survived(path, survivors)


def test_host_wide_error_stops_the_run_later_gpus_not_attempted(tmp_path):
    """NO_PERMISSION says the host cannot be changed by this caller: trying GPUs 2 and 3 would only fail again."""
    path = _host(tmp_path)
    survivors = _survivors(path)
    _faults(path, {"call": "nvmlComputeInstanceDestroy", "error": "NVML_ERROR_NO_PERMISSION", "count": 1, "gpu": 1})
    with pytest.raises(GpuOpsError) as e:
        _run(path, LAYOUT_B)
    d = e.value.details
    assert d["failed_gpus"] == [1] and d["not_attempted_gpus"] == [2, 3]
    assert [r["status"] for r in d["gpu_results"]] == ["done", "failed", "not_attempted", "not_attempted"]
    assert "GPU(s) 2, 3 not attempted" in e.value.msg
    # GPU 1's 2nd destroy and create, then GPU 2's and GPU 3's 2 destroys and create each
    assert [(a["gpu"], a["action"]) for a in d["not_attempted"]] == [
        (1, "destroy"), (1, "create")] + [(g, a) for g in (2, 3) for a in ("destroy", "destroy", "create")]
    assert [_profiles(g) for g in _read(path)] == [B, A, A, A]
    _assert_survived(path, survivors)
    _run(path, LAYOUT_B)
    assert [_profiles(g) for g in _read(path)] == [B, B, B, B]
    _assert_survived(path, survivors)


def test_check_mode_is_unchanged_by_a_pending_fault(tmp_path):
    """Check mode calls no setter: the faults stay armed, nothing fails, the plan is the whole change."""
    path = _host(tmp_path)
    _faults(path, {"call": "nvmlComputeInstanceDestroy", "error": "NVML_ERROR_UNKNOWN", "count": 1, "gpu": 1})
    r = _run(path, LAYOUT_B, check_mode=True)
    assert r["changed"] is True and [_profiles(g) for g in r["gpus"]] == [B, B, B, B]
    assert [_profiles(g) for g in _read(path)] == [A, A, A, A]
    assert nvml_sim.load_state(path)["faults"][0]["count"] == 1
