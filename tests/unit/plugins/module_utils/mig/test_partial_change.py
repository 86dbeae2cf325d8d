# -*- coding: utf-8 -*-
"""Issue 16 item 2: a run that changed something before it failed reports changed=true and the change;
a GPU instance left without a compute instance is reported and drawn as such."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.report import diagram as slice_diagram
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.report import slices


def _host(tmp_path):
    path = str(tmp_path / "host.json")
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": 1}], seed=5)
    state["gpus"][0]["mig_mode_current"] = state["gpus"][0]["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)
    return path


def _run(path, mig_devices):
    with nvml.open_nvml(path) as backend:
        return mig_engine.run_mig_partition(backend, {"layout": [
            {"devices": "all", "mig-enabled": True, "mig-devices": mig_devices}]})


def _fault(path, call):
    state = nvml_sim.load_state(path)
    state["faults"] = [{"call": call, "error": "NVML_ERROR_UNKNOWN", "count": 1}]
    nvml_sim.save_state(path, state)


def test_ci_destroyed_then_gi_destroy_fails_is_a_change(tmp_path):
    path = _host(tmp_path)
    _run(path, {"1g.10gb": 7})
    _fault(path, "nvmlGpuInstanceDestroy")
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"7g.80gb": 1})
    d = e.value.details
    assert d["changed"] is True
    assert [(a["action"], a["gpu"]) for a in d["completed"]] == [("destroy_compute_instance", 0)]
    done = d["completed"][0]
    failed = d["failed_action"]
    assert done["gpu_instance_id"] == failed["gpu_instance_id"] and done["compute_instance_id"] == 0
    assert done["profile"] == "1g.10gb" and done["nvml_call"] == "nvmlComputeInstanceDestroy"
    assert "1 action(s) completed" in e.value.msg
    # facts: the GI is there without its CI
    rows = [r for r in d["gpus"][0]["instances"] if r["gpu_instance_id"] == failed["gpu_instance_id"]]
    assert len(rows) == 1 and rows[0]["has_compute_instance"] is False and rows[0]["compute_instance_id"] is None
    assert d["resources"] == {"nvidia.com/mig-1g.10gb": 6}
    # text diagram: the slice is not drawn as a normal 1g.10gb slice
    line = d["diagram"][0]
    cells = line.split("[", 1)[1].split("]", 1)[0].split("|")
    start = failed["placement"]["start"]
    assert cells[start].strip() != "1g.10gb" and "!" in cells[start]
    assert "1 GPU instance without compute instance" in line
    # SVG rows: a broken block
    row = slices.gpu_row(d["gpus"][0])
    broken = [b for b in row["blocks"] if b.get("kind") == "broken"]
    assert [(b["start"], b["size"]) for b in broken] == [(start, 1)] and "no CI" in broken[0]["label"]
    # the re-run converges
    r = _run(path, {"7g.80gb": 1})
    assert r["changed"] and r["resources"] == {"nvidia.com/mig-7g.80gb": 1}


def test_create_whose_rollback_failed_is_a_change(tmp_path):
    """GI created, CI create fails, rolling the GI back fails too: the GI is a change of this run."""
    path = _host(tmp_path)
    state = nvml_sim.load_state(path)
    state["faults"] = [{"call": "nvmlGpuInstanceCreateComputeInstance", "error": "NVML_ERROR_UNKNOWN", "count": 1},
                       {"call": "nvmlGpuInstanceDestroy", "error": "NVML_ERROR_UNKNOWN", "count": 1}]
    nvml_sim.save_state(path, state)
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"7g.80gb": 1})
    d = e.value.details
    assert d["changed"] is True
    assert [a["action"] for a in d["completed"]] == ["create_gpu_instance"]
    assert d["failed_action"]["error_details"]["rolled_back"] is False
    assert [r["has_compute_instance"] for r in d["gpus"][0]["instances"]] == [False]
    r = _run(path, {"7g.80gb": 1})
    assert r["changed"] and r["resources"] == {"nvidia.com/mig-7g.80gb": 1}


def test_create_rolled_back_cleanly_still_reports_the_calls(tmp_path):
    """GI created and destroyed again: NVML changed state twice; nothing is left, changed is true."""
    path = _host(tmp_path)
    _fault(path, "nvmlGpuInstanceCreateComputeInstance")
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"7g.80gb": 1})
    d = e.value.details
    assert d["changed"] is True
    assert [a["action"] for a in d["completed"]] == ["create_gpu_instance", "destroy_gpu_instance"]
    assert d["failed_action"]["error_details"]["rolled_back"] is True and d["gpus"][0]["instances"] == []


def test_diagram_marks_gpu_instance_without_compute_instance():
    gpu = {"index": 0, "model": "h100_80gb", "mig_capable": True, "mig_mode_current": True, "mig_mode_pending": True,
           "instances": [{"profile": "1g.10gb", "gpu_instance_profile": "1g.10gb", "placement": {"start": 0, "size": 1},
                          "gpu_instance_id": 7, "compute_instance_id": None, "compute_slices": None,
                          "has_compute_instance": False, "busy": False}]}
    line = slice_diagram.render_gpu(gpu)
    assert line.split("[", 1)[1].startswith("!1g.10gb")
    assert "1 GPU instance without compute instance" in line
