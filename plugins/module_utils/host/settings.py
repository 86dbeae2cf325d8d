# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU settings through NVML (module gpuops.k8s.gpu_settings): persistence mode, compute mode, power
limit, ECC mode and application clocks.

Read everything, validate every request against every selected GPU (power constraints, supported
clocks, features the GPU lacks), then change only what differs. Check mode calls no setter. ECC
changes stay pending until the next reboot/GPU reset and are reported as such.
Pure Python over the NVML backend (real or simulated), Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.common import diff as diff_helper
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import NOT_SUPPORTED, NvmlError

COMPUTE_MODES = {"default": 0, "exclusive_thread": 1, "prohibited": 2, "exclusive_process": 3}
COMPUTE_MODE_NAMES = dict((v, k) for k, v in COMPUTE_MODES.items())
SETTABLE_COMPUTE_MODES = ("default", "exclusive_process", "prohibited")
CLOCK_GRAPHICS = 0
CLOCK_MEM = 2


def _optional(call, *args):
    """Value of an NVML getter, or None where the GPU does not support it."""
    try:
        return call(*args)
    except NvmlError as e:
        if e.value == NOT_SUPPORTED:
            return None
        raise


def read_settings(nvml: Any, index: int) -> Dict[str, Any]:
    """The settings of GPU ``index`` (None for what it does not support)."""
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    out: Dict[str, Any] = {}
    pm = _optional(nvml.nvmlDeviceGetPersistenceMode, h)
    out["persistence_mode"] = None if pm is None else bool(pm)
    cm = _optional(nvml.nvmlDeviceGetComputeMode, h)
    out["compute_mode"] = None if cm is None else COMPUTE_MODE_NAMES.get(int(cm), str(cm))
    limit = _optional(nvml.nvmlDeviceGetPowerManagementLimit, h)
    constraints = _optional(nvml.nvmlDeviceGetPowerManagementLimitConstraints, h)
    default = _optional(nvml.nvmlDeviceGetPowerManagementDefaultLimit, h)
    out["power_limit_w"] = None if limit is None else limit / 1000.0
    out["power_limit_min_w"] = None if not constraints else constraints[0] / 1000.0
    out["power_limit_max_w"] = None if not constraints else constraints[1] / 1000.0
    out["power_limit_default_w"] = None if default is None else default / 1000.0
    ecc = _optional(nvml.nvmlDeviceGetEccMode, h)
    out["ecc_mode_current"] = None if ecc is None else bool(ecc[0])
    out["ecc_mode_pending"] = None if ecc is None else bool(ecc[1])
    mem = _optional(nvml.nvmlDeviceGetApplicationsClock, h, CLOCK_MEM)
    gfx = _optional(nvml.nvmlDeviceGetApplicationsClock, h, CLOCK_GRAPHICS)
    clocks = None
    if mem is not None and gfx is not None:
        clocks = {"memory_mhz": int(mem), "graphics_mhz": int(gfx)}
    out["application_clocks"] = clocks
    return out


def _supported_clocks(nvml, index):
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    out = {}
    for mem in nvml.nvmlDeviceGetSupportedMemoryClocks(h):
        out[int(mem)] = [int(g) for g in nvml.nvmlDeviceGetSupportedGraphicsClocks(h, mem)]
    return out


def _default_clocks(nvml, index):
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    return {"memory_mhz": int(nvml.nvmlDeviceGetDefaultApplicationsClock(h, CLOCK_MEM)),
            "graphics_mhz": int(nvml.nvmlDeviceGetDefaultApplicationsClock(h, CLOCK_GRAPHICS))}


def select_gpus(gpus: List[Dict[str, Any]], devices: Any) -> List[Dict[str, Any]]:
    """GPUs named by ``devices`` ('all', an index, a UUID or a list of them); unknown ones fail."""
    if devices is None or devices == "all" or devices == ["all"]:
        return list(gpus)
    refs = devices if isinstance(devices, (list, tuple)) else [devices]
    by_index = dict((g["index"], g) for g in gpus)
    by_uuid = dict((str(g.get("uuid", "")).lower(), g) for g in gpus)
    out = []
    for ref in refs:
        text = str(ref).strip()
        gpu = by_index.get(int(text)) if text.isdigit() else by_uuid.get(text.lower())
        if gpu is None:
            raise GpuOpsError("devices: %r is not a GPU on this host; valid devices (index, uuid): %s" % (
                ref, ", ".join("%d (%s)" % (g["index"], g["uuid"]) for g in gpus) or "none"),
                valid_devices=[{"index": g["index"], "uuid": g["uuid"]} for g in gpus])
        if gpu not in out:
            out.append(gpu)
    return out


def desired_compute_mode(params: Dict[str, Any]) -> Optional[str]:
    mode = params.get("compute_mode")
    if mode is None and params.get("mps") is not None:
        mode = "exclusive_process" if params["mps"] else "default"
    if mode is not None and mode not in SETTABLE_COMPUTE_MODES:
        raise GpuOpsError("compute_mode must be one of %s, got %r" % (", ".join(SETTABLE_COMPUTE_MODES), mode))
    return mode


def _power_target(value, current):
    if value is None:
        return None
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("default", "max", "min"):
            return word
        try:
            value = float(word)
        except ValueError:
            raise GpuOpsError("power_limit must be watts (a number), 'default', 'min' or 'max', got %r" % value)
    return float(value)


def plan_gpu(gpu: Dict[str, Any], current: Dict[str, Any], params: Dict[str, Any],
             nvml: Any = None) -> List[Tuple[str, Any, Any]]:
    """List of (setting, before, after) for one GPU; raises GpuOpsError on an impossible request."""
    steps: List[Tuple[str, Any, Any]] = []
    where = "GPU %d (%s)" % (gpu["index"], gpu.get("name"))

    def unsupported(what):
        raise GpuOpsError("%s does not support %s" % (where, what), gpu=gpu["index"])

    pm = params.get("persistence_mode")
    if pm is not None:
        if current["persistence_mode"] is None:
            unsupported("persistence mode")
        if bool(pm) != current["persistence_mode"]:
            steps.append(("persistence_mode", current["persistence_mode"], bool(pm)))

    cm = desired_compute_mode(params)
    if cm is not None:
        if current["compute_mode"] is None:
            unsupported("compute modes")
        if cm != current["compute_mode"]:
            steps.append(("compute_mode", current["compute_mode"], cm))

    power = _power_target(params.get("power_limit"), current)
    if power is not None:
        if current["power_limit_w"] is None or current["power_limit_min_w"] is None:
            unsupported("power limits")
        lo, hi = current["power_limit_min_w"], current["power_limit_max_w"]
        target = {"default": current["power_limit_default_w"], "min": lo, "max": hi}.get(power, power)
        if target is None:
            unsupported("a default power limit")
        if target < lo or target > hi:
            raise GpuOpsError("power_limit %s W is out of range for %s: valid %g to %g W" % (
                ("%g" % target), where, lo, hi), gpu=gpu["index"], power_limit_min_w=lo, power_limit_max_w=hi)
        if int(round(target * 1000)) != int(round(current["power_limit_w"] * 1000)):
            steps.append(("power_limit_w", current["power_limit_w"], target))

    ecc = params.get("ecc")
    if ecc is not None:
        if current["ecc_mode_pending"] is None:
            unsupported("ECC")
        if bool(ecc) != current["ecc_mode_pending"]:
            steps.append(("ecc_mode_pending", current["ecc_mode_pending"], bool(ecc)))

    clocks = params.get("application_clocks")
    if clocks is not None:
        if current["application_clocks"] is None:
            unsupported("application clocks")
        if clocks == "default":
            want = _default_clocks(nvml, gpu["index"])
        else:
            if not isinstance(clocks, dict) or "memory_mhz" not in clocks or "graphics_mhz" not in clocks:
                raise GpuOpsError("application_clocks must be 'default' or {memory_mhz, graphics_mhz}, got %r"
                                  % (clocks,))
            want = {"memory_mhz": int(clocks["memory_mhz"]), "graphics_mhz": int(clocks["graphics_mhz"])}
            supported = _supported_clocks(nvml, gpu["index"])
            if want["memory_mhz"] not in supported or want["graphics_mhz"] not in supported[want["memory_mhz"]]:
                mems = sorted(supported)
                gfx = supported.get(want["memory_mhz"], [])
                raise GpuOpsError(
                    "application_clocks %d/%d MHz (memory/graphics) are not supported by %s; memory clocks: %s%s" % (
                        want["memory_mhz"], want["graphics_mhz"], where, ", ".join(str(m) for m in mems),
                        ("; graphics clocks at %d MHz: %d..%d" % (want["memory_mhz"], min(gfx), max(gfx)))
                        if gfx else ""),
                    gpu=gpu["index"], supported_memory_clocks=mems)
        if want != current["application_clocks"]:
            steps.append(("application_clocks", current["application_clocks"], want))
    return steps


def _apply(nvml, index, setting, value):
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    if setting == "persistence_mode":
        nvml.nvmlDeviceSetPersistenceMode(h, 1 if value else 0)
    elif setting == "compute_mode":
        nvml.nvmlDeviceSetComputeMode(h, COMPUTE_MODES[value])
    elif setting == "power_limit_w":
        nvml.nvmlDeviceSetPowerManagementLimit(h, int(round(value * 1000)))
    elif setting == "ecc_mode_pending":
        nvml.nvmlDeviceSetEccMode(h, 1 if value else 0)
    elif setting == "application_clocks":
        nvml.nvmlDeviceSetApplicationsClocks(h, value["memory_mhz"], value["graphics_mhz"])


def _entry(gpu, settings):
    entry = {"index": gpu["index"], "uuid": gpu["uuid"], "name": gpu.get("name"), "model": gpu.get("model")}
    entry.update(settings)
    ecc_pending_change = settings["ecc_mode_current"] != settings["ecc_mode_pending"]
    entry["reboot_required"] = settings["ecc_mode_current"] is not None and ecc_pending_change
    return entry


def run_gpu_settings(nvml: Any, params: Dict[str, Any], check_mode: bool = False) -> Dict[str, Any]:
    """Module result for gpuops.k8s.gpu_settings."""
    host = gpu_state.read_host(nvml)
    targets = select_gpus(host["gpus"], params.get("devices", "all"))
    current = dict((g["index"], read_settings(nvml, g["index"])) for g in targets)
    plans = [(g, plan_gpu(g, current[g["index"]], params, nvml)) for g in targets]  # validates all first

    actions, done = [], []
    for gpu, steps in plans:
        for setting, before, after in steps:
            actions.append({"gpu": gpu["index"], "uuid": gpu["uuid"], "setting": setting,
                            "before": before, "after": after})
    if not check_mode:
        for action in actions:
            try:
                _apply(nvml, action["gpu"], action["setting"], action["after"])
            except NvmlError as e:
                now = [_entry(g, read_settings(nvml, g["index"])) for g in targets]
                raise GpuOpsError(
                    "%s (while setting %s on GPU %d; %d earlier change(s) done)" % (
                        e.msg, action["setting"], action["gpu"], len(done)),
                    changed=bool(done), actions=done, failed_action=action, gpus=now,
                    nvml_error=e.name, nvml_error_code=e.value)
            done.append(action)

    settled = {}
    for gpu in targets:
        if check_mode:
            settings = dict(current[gpu["index"]])
            for a in actions:
                if a["gpu"] == gpu["index"]:
                    settings[a["setting"]] = a["after"]
        else:
            settings = read_settings(nvml, gpu["index"])
        settled[gpu["index"]] = settings
    report = [_entry(g, settled[g["index"]]) for g in targets]
    keys = ("persistence_mode", "compute_mode", "power_limit_w", "ecc_mode_current", "ecc_mode_pending",
            "application_clocks")
    tracker = diff_helper.DiffTracker()
    for g in targets:
        tracker.add(g["uuid"], before=dict((k, current[g["index"]][k]) for k in keys),
                    after=dict((k, settled[g["index"]][k]) for k in keys))
    return {
        "changed": bool(actions),
        "actions": actions,
        "gpus": report,
        "reboot_required": any(r["reboot_required"] for r in report),
        "diff": tracker.as_dict(),
    }


def gpu_settings(params: Dict[str, Any], check_mode: bool = False, run_command: Any = None) -> Dict[str, Any]:
    """Open NVML (real or simulated) and run run_gpu_settings."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.writable import run_locked

    return run_locked(run_gpu_settings, params, "gpuops.k8s.gpu_settings", check_mode=check_mode, run_command=run_command)
