# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpuops.k8s.mig_mode module's logic: enable/disable MIG mode, optionally reset GPUs.

Validates every targeted GPU first (devices exist, MIG capable, no process blocks the change, no
MIG instance blocks a disable), then changes them one by one. It never reboots. On Ampere a change
stays pending until a GPU reset: with ``reset: true`` the affected GPUs are reset when no process
uses them, otherwise ``reset_required`` is reported.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import mig_changes
from ansible_collections.gpuops.k8s.plugins.module_utils.common import diff as diff_helper
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import NvmlError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import retry as nvml_retry


def _valid_devices(gpus):
    return ", ".join("%d (%s, %s)" % (g["index"], g["uuid"], g["name"]) for g in gpus) or "none (no GPUs)"


def resolve_devices(gpus: List[Dict[str, Any]], devices: Any) -> Tuple[Any, ...]:
    """(targets, skipped) for ``devices``: 'all' or a list of indexes / uuids.

    Unknown devices and explicitly listed GPUs without MIG raise GpuOpsError naming the valid ones;
    under 'all' GPUs without MIG are skipped (and reported).
    """
    explicit = True
    if devices is None or devices == "all" or devices == ["all"]:
        explicit = False
        refs = [g["index"] for g in gpus]
    elif isinstance(devices, (list, tuple)):
        refs = list(devices)
    elif isinstance(devices, int) and not isinstance(devices, bool):
        refs = [devices]
    else:
        refs = [d.strip() for d in str(devices).split(",") if d.strip()]
    by_index = dict((g["index"], g) for g in gpus)
    by_uuid = dict((g["uuid"].lower(), g) for g in gpus if g.get("uuid"))
    targets, skipped, seen = [], [], set()
    for ref in refs:
        gpu = None
        if isinstance(ref, int) and not isinstance(ref, bool):
            gpu = by_index.get(ref)
        else:
            text = str(ref).strip()
            if text.isdigit():
                gpu = by_index.get(int(text))
            else:
                gpu = by_uuid.get(text.lower())
        if gpu is None:
            raise GpuOpsError("devices: %r is not a GPU on this host; valid devices (index, uuid): %s"
                              % (ref, _valid_devices(gpus)),
                              valid_devices=[{"index": g["index"], "uuid": g["uuid"]} for g in gpus])
        if gpu["index"] in seen:
            continue
        seen.add(gpu["index"])
        if gpu.get("lost"):
            if explicit:
                raise GpuOpsError("devices: GPU %d is lost (fell off the bus); reset it or reboot the host"
                                  % gpu["index"], gpu=gpu["index"])
            skipped.append({"index": gpu["index"], "uuid": gpu["uuid"], "reason": "GPU is lost"})
            continue
        if not gpu["mig_capable"]:
            if explicit:
                mig = [g["index"] for g in gpus if g.get("mig_capable")]
                raise GpuOpsError("devices: GPU %d (%s) does not support MIG; MIG-capable GPUs on this host: %s"
                                  % (gpu["index"], gpu["name"], ", ".join(str(i) for i in mig) or "none"),
                                  gpu=gpu["index"], mig_capable_gpus=mig)
            skipped.append({"index": gpu["index"], "uuid": gpu["uuid"], "name": gpu["name"],
                            "reason": "MIG not supported"})
            continue
        targets.append(gpu)
    return targets, skipped


def _needs_reset_for_mode(gpu):
    model = gpu_catalog.lookup_model(gpu.get("model"))
    return model is not None and gpu_catalog.mig_mode_needs_reset(model)


def _mode(gpu):
    return {"current": bool(gpu["mig_mode_current"]), "pending": bool(gpu["mig_mode_pending"])}


def plan(gpus: List[Dict[str, Any]], targets: List[Dict[str, Any]], enabled: bool, reset: bool) -> Tuple[Any, ...]:
    """[{index, set_mode, reset}] and validation errors (list of messages), per target GPU."""
    steps, errors = [], []
    for gpu in targets:
        set_mode = gpu["mig_mode_pending"] != enabled or (
            gpu["mig_mode_current"] != enabled and not _needs_reset_for_mode(gpu))
        pids = [p["pid"] for p in gpu.get("processes", [])]
        if set_mode and pids:
            errors.append("GPU %d: MIG mode cannot change while processes run on it (PIDs %s)"
                          % (gpu["index"], ", ".join(str(p) for p in pids)))
        if set_mode and not enabled and gpu.get("instances"):
            gis = sorted(set("%s (id %s)" % (i["gpu_instance_profile"] if "gpu_instance_profile" in i else i["profile"],
                                             i["gpu_instance_id"]) for i in gpu["instances"]))
            errors.append("GPU %d: MIG mode cannot be disabled while GPU instances exist: %s; remove them first "
                          "(gpuops.k8s.mig_partition with mig-enabled: false, or the all-disabled config)"
                          % (gpu["index"], ", ".join(gis)))
        after_current = enabled if (not _needs_reset_for_mode(gpu)) else gpu["mig_mode_current"]
        do_reset = False
        if after_current != enabled and reset:
            do_reset = True
            if pids and not set_mode:
                errors.append("GPU %d: cannot reset to apply MIG mode: processes run on it (PIDs %s)"
                              % (gpu["index"], ", ".join(str(p) for p in pids)))
        steps.append({"index": gpu["index"], "uuid": gpu["uuid"], "set_mode": set_mode, "reset": do_reset})
    return steps, errors


def _report(gpu, enabled):
    mode = _mode(gpu)
    return {
        "index": gpu["index"], "uuid": gpu["uuid"], "name": gpu["name"], "model": gpu["model"],
        "current": mode["current"], "pending": mode["pending"],
        "reset_required": mode["current"] != enabled and mode["pending"] == enabled,
    }


def _set_mode(nvml: Any, index: int, enabled: bool, policy: Any, retries: List[Dict[str, Any]]) -> Any:
    """set_mig_mode with retries of transient NVML errors (nvml.retry): a mode already pending is not set again.
    A GPU reset is not retried: whether a failed reset happened cannot be read back."""
    def on_retry(err, attempt, delay):
        retries.append({"gpu": index, "action": "set_mig_mode", "error": err.name, "nvml_call": err.call,
                        "attempt": attempt, "backoff_s": delay})
    return nvml_retry.call(policy, lambda: mig_changes.set_mig_mode(nvml, index, enabled),
                           lambda: mig_changes.settle_mig_mode(nvml, index, enabled), on_retry)


def run_mig_mode(nvml: Any, params: Dict[str, Any], check_mode: bool = False) -> Dict[str, Any]:
    """Module result for gpuops.k8s.mig_mode."""
    enabled = params.get("state", "enabled") == "enabled"
    reset = bool(params.get("reset"))
    policy = nvml_retry.policy_from_params(params, nvml)
    retries = []
    host = gpu_state.read_host(nvml)
    gpus = host["gpus"]
    try:
        targets, skipped = resolve_devices(gpus, params.get("devices", "all"))
    except GpuOpsError as e:
        e.details.setdefault("gpus", gpus)
        raise
    steps, errors = plan(gpus, targets, enabled, reset)
    if errors:
        raise GpuOpsError("; ".join(errors), gpus=gpus, skipped_gpus=skipped)

    tracker = diff_helper.DiffTracker()
    for g in targets:
        tracker.add(g["uuid"], before=_mode(g))
    actions = []
    changed = False
    try:
        for step in steps:
            gpu = next(g for g in targets if g["index"] == step["index"])
            if step["set_mode"]:
                actions.append({"action": "set_mig_mode", "gpu": step["index"], "uuid": step["uuid"],
                                "enabled": enabled})
                if check_mode:
                    gpu["mig_mode_pending"] = enabled
                    if not _needs_reset_for_mode(gpu):
                        gpu["mig_mode_current"] = enabled
                else:
                    res = _set_mode(nvml, step["index"], enabled, policy, retries)
                    gpu["mig_mode_current"], gpu["mig_mode_pending"] = res["current"], res["pending"]
                changed = True
            if step["reset"]:
                actions.append({"action": "reset_gpu", "gpu": step["index"], "uuid": step["uuid"]})
                if check_mode:
                    gpu["mig_mode_current"] = gpu["mig_mode_pending"]
                else:
                    mig_changes.reset_gpu(nvml, step["index"])
                changed = True
    except NvmlError as e:
        done = actions[:-1]
        failed = actions[-1] if actions else None
        try:
            now = gpu_state.read_host(nvml)["gpus"]
        except NvmlError:
            now = None
        raise GpuOpsError(
            "%s (while %s GPU %s; %d earlier action(s) done: %s)" % (
                e.msg, failed["action"] if failed else "changing", failed["gpu"] if failed else "?", len(done),
                ", ".join("%s GPU %s" % (a["action"], a["gpu"]) for a in done) or "none"),
            changed=bool(done), actions=done, failed_action=failed, gpus=now, nvml_error=e.name,
            nvml_error_code=e.value, nvml_retries=retries, attempts=e.details.get("attempts"))

    if not check_mode and changed:
        gpus = gpu_state.read_host(nvml)["gpus"]
        by_index = dict((g["index"], g) for g in gpus)
        targets = [by_index[g["index"]] for g in targets]
    report = [_report(g, enabled) for g in targets]
    for g in targets:
        tracker.add(g["uuid"], after=_mode(g))
    return {
        "changed": changed,
        "mig_mode": report,
        "reset_required": any(r["reset_required"] for r in report),
        "skipped_gpus": skipped,
        "actions": actions,
        "nvml_retries": retries,
        "gpus": gpus,
        "diff": tracker.as_dict(),
    }


def mig_mode(params: Dict[str, Any], check_mode: bool = False,
             run_command: Optional[Callable[..., Any]] = None) -> Dict[str, Any]:
    """Open NVML (real or simulated, from ``params['simulator']``) and run run_mig_mode."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.writable import run_locked

    return run_locked(run_mig_mode, params, "gpuops.k8s.mig_mode", check_mode=check_mode, run_command=run_command)
