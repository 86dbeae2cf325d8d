# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvml_simulator module's logic: create and change a simulated GPU host (models, processes,
injected and random faults, health, reboot) with check mode and diff."""

from __future__ import annotations

import json
import os
from typing import Any, Dict

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.backend import HostLock
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import ERROR_CODES, error_code
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.state import (
    HEALTH_DEFAULTS,
    SIM_CALLS,
    load_state,
    lock_path,
    new_state,
    reboot_state,
    save_state,
)


def valid_fault_error(name: str) -> str:
    """Canonical NVML error name for a fault entry, or GpuOpsError naming the valid ones."""
    code = error_code(name)
    for k, v in ERROR_CODES.items():
        if v == code:
            return k
    return name


# --------------------------------------------------------------------------------------------------
# The nvml_simulator module's logic
# --------------------------------------------------------------------------------------------------

def _summary(state):
    """What the diff and the result show of a state (no random noise such as serials)."""
    if state is None:
        return {}
    gpus = []
    for g in state["gpus"]:
        gpus.append({
            "index": g["index"], "model": g["model"], "name": g["name"], "uuid": g["uuid"],
            "pci_bus_id": g["pci_bus_id"],
            "mig_mode_current": bool(g.get("mig_mode_current")), "mig_mode_pending": bool(g.get("mig_mode_pending")),
            "gpu_instances": [
                {"id": gi["id"], "profile_id": gi["profile_id"], "start": gi["start"], "size": gi["size"],
                 "compute_instances": len(gi["compute_instances"])} for gi in g.get("gpu_instances", [])],
            "processes": [dict(p) for p in g.get("processes", [])],
            "health": dict(g.get("health") or {}),
        })
    return {
        "driver_version": state.get("driver_version"),
        "boot_id": state.get("boot_id", 1),
        "faults": [dict(f) for f in state.get("faults") or []],
        "gpus": gpus,
    }


def _layout(state):
    """[(model key, count)] runs of the GPUs in a state."""
    runs = []
    for g in state["gpus"]:
        if runs and runs[-1][0] == g["model"]:
            runs[-1][1] += 1
        else:
            runs.append([g["model"], 1])
    return [tuple(r) for r in runs]


def _wanted_layout(gpus):
    runs = []
    for entry in gpus:
        model = gpu_catalog.find_model(entry.get("model"))
        count = int(entry.get("count", 1))
        if count <= 0:
            continue
        if runs and runs[-1][0] == model.key:
            runs[-1][1] += count
        else:
            runs.append([model.key, count])
    return [tuple(r) for r in runs]


def _check_index(what, value, count):
    try:
        idx = int(value)
    except (TypeError, ValueError):
        raise GpuOpsError("%s: gpu %r is not an index; valid indexes: 0-%d" % (what, value, count - 1))
    if idx < 0 or idx >= count:
        raise GpuOpsError("%s: gpu %s does not exist; valid indexes: %s"
                          % (what, value, "0-%d" % (count - 1) if count else "none (no GPUs)"))
    return idx


def _validate_faults(faults, count):
    out = []
    for f in faults:
        call = f.get("call")
        if call not in SIM_CALLS:
            raise GpuOpsError("faults: call %r is not a function the simulator implements; valid calls: %s"
                              % (call, ", ".join(SIM_CALLS)), valid_calls=list(SIM_CALLS))
        entry = {"call": call, "error": valid_fault_error(f.get("error") or "NVML_ERROR_UNKNOWN")}
        if f.get("count") is not None:
            n = int(f["count"])
            if n < 1:
                raise GpuOpsError("faults: count must be 1 or more (omit it for a permanent fault), got %s" % n)
            entry["count"] = n
        if f.get("gpu") is not None:
            entry["gpu"] = _check_index("faults", f["gpu"], count)
        out.append(entry)
    return out


def _validate_processes(state, processes):
    by_gpu = dict((g["index"], []) for g in state["gpus"])
    pids = set()
    for p in processes:
        idx = _check_index("processes", p.get("gpu"), len(state["gpus"]))
        gpu = state["gpus"][idx]
        try:
            pid = int(p.get("pid"))
        except (TypeError, ValueError):
            raise GpuOpsError("processes: pid %r is not a number" % (p.get("pid"),))
        if pid <= 0:
            raise GpuOpsError("processes: pid must be positive, got %s" % pid)
        gi_id = p.get("gpu_instance_id")
        ci_id = p.get("compute_instance_id")
        entry = {"pid": pid, "name": p.get("name") or "python"}
        existing = [gi["id"] for gi in gpu["gpu_instances"]]
        if gi_id is not None:
            gi_id = int(gi_id)
            if gi_id not in existing:
                raise GpuOpsError("processes: GPU %d has no GPU instance %s; existing GPU instance ids: %s"
                                  % (idx, gi_id, ", ".join(str(i) for i in existing) or "none"),
                                  valid_gpu_instance_ids=existing)
            entry["gpu_instance_id"] = gi_id
            if ci_id is not None:
                cis = [ci["id"] for gi in gpu["gpu_instances"] if gi["id"] == gi_id for ci in gi["compute_instances"]]
                if int(ci_id) not in cis:
                    raise GpuOpsError("processes: GPU %d instance %d has no compute instance %s; existing: %s"
                                      % (idx, gi_id, ci_id, ", ".join(str(c) for c in cis) or "none"))
                entry["compute_instance_id"] = int(ci_id)
        elif gpu.get("mig_mode_current") and existing:
            raise GpuOpsError("processes: GPU %d is in MIG mode; a process runs in a GPU instance: give "
                              "gpu_instance_id (existing: %s)" % (idx, ", ".join(str(i) for i in existing)),
                              valid_gpu_instance_ids=existing)
        if p.get("used_memory_mib") is not None:
            entry["used_memory_mib"] = int(p["used_memory_mib"])
        if (idx, pid) in pids:
            raise GpuOpsError("processes: pid %d is listed twice on GPU %d" % (pid, idx))
        pids.add((idx, pid))
        by_gpu[idx].append(entry)
    return by_gpu


def _validate_health(health, count):
    out = {}
    for h in health:
        idx = _check_index("health", h.get("gpu"), count)
        entry = out.setdefault(idx, {})
        for k, v in h.items():
            if k == "gpu" or v is None:
                continue
            if k not in HEALTH_DEFAULTS:
                raise GpuOpsError("health: unknown key %r; valid keys: gpu, %s" % (k, ", ".join(sorted(HEALTH_DEFAULTS))),
                                  valid_keys=sorted(HEALTH_DEFAULTS))
            default = HEALTH_DEFAULTS[k]
            try:
                if isinstance(default, bool):
                    v = _boolean(v)
                elif isinstance(default, int):
                    v = int(v)
                else:
                    v = float(v)
            except (TypeError, ValueError):
                raise GpuOpsError("health: %s must be a %s, got %r" % (k, type(default).__name__, v))
            entry[k] = v
    return out


def _boolean(v):
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(v)


def configure(params: Dict[str, Any], check_mode: bool = False) -> Dict[str, Any]:
    """Create, change, reboot or remove a simulated host (the nvml_simulator module).

    Everything is validated before the state file is written. Returns the module result.
    """
    path = params["path"]
    with HostLock(lock_path(path), what="gpuops.k8s.nvml_simulator"):
        return _configure(path, params, check_mode)


def _configure(path, params, check_mode):
    exists = os.path.exists(path)
    try:
        before = load_state(path) if exists else None
    except GpuOpsError:
        # an unreadable file can still be recreated or removed
        if not (params.get("reset") or params.get("state") == "absent"):
            raise
        before = None
    result = {"changed": False, "path": path}
    if params.get("state", "present") == "absent":
        result["changed"] = exists
        if exists and not check_mode:
            os.unlink(path)
        result["diff"] = {"before": _summary(before), "after": {}}
        return result

    gpus = params.get("gpus")
    if gpus is not None:
        wanted = _wanted_layout(gpus)  # validates models
    created = False
    if before is None or params.get("reset"):
        if gpus is None:
            raise GpuOpsError("gpus is required to create the simulated host %s (list of {model, count}; models: %s)"
                              % (path, ", ".join(gpu_catalog.model_keys())), valid_models=gpu_catalog.model_keys())
        state = new_state(gpus, params.get("driver_version"), params.get("seed"))
        created = True
    else:
        state = json.loads(json.dumps(before))
        if gpus is not None and wanted != _layout(state):
            raise GpuOpsError(
                "the simulated host %s has GPUs %s, not %s; set reset: true to recreate it (this drops its MIG "
                "layout, processes and faults)" % (path, ", ".join("%dx %s" % (n, m) for m, n in _layout(state)),
                                                   ", ".join("%dx %s" % (n, m) for m, n in wanted)),
                current_gpus=[{"model": m, "count": n} for m, n in _layout(state)])
        if params.get("driver_version"):
            state["driver_version"] = params["driver_version"]
            state.pop("cuda_driver_version", None)

    count = len(state["gpus"])
    if params.get("reboot") and not created:
        reboot_state(state)
    if params.get("processes") is not None:
        by_gpu = _validate_processes(state, params["processes"])
        for g in state["gpus"]:
            g["processes"] = by_gpu[g["index"]]
    if params.get("faults") is not None:
        state["faults"] = _validate_faults(params["faults"], count)
    if params.get("health") is not None:
        for idx, values in _validate_health(params["health"], count).items():
            health = state["gpus"][idx].setdefault("health", {})
            for k, v in values.items():
                if v == HEALTH_DEFAULTS[k]:
                    health.pop(k, None)
                else:
                    health[k] = v
    if params.get("cuda_driver_version"):
        state["cuda_driver_version"] = int(params["cuda_driver_version"])

    changed = created or before is None or state != before
    result["changed"] = changed
    result["created"] = created
    result["rebooted"] = bool(params.get("reboot") and not created)
    if changed and not check_mode:
        save_state(path, state)
    summary = _summary(state)
    result["diff"] = {"before": _summary(before), "after": summary}
    result["simulator"] = summary
    return result
