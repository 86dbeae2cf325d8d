# -*- coding: utf-8 -*-
"""mig_engine.run_mig_partition against the NVML simulator (no Ansible)."""
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
DEFAULT_CONFIG = os.path.join(TOP, "tests", "integration", "targets", "mig_partition", "files",
                              "default-mig-parted-config.yaml")

MUTATING_CALLS = ("nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlDeviceCreateGpuInstanceWithPlacement",
                  "nvmlGpuInstanceCreateComputeInstance", "nvmlGpuInstanceCreateComputeInstanceWithPlacement",
                  "nvmlGpuInstanceDestroy", "nvmlComputeInstanceDestroy", "reset_gpu")


class Recorder(object):
    """Wraps a backend and records the mutating NVML calls made through it."""

    def __init__(self, backend):
        self._backend = backend
        self.calls = []

    def __getattr__(self, name):
        attr = getattr(self._backend, name)
        if name in MUTATING_CALLS:
            def call(*args, **kw):
                self.calls.append(name)
                return attr(*args, **kw)
            return call
        return attr


def make_host(tmp_path, gpus, mig=None):
    """A simulated host; ``mig`` = indexes whose MIG mode is already active."""
    path = str(tmp_path / "host.json")
    state = nvml_sim.new_state(gpus, seed=7)
    for i in mig or ():
        state["gpus"][i]["mig_mode_current"] = 1
        state["gpus"][i]["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)
    return path


def run(path, params, check_mode=False, diff=False):
    with nvml.open_nvml(path) as backend:
        rec = Recorder(backend)
        result = mig_engine.run_mig_partition(rec, params, check_mode=check_mode, diff=diff)
    result["_calls"] = rec.calls
    return result


def layout(devices="all", **mig_devices):
    return {"layout": [{"devices": devices, "mig-enabled": True, "mig-devices": dict(
        (k.replace("_", "."), v) for k, v in mig_devices.items())}]}


def state_text(path):
    with open(path) as f:
        return f.read()


def add_process(path, gpu, gpu_instance_id, pid=4242):
    state = nvml_sim.load_state(path)
    state["gpus"][gpu]["processes"].append({"pid": pid, "name": "python", "gpu_instance_id": gpu_instance_id,
                                            "compute_instance_id": 0})
    nvml_sim.save_state(path, state)


def add_fault(path, call, count=1, error="NVML_ERROR_UNKNOWN", gpu=None):
    state = nvml_sim.load_state(path)
    fault = {"call": call, "error": error, "count": count}
    if gpu is not None:
        fault["gpu"] = gpu
    state["faults"].append(fault)
    nvml_sim.save_state(path, state)


def profiles_of(result, index):
    return sorted(r["profile"] for r in result["gpus"][index]["instances"])


# ---------------------------------------------------------------- change, idempotence, check, diff


def test_hopper_applies_at_once_and_rerun_is_unchanged(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 2}])
    r = run(path, layout(**{"1g_10gb": 7}))
    assert r["changed"] and not r["reset_required"]
    assert r["resources"] == {"nvidia.com/mig-1g.10gb": 14}
    assert profiles_of(r, 0) == ["1g.10gb"] * 7
    assert "1g.10gb |1g.10gb" in r["diagram"][0]
    assert all(isinstance(a["gpu_instance_id"], int) for a in r["actions"] if a["action"] == "create")
    again = run(path, layout(**{"1g_10gb": 7}))
    assert not again["changed"] and again["_calls"] == []
    assert [a["action"] for a in again["actions"]] == ["keep"] * 14


def test_check_mode_calls_no_setter_and_predicts(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 1}])
    before = state_text(path)
    r = run(path, layout(**{"3g_40gb": 1, "1g_10gb": 4}), check_mode=True, diff=True)
    assert r["changed"] and r["_calls"] == []
    assert state_text(path) == before
    assert [a["action"] for a in r["actions"]] == ["set_mig_mode"] + ["create"] * 5
    assert r["resources"] == {"nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-3g.40gb": 1}
    uuid = r["gpus"][0]["uuid"]
    assert r["diff"]["before"][uuid]["instances"] == []
    assert r["diff"]["after"][uuid]["instances"] == [
        "1g.10gb @0:1", "1g.10gb @1:1", "1g.10gb @2:1", "1g.10gb @3:1", "3g.40gb @4:4"]
    # the real run does what check mode said
    real = run(path, layout(**{"3g_40gb": 1, "1g_10gb": 4}), diff=True)
    assert real["diff"]["after"] == r["diff"]["after"]
    assert [(a["action"], a.get("placement")) for a in real["actions"]] == \
        [(a["action"], a.get("placement")) for a in r["actions"]]


def test_ampere_reports_reset_required_then_applies_after_reset(tmp_path):
    path = make_host(tmp_path, [{"model": "a100_80gb", "count": 8}])
    r = run(path, {"config_file": DEFAULT_CONFIG, "config": "all-1g.10gb"})
    assert r["changed"] and r["reset_required"] and r["reset_required_gpus"] == list(range(8))
    assert r["_calls"] == ["nvmlDeviceSetMigMode"] * 8
    assert all(a["after_reset"] for a in r["actions"] if a["action"] == "create")
    assert r["resources"] == {"nvidia.com/gpu": 8}
    again = run(path, {"config_file": DEFAULT_CONFIG, "config": "all-1g.10gb"})
    assert not again["changed"] and again["reset_required"] and again["_calls"] == []
    with nvml.open_nvml(path) as backend:
        for i in range(8):
            backend.reset_gpu(i)
    done = run(path, {"config_file": DEFAULT_CONFIG, "config": "all-1g.10gb"})
    assert done["changed"] and not done["reset_required"]
    assert done["resources"] == {"nvidia.com/mig-1g.10gb": 56}
    assert not run(path, {"config_file": DEFAULT_CONFIG, "config": "all-1g.10gb"})["changed"]


def test_incremental_change_keeps_matching_instances(tmp_path):
    path = make_host(tmp_path, [{"model": "h200_141gb", "count": 1}], mig=[0])
    first = run(path, layout(**{"3g_71gb": 1, "1g_18gb": 2}))
    ids = dict((r["placement"]["start"], r["gpu_instance_id"]) for r in first["gpus"][0]["instances"])
    r = run(path, layout(**{"3g_71gb": 1, "1g_18gb": 3}))
    assert [a["action"] for a in r["actions"]].count("destroy") == 0
    assert r["_calls"] == ["nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceCreateComputeInstance"]
    after = dict((x["placement"]["start"], x["gpu_instance_id"]) for x in r["gpus"][0]["instances"])
    for start, gid in ids.items():
        assert after[start] == gid


def test_compute_instance_profiles(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 1}], mig=[0])
    r = run(path, layout(**{"1c_3g_40gb": 3, "4g_40gb": 1}))
    assert profiles_of(r, 0) == ["1c.3g.40gb"] * 3 + ["4g.40gb"]
    # the device plugin advertises only profiles whose compute instance spans the GPU instance
    assert r["resources"] == {"nvidia.com/mig-4g.40gb": 1}
    assert "3x1c" in r["diagram"][0]
    assert not run(path, layout(**{"1c_3g_40gb": 3, "4g_40gb": 1}))["changed"]


def test_disable_destroys_and_turns_mig_off(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 1}, {"model": "l40s_48gb", "count": 1}], mig=[0])
    run(path, layout(**{"7g_80gb": 1}))
    r = run(path, {"layout": [{"devices": "all", "mig-enabled": False}]})
    assert r["changed"] and [a["action"] for a in r["actions"]] == ["destroy", "set_mig_mode"]
    assert r["resources"] == {"nvidia.com/gpu": 2}
    assert not r["gpus"][0]["mig_mode_current"]
    assert not run(path, {"layout": [{"devices": "all", "mig-enabled": False}]})["changed"]


def test_unmatched_gpu_left_exactly_as_is(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 2}], mig=[0, 1])
    run(path, layout(**{"7g_80gb": 1}))
    r = run(path, {"layout": [{"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}, diff=True)
    assert profiles_of(r, 1) == ["7g.80gb"]
    assert list(r["diff"]["before"]) == [r["gpus"][0]["uuid"]]
    assert all(a["gpu"] == 0 for a in r["actions"])


# ---------------------------------------------------------------- bad input: nothing changes


@pytest.mark.parametrize("params,words", [
    (layout(**{"1g_5gb": 7}), ["1g.5gb", "valid profiles: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb"]),
    (layout(**{"1g_10gb": 8}), ["at most 7"]),
    (layout(**{"4g_40gb": 1, "3g_40gb": 1, "1g_10gb": 1}), ["compute slices"]),
    ({"config_file": DEFAULT_CONFIG, "config": "all-2g.40gb"}, ["valid configs:", "all-balanced"]),
    ({"layout": [{"devices": 0, "mig-enabled": True, "mig-devices": {}}]}, ["devices"]),
])
def test_bad_input_changes_nothing(tmp_path, params, words):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 2}], mig=[0])
    before = state_text(path)
    with pytest.raises(GpuOpsError) as e:
        run(path, params)
    for w in words:
        assert w in e.value.msg
    assert state_text(path) == before


def test_all_gpus_validated_before_any_change(tmp_path):
    # GPU 0 is fine, GPU 1 (A100 40GB) has no 1g.10gb x7: nothing may change on GPU 0 either
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 1}, {"model": "a100_40gb", "count": 1}], mig=[0, 1])
    before = state_text(path)
    with pytest.raises(GpuOpsError) as e:
        run(path, layout(**{"1g_10gb": 7}))
    assert "GPU 1 (a100_40gb)" in e.value.msg and "at most 4" in e.value.msg
    assert e.value.details["errors"][0]["gpu"] == 1
    assert state_text(path) == before


# ---------------------------------------------------------------- busy instances


def test_busy_instance_kept_and_refused_without_force(tmp_path):
    path = make_host(tmp_path, [{"model": "a100_80gb", "count": 1}], mig=[0])
    r = run(path, layout(**{"3g_40gb": 1, "2g_20gb": 1, "1g_10gb": 2}))
    gi3 = [x for x in r["gpus"][0]["instances"] if x["profile"] == "3g.40gb"][0]["gpu_instance_id"]
    gi2 = [x for x in r["gpus"][0]["instances"] if x["profile"] == "2g.20gb"][0]["gpu_instance_id"]
    add_process(path, 0, gi3)
    # a change that keeps the 3g: allowed, the busy one is kept
    r = run(path, layout(**{"3g_40gb": 1, "1g_10gb": 4}))
    keep = [a for a in r["actions"] if a["action"] == "keep" and a["profile"] == "3g.40gb"]
    assert keep and keep[0]["busy"] and keep[0]["gpu_instance_id"] == gi3
    assert all(a["gpu_instance_id"] != gi3 for a in r["actions"] if a["action"] == "destroy")
    assert gi2 in [a["gpu_instance_id"] for a in r["actions"] if a["action"] == "destroy"]
    # a change that drops it: refused, nothing changed
    before = state_text(path)
    with pytest.raises(GpuOpsError) as e:
        run(path, layout(**{"7g_80gb": 1}))
    assert "busy" in e.value.msg and "force" in e.value.msg
    assert e.value.details["busy_instances"][0]["gpu_instance_id"] == gi3
    assert state_text(path) == before
    # with force the plan says so; the simulator still refuses to kill a GI with processes (IN_USE)
    with pytest.raises(GpuOpsError) as e:
        run(path, dict(layout(**{"7g_80gb": 1}), force=True))
    assert e.value.details["failed_action"]["forced"] is True
    assert e.value.details["failed_action"]["nvml_return"] == 19


def test_forced_destroy_when_process_gone(tmp_path):
    path = make_host(tmp_path, [{"model": "a100_80gb", "count": 1}], mig=[0])
    run(path, layout(**{"3g_40gb": 2}))
    r = run(path, dict(layout(**{"7g_80gb": 1}), force=True), check_mode=True)
    assert [a.get("forced") for a in r["actions"] if a["action"] == "destroy"] == [False, False]


# ---------------------------------------------------------------- faults halfway


@pytest.mark.parametrize("call", ["nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceCreateComputeInstance",
                                  "nvmlGpuInstanceDestroy", "nvmlComputeInstanceDestroy"])
def test_fault_halfway_reports_and_rerun_converges(tmp_path, call):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 2}], mig=[0, 1])
    run(path, layout(**{"1g_10gb": 7}))
    # let a few calls pass, then fail once
    state = nvml_sim.load_state(path)
    state["faults"] = [{"call": call, "error": "NVML_ERROR_UNKNOWN", "count": 1, "gpu": 1}]
    nvml_sim.save_state(path, state)
    target = layout(**{"3g_40gb": 1, "2g_20gb": 1, "1g_10gb": 2})
    with pytest.raises(GpuOpsError) as e:
        run(path, target)
    d = e.value.details
    assert "run again" in e.value.msg and d["failed_action"]["gpu"] == 1 and d["failed_action"]["error"]
    assert d["changed"] is True and d["completed"]  # GPU 0 was done before
    if call == "nvmlGpuInstanceCreateComputeInstance":
        assert d["failed_action"]["error_details"]["rolled_back"] is True
    # completed creates carry the id NVML gave the new instance
    made = [a for a in d["completed"] if a["action"] == "create"]
    assert made and all(isinstance(a["gpu_instance_id"], int) for a in made)
    # the report is accurate: it matches a fresh read of the GPUs
    with nvml.open_nvml(path) as backend:
        from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
        now = gpu_state.read_host(backend)["gpus"]
    assert [mig_instances.instances_from_gpu(g) for g in now] == [mig_instances.instances_from_gpu(g) for g in d["gpus"]]
    # the re-run converges and then is idempotent
    r = run(path, target)
    assert r["changed"]
    assert profiles_of(r, 0) == profiles_of(r, 1) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert not run(path, target)["changed"]


def test_fault_in_set_mig_mode(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 2}])
    add_fault(path, "nvmlDeviceSetMigMode", gpu=1)
    with pytest.raises(GpuOpsError) as e:
        run(path, layout(**{"7g_80gb": 1}))
    d = e.value.details
    assert d["failed_action"]["action"] == "set_mig_mode" and d["failed_action"]["enabled"] and d["gpus"][0]["mig_mode_current"] is True
    assert not d["gpus"][1]["mig_mode_current"]
    assert [a["action"] for a in d["completed"]] == ["set_mig_mode", "create"]
    r = run(path, layout(**{"7g_80gb": 1}))
    assert [a["action"] for a in r["actions"] if a["action"] != "keep"] == ["set_mig_mode", "create"]


# ---------------------------------------------------------------- property: any layout to any layout, through NVML


MODELS = ["a100_80gb", "a100_40gb", "h100_80gb", "h200_141gb", "a30_24gb", "h100_nvl_94gb"]


@st.composite
def mig_devices(draw, model):
    pmap = mig_plan.profile_map(model.profiles)
    counts = {}
    for dummy in range(draw(st.integers(0, 6))):
        p = draw(st.sampled_from(model.profiles))
        trial = dict(counts)
        trial[p.name] = trial.get(p.name, 0) + 1
        targets = mig_plan.targets_from_mig_devices(trial, model.profiles)
        try:
            mig_plan.validate_targets(targets, model.profiles, model.memory_slices, model.compute_slices)
        except GpuOpsError:
            continue
        counts = trial
    assert pmap
    return counts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), model_key=st.sampled_from(MODELS))
def test_any_layout_to_any_layout_on_the_simulator(tmp_path_factory, data, model_key):
    model = gpu_catalog.CATALOG[model_key]
    path = make_host(tmp_path_factory.mktemp("h"), [{"model": model_key, "count": 1}], mig=[0])
    a = data.draw(mig_devices(model))
    b = data.draw(mig_devices(model))
    run(path, {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": a}]})
    first = run(path, {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": a}]})
    assert not first["changed"]
    before = dict((i.gpu_instance_id, i) for i in mig_instances.instances_from_gpu(first["gpus"][0]))
    r = run(path, {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": b}]})
    want = sorted(t.profile for t in mig_plan.targets_from_mig_devices(b, model.profiles))
    assert sorted(i.profile for i in mig_instances.instances_from_gpu(r["gpus"][0])) == want
    # every kept instance still exists with the same id and placement
    now = dict((i.gpu_instance_id, i) for i in mig_instances.instances_from_gpu(r["gpus"][0]))
    for act in r["actions"]:
        if act["action"] == "keep":
            assert now[act["gpu_instance_id"]] == before[act["gpu_instance_id"]]
    assert not run(path, {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": b}]})["changed"]


def test_result_is_json_serialisable(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 1}])
    result = run(path, layout(**{"1g_10gb": 7}), diff=True)
    del result["_calls"]  # the test's own recorder, not part of the module result
    assert result["changed"] is True
    again = json.loads(json.dumps(result))
    assert again == result  # nothing lost or turned into a string on the way
    assert sum(1 for a in again["actions"] if a["action"] == "create") == 7


def test_gpu_instance_without_compute_instance_is_replaced(tmp_path):
    """A GI left without CI (e.g. by a crash between the two NVML calls) is no MIG device: the next run
    replaces it, and the resources do not count it."""
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 1}], mig=[0])
    with nvml.open_nvml(path) as backend:
        handle = backend.nvmlDeviceGetHandleByIndex(0)
        info = backend.nvmlDeviceGetGpuInstanceProfileInfo(handle, gpu_catalog.GI_PROFILE_3_SLICE)
        backend.nvmlDeviceCreateGpuInstanceWithPlacement(handle, info.id, {"start": 4, "size": 4})
    r = run(path, layout(**{"3g_40gb": 1}), check_mode=True)
    assert [a["action"] for a in r["actions"]] == ["destroy", "create"]
    assert r["actions"][0]["mig_devices"] == []
    r = run(path, layout(**{"3g_40gb": 1}))
    assert r["resources"] == {"nvidia.com/mig-3g.40gb": 1}
    assert not run(path, layout(**{"3g_40gb": 1}))["changed"]


def test_lost_gpu_is_skipped_and_others_partitioned(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 2}], mig=[0, 1])
    state = nvml_sim.load_state(path)
    state["gpus"][1]["health"]["lost"] = True
    nvml_sim.save_state(path, state)
    r = run(path, layout(**{"7g_80gb": 1}))
    assert r["skipped_gpus"] == [{"index": 1, "uuid": None, "name": None, "reason": "GPU is lost (fell off the bus)"}]
    assert r["resources"] == {"nvidia.com/mig-7g.80gb": 1}
    assert r["diagram"][1].endswith("[ GPU lost ]")
    with pytest.raises(GpuOpsError) as e:
        run(path, {"layout": [{"devices": [1], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]})
    assert "lost" in e.value.msg


def test_mode_change_on_a_gpu_with_processes_refused_up_front(tmp_path):
    path = make_host(tmp_path, [{"model": "h100_80gb", "count": 2}])
    state = nvml_sim.load_state(path)
    state["gpus"][1]["processes"].append({"pid": 777, "name": "python"})
    nvml_sim.save_state(path, state)
    before = state_text(path)
    with pytest.raises(GpuOpsError) as e:
        run(path, layout(**{"7g_80gb": 1}))
    assert "GPU 1" in e.value.msg and "777" in e.value.msg and e.value.details["pids"] == [777]
    assert state_text(path) == before  # GPU 0 was not changed either
