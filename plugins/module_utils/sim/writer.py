# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML simulator's mutations: MIG mode, GPU and compute instances (real MIG rules), settings,
GPU reset, and seeded random faults on mutating calls.

Every mutating call runs under the host lock on freshly read state and writes the state before the
lock is released, so two runs on one simulated host lose no change.
"""

from __future__ import annotations

import random
import uuid as uuidlib
from typing import Any, Dict

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import (
    IN_USE,
    INSUFFICIENT_RESOURCES,
    INVALID_ARGUMENT,
    NOT_SUPPORTED,
    RESET_REQUIRED,
    NvmlError,
    error_code,
    error_name,
    placement_of,
)
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.reader import SimReader
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.state import (
    _NO_ECC,
    _POWER,
    ComputeInstanceHandle,
    GpuInstanceHandle,
    _health,
    gi_swizzle_id,
    reset_gpu_state,
)

# NVML setters of the simulator: each runs under the host lock on freshly read state.
MUTATING_CALLS = (
    "nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlDeviceCreateGpuInstanceWithPlacement",
    "nvmlGpuInstanceDestroy", "nvmlGpuInstanceCreateComputeInstance", "nvmlGpuInstanceCreateComputeInstanceWithPlacement",
    "nvmlComputeInstanceDestroy", "nvmlDeviceSetPowerManagementLimit", "nvmlDeviceSetPersistenceMode",
    "nvmlDeviceSetComputeMode", "nvmlDeviceSetEccMode", "nvmlDeviceSetApplicationsClocks",
    "nvmlDeviceResetApplicationsClocks", "reset_gpu",
)


class SimBackend(SimReader):
    """The simulator with its mutations: what ``nvml.writable`` opens."""

    mutating_calls = MUTATING_CALLS

    def _random_fault(self, call):
        """Seeded random faults (``random_faults`` in the state): draw ``n`` of seed ``s`` fails when
        ``Random("s:n").random() < rate``; the draw count and the faults injected are kept in the state.

        Which fault: ``mix`` (a list of ``{error, weight, after_change}``) is drawn from with
        ``Random("s:n:kind")``; without it every fault is ``error`` (default NVML_ERROR_UNKNOWN). A fault
        with ``after_change`` lets the call make its change and then fails it (the driver did it, the answer
        was an error), as a timeout can. ``injected_by_error`` counts the faults per NVML error name."""
        spec = self.state.get("random_faults")
        if not spec or call not in (spec.get("calls") or MUTATING_CALLS):
            return
        with self._mutation():
            spec = self.state.get("random_faults") or {}
            draw = int(spec.get("draws", 0))
            spec["draws"] = draw + 1
            spec.setdefault("injected", 0)
            if random.Random("%s:%d" % (spec.get("seed", 0), draw)).random() >= float(spec.get("rate", 0)):
                return  # saved with the change this call makes
            kind = _fault_kind(spec, random.Random("%s:%d:kind" % (spec.get("seed", 0), draw)).random())
            name = error_name(error_code(kind.get("error") or "NVML_ERROR_UNKNOWN"))
            spec["injected"] = int(spec.get("injected", 0)) + 1
            by_error = spec.setdefault("injected_by_error", {})
            by_error[name] = int(by_error.get(name, 0)) + 1
            if kind.get("after_change"):
                spec["injected_after_change"] = int(spec.get("injected_after_change", 0)) + 1
            self._save()
        err = NvmlError(error_code(name), call=call, injected=True, random_fault=True,
                        after_change=bool(kind.get("after_change")))
        if kind.get("after_change"):
            self._after_change_fault = err  # raised by _serialized once the call has made its change
            return
        raise err

    def nvmlDeviceSetMigMode(self, handle: Any, mode: int) -> int:
        call = "nvmlDeviceSetMigMode"
        gpu = self._gpu(call, handle)
        model = self._model(gpu)
        if not model.profiles:
            raise NvmlError(NOT_SUPPORTED, call=call)
        if mode not in (0, 1):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if gpu.get("processes"):
            raise NvmlError(IN_USE, call=call)
        if mode == 0 and gpu.get("gpu_instances"):
            raise NvmlError(IN_USE, call=call)
        if gpu_catalog.mig_mode_needs_reset(model):
            gpu["mig_mode_pending"] = mode
            status = 0 if gpu.get("mig_mode_current", 0) == mode else RESET_REQUIRED
        else:
            gpu["mig_mode_pending"] = mode
            gpu["mig_mode_current"] = mode
            status = 0
        self._save()
        return status

    def _create_gi(self, call, gpu, model, p, start):
        reason = self._gi_fits(gpu, model, p, start)
        if reason:
            raise NvmlError(reason, call=call)
        gi_id = gi_swizzle_id(model.memory_slices, start, p.memory_slices)
        gpu["gpu_instances"].append({
            "id": gi_id, "profile_id": p.profile_id, "start": start, "size": p.memory_slices,
            "compute_instances": [],
        })
        gpu["gpu_instances"].sort(key=lambda g: g["id"])
        self._save()
        return GpuInstanceHandle(gpu["index"], gi_id)

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle: Any, profileId: int, placement: Dict[str, Any]) -> Any:
        call = "nvmlDeviceCreateGpuInstanceWithPlacement"
        gpu, model = self._mig_gpu(call, handle)
        p = self._profile_by_id(call, model, profileId)
        try:
            start, size = placement_of(placement)
        except (KeyError, AttributeError, TypeError, ValueError, IndexError):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if size != p.memory_slices:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return self._create_gi(call, gpu, model, p, start)

    def nvmlDeviceCreateGpuInstance(self, handle: Any, profileId: int) -> Any:
        call = "nvmlDeviceCreateGpuInstance"
        gpu, model = self._mig_gpu(call, handle)
        p = self._profile_by_id(call, model, profileId)
        for start in p.placements:
            if self._gi_fits(gpu, model, p, start) == 0:
                return self._create_gi(call, gpu, model, p, start)
        raise NvmlError(INSUFFICIENT_RESOURCES, call=call)

    def nvmlGpuInstanceDestroy(self, gpuInstance: Any) -> int:
        call = "nvmlGpuInstanceDestroy"
        gpu, model, gi = self._gi(call, gpuInstance)
        if gi["compute_instances"] or any(p.get("gpu_instance_id") == gi["id"] for p in gpu.get("processes", [])):
            raise NvmlError(IN_USE, call=call)
        gpu["gpu_instances"] = [g for g in gpu["gpu_instances"] if g["id"] != gi["id"]]
        self._save()
        return 0

    def _create_ci(self, call, gpu, model, gi, slices, profile, start):
        if not self._ci_free(gi, start, slices):
            raise NvmlError(INSUFFICIENT_RESOURCES, call=call)
        used = set(ci["id"] for ci in gi["compute_instances"])
        ci_id = 0
        while ci_id in used:
            ci_id += 1
        gi["compute_instances"].append({
            "id": ci_id, "profile_id": profile, "slices": slices, "start": start,
            "uuid": "MIG-%s" % uuidlib.uuid4(),
        })
        gi["compute_instances"].sort(key=lambda c: c["id"])
        self._save()
        return ComputeInstanceHandle(gpu["index"], gi["id"], ci_id)

    def nvmlGpuInstanceCreateComputeInstance(self, gpuInstance: Any, profileId: int) -> Any:
        call = "nvmlGpuInstanceCreateComputeInstance"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        slices = self._ci_profile(call, model, gp, profileId)
        for s in self._ci_placements(gp, slices):
            if self._ci_free(gi, s, slices):
                return self._create_ci(call, gpu, model, gi, slices, profileId, s)
        raise NvmlError(INSUFFICIENT_RESOURCES, call=call)

    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(self, gpuInstance: Any, profileId: int,
                                                          placement: Any) -> ComputeInstanceHandle:
        call = "nvmlGpuInstanceCreateComputeInstanceWithPlacement"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        slices = self._ci_profile(call, model, gp, profileId)
        try:
            start, size = placement_of(placement)
        except (KeyError, AttributeError, TypeError, ValueError, IndexError):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if size != slices or start not in self._ci_placements(gp, slices):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return self._create_ci(call, gpu, model, gi, slices, profileId, start)

    def nvmlComputeInstanceDestroy(self, computeInstance: Any) -> int:
        call = "nvmlComputeInstanceDestroy"
        gpu, model, gi, ci = self._ci(call, computeInstance)
        for p in gpu.get("processes", []):
            if p.get("gpu_instance_id") == gi["id"] and p.get("compute_instance_id") in (None, ci["id"]):
                raise NvmlError(IN_USE, call=call)
        gi["compute_instances"] = [c for c in gi["compute_instances"] if c["id"] != ci["id"]]
        self._save()
        return 0

    def nvmlDeviceSetPowerManagementLimit(self, handle: Any, limit: int) -> None:
        call = "nvmlDeviceSetPowerManagementLimit"
        gpu, s = self._settings(call, handle)
        default, minimum = _POWER.get(gpu["model"], (300, 100))
        if not isinstance(limit, int) or limit < minimum * 1000 or limit > default * 1000:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        s["power_limit_mw"] = limit
        self._save()

    def _set_mode(self, call, handle, key, mode, valid, not_supported=None):
        """Setting ``key`` of the GPU becomes ``mode``, with NVML's checks: NOT_SUPPORTED where
        ``not_supported(gpu)``, INVALID_ARGUMENT for a mode not in ``valid``."""
        gpu, s = self._settings(call, handle)
        if not_supported is not None and not_supported(gpu):
            raise NvmlError(NOT_SUPPORTED, call=call)
        if mode not in valid:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        s[key] = mode
        self._save()

    def nvmlDeviceSetPersistenceMode(self, handle: Any, mode: int) -> None:
        self._set_mode("nvmlDeviceSetPersistenceMode", handle, "persistence_mode", mode, (0, 1))

    def nvmlDeviceSetComputeMode(self, handle: Any, mode: int) -> None:
        # 1 is the deprecated EXCLUSIVE_THREAD mode, which the driver no longer supports
        self._set_mode("nvmlDeviceSetComputeMode", handle, "compute_mode", mode, (0, 2, 3), lambda gpu: mode == 1)

    def nvmlDeviceSetEccMode(self, handle: Any, mode: int) -> None:
        self._set_mode("nvmlDeviceSetEccMode", handle, "ecc_mode_pending", mode, (0, 1),
                       lambda gpu: gpu["model"] in _NO_ECC)

    def nvmlDeviceSetApplicationsClocks(self, handle: Any, maxMemClockMHz: int, maxGraphicsClockMHz: int) -> None:
        call = "nvmlDeviceSetApplicationsClocks"
        gpu, s, clocks = self._clocks(call, handle)
        if maxMemClockMHz != clocks[0] or maxGraphicsClockMHz not in self._graphics_steps(clocks):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        s["applications_clocks"] = {"memory": maxMemClockMHz, "graphics": maxGraphicsClockMHz}
        self._save()

    def nvmlDeviceResetApplicationsClocks(self, handle: Any) -> None:
        gpu, s, clocks = self._clocks("nvmlDeviceResetApplicationsClocks", handle)
        s["applications_clocks"] = {"memory": clocks[0], "graphics": clocks[2]}
        self._save()

    def reset_gpu(self, index: int) -> None:
        call = "reset_gpu"
        self._enter(call, index)
        if not isinstance(index, int) or index < 0 or index >= len(self.state["gpus"]):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        gpu = self.state["gpus"][index]
        procs = gpu.get("processes", [])
        if procs:
            raise NvmlError(IN_USE, call=call, msg=(
                "GPU %d cannot be reset: processes are running on it (PIDs %s)"
                % (index, ", ".join(str(p["pid"]) for p in procs))), pids=[int(p["pid"]) for p in procs])
        model = self._model(gpu)
        lost = _health(gpu, "lost")
        reset_gpu_state(gpu, model)
        if lost:
            gpu["health"]["lost"] = False
        self.cache.clear()
        self._save()


def _fault_kind(spec, x):
    """The entry of ``spec['mix']`` that ``x`` (in [0, 1)) falls in by weight; ``{error}`` without a mix."""
    mix = spec.get("mix") or [{"error": spec.get("error") or "NVML_ERROR_UNKNOWN", "weight": 1}]
    total = sum(float(k.get("weight", 1)) for k in mix)
    at = x * total
    for k in mix:
        at -= float(k.get("weight", 1))
        if at < 0:
            return k
    return mix[-1]


def _serialized(func):
    def call(self, *args, **kwargs):
        self._after_change_fault = None
        try:
            with self._mutation():
                out = func(self, *args, **kwargs)
            fault = self._after_change_fault
            if fault is not None:
                raise fault
            return out
        finally:
            self._after_change_fault = None
    call.__name__ = func.__name__
    call.__doc__ = func.__doc__
    return call


for _call_name in MUTATING_CALLS:
    setattr(SimBackend, _call_name, _serialized(getattr(SimBackend, _call_name)))
