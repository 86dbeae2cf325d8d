# -*- coding: utf-8 -*-
"""Issue 16 item 4: a simulator state file of the wrong shape fails naming the file, the path and the field."""
import copy
import json

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def _good():
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": 2}], seed=2)
    state["gpus"][0]["mig_mode_current"] = state["gpus"][0]["mig_mode_pending"] = 1
    state["gpus"][0]["gpu_instances"] = [{"id": 1, "profile_id": 9, "start": 0, "size": 4, "compute_instances": [
        {"id": 0, "profile_id": 2, "slices": 3, "start": 0, "uuid": "MIG-x"}]}]
    state["gpus"][0]["processes"] = [{"pid": 42, "name": "vllm", "gpu_instance_id": 1, "compute_instance_id": 0,
                                      "used_memory_mib": 100}]
    state["faults"] = [{"call": "nvmlDeviceSetMigMode", "error": "NVML_ERROR_UNKNOWN", "count": 1, "gpu": 1}]
    return state


def _set(state, dotted, value):
    node = state
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if value is KeyError:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


CASES = [
    ("gpus", [{}], "gpus[0].index"),
    ("gpus.0.name", KeyError, "gpus[0].name"),
    ("gpus.0.mig_mode_current", None, "gpus[0].mig_mode_current"),
    ("gpus.1.mig_mode_pending", 2, "gpus[1].mig_mode_pending"),
    ("gpus.0.model", "no_such_gpu", "gpus[0].model"),
    ("gpus.0.index", 1, "gpus[0].index"),
    ("gpus.0.uuid", 7, "gpus[0].uuid"),
    ("gpus.0.gpu_instances", {}, "gpus[0].gpu_instances"),
    ("gpus.0.gpu_instances.0.start", KeyError, "gpus[0].gpu_instances[0].start"),
    ("gpus.0.gpu_instances.0.id", "1", "gpus[0].gpu_instances[0].id"),
    ("gpus.0.gpu_instances.0.compute_instances.0.slices", None, "gpus[0].gpu_instances[0].compute_instances[0].slices"),
    ("gpus.0.gpu_instances.0.compute_instances", [7], "gpus[0].gpu_instances[0].compute_instances[0]"),
    ("gpus.0.processes.0.pid", "x", "gpus[0].processes[0].pid"),
    ("gpus.0.processes", "x", "gpus[0].processes"),
    ("gpus.0.health", [], "gpus[0].health"),
    ("gpus.0.settings", "x", "gpus[0].settings"),
    ("faults", "x", "faults"),
    ("faults.0", "x", "faults[0]"),
    ("faults.0.call", KeyError, "faults[0].call"),
    ("faults.0.count", "two", "faults[0].count"),
    ("faults.0.gpu", 9, "faults[0].gpu"),
    ("boot_id", "one", "boot_id"),
    ("driver_version", 550, "driver_version"),
]


@pytest.mark.parametrize("dotted, value, field", CASES)
def test_wrong_shape_names_path_and_field(tmp_path, dotted, value, field):
    path = str(tmp_path / "host.json")
    state = _good()
    _set(state, dotted, value)
    with open(path, "w") as f:
        json.dump(state, f)
    with pytest.raises(GpuOpsError) as e:
        with nvml.open_nvml(path) as backend:
            gpu_state.read_host(backend)
    msg = e.value.msg
    assert path in msg and field in msg, msg
    assert "Traceback" not in msg and e.value.details.get("field") == field


def test_good_state_loads_and_new_states_validate(tmp_path):
    path = str(tmp_path / "host.json")
    nvml_sim.save_state(path, _good())
    with nvml.open_nvml(path) as backend:
        assert len(gpu_state.read_host(backend)["gpus"]) == 2
    for model in ("a100_80gb", "l40s_48gb", "rtx4090_24gb", "b200_180gb"):
        nvml_sim.validate_state(nvml_sim.new_state([{"model": model, "count": 3}]), "new")


def test_nvml_simulator_module_reports_a_bad_state_file(tmp_path):
    path = str(tmp_path / "host.json")
    state = _good()
    state["gpus"][1] = {}
    with open(path, "w") as f:
        json.dump(state, f)
    with pytest.raises(GpuOpsError) as e:
        nvml_sim.configure({"path": path, "faults": []})
    assert "gpus[1]" in e.value.msg
    # reset: true still recreates it
    r = nvml_sim.configure({"path": path, "reset": True, "gpus": [{"model": "h100_80gb", "count": 1}]})
    assert r["changed"] and copy.deepcopy(nvml_sim.load_state(path))["gpus"][0]["model"] == "h100_80gb"
