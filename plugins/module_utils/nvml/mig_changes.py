# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG primitives over either NVML backend: MIG mode, GPU instances with their compute instances, GPU reset.

Each one reads back what it changed in the shape of ``nvml.gpu_state`` (the facts), whose readers it
uses. Split from the readers so that what only reads GPUs (``gpu_info``, check mode) does not load them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import IN_USE, NOT_SUPPORTED, NvmlError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.gpu_state import (
    _ci_profile_ids,
    _gpu_instances,
    _identity,
    _instances,
    _mig_device_map,
    _mig_mode,
    _optional,
    _processes,
    find_live_profile,
    invalidate,
    live_profiles,
)


def set_mig_mode(nvml: Any, index: int, enabled: bool) -> Dict[str, Any]:
    """Request MIG mode on GPU ``index``; {"current", "pending", "activation_status"}."""
    handle = _identity(nvml, index)["handle"]
    status = nvml.nvmlDeviceSetMigMode(handle, 1 if enabled else 0)
    invalidate(nvml, index)
    _capable, current, pending = _mig_mode(nvml, handle)
    return {"current": current, "pending": pending, "activation_status": int(status or 0)}


def reset_gpu(nvml: Any, index: int) -> None:
    """GPU reset (nvidia-smi -r on real hosts); NvmlError IN_USE while processes run."""
    nvml.reset_gpu(index)
    invalidate(nvml, index)


def _gi_handle(nvml, index, gpu_instance_id):
    handle = _identity(nvml, index)["handle"]
    return nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance_id)


def instances_of(nvml: Any, index: int, gpu_instance_id: int) -> List[Dict[str, Any]]:
    """The instance entries (one per CI) of one GPU instance, as in read_gpu."""
    ident = _identity(nvml, index)
    handle, model = ident["handle"], ident["model"]
    gis = _gpu_instances(nvml, index, handle, gi_filter=gpu_instance_id)
    max_count = _optional(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or (model.compute_slices if model else 7)
    mig_map = _mig_device_map(nvml, handle, max_count)
    mig_handles = [(mh, gi, ci) for (gi, ci), (_uuid, mh) in sorted(mig_map.items()) if gi == gpu_instance_id]
    procs = _processes(nvml, handle, mig_handles)
    return _instances(gis, mig_map, procs)


def create_instance(nvml: Any, index: int, gi_profile: Any, start: int,
                    compute_instances: Optional[List[int]] = None) -> List[Dict[str, Any]]:
    """Create a GPU instance of ``gi_profile`` (name or GiProfile) at memory slice ``start``, then its CIs.

    ``compute_instances``: list of CI slice counts (default: one CI spanning the GI). When a CI
    cannot be created, the CIs made so far and the GI are destroyed again before the error is
    raised, so a re-run starts from the state before this call.
    Returns the new instance entries (as in read_gpu).
    """
    p = find_live_profile(nvml, index, gi_profile)
    if compute_instances is None:
        compute_instances = [p.compute_slices]
    options = gpu_catalog.ci_slice_options(p.compute_slices)
    for c in compute_instances:
        if c not in options:
            raise GpuOpsError("a %s GPU instance cannot hold a compute instance of %s compute slices; valid sizes: %s"
                              % (p.name, c, ", ".join(str(o) for o in options)), valid_compute_slices=list(options))
    if sum(compute_instances) > p.compute_slices:
        raise GpuOpsError("compute instances %s need %d compute slices; a %s GPU instance has %d"
                          % (compute_instances, sum(compute_instances), p.name, p.compute_slices))
    if p.placements and start not in p.placements:
        raise GpuOpsError("placement start %s is not valid for %s on GPU %d; valid starts: %s"
                          % (start, p.name, index, ", ".join(str(s) for s in p.placements)),
                          valid_placements=list(p.placements))
    handle = _identity(nvml, index)["handle"]
    capable, current, pending = _mig_mode(nvml, handle)
    if not current:
        raise NvmlError(NOT_SUPPORTED, call="nvmlDeviceCreateGpuInstanceWithPlacement", msg=(
            "GPU %d: MIG mode is not enabled (current: %s, pending: %s)%s; no MIG instance can be created yet"
            % (index, "on" if current else "off", "on" if pending else "off",
               "; the pending mode needs a GPU reset or reboot" if pending else "")), gpu=index)
    gi_handle = nvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, p.profile_id,
                                                              {"start": start, "size": p.memory_slices})
    changes = []
    gi_id = None
    created = []
    try:
        gi_id = int(nvml.nvmlGpuInstanceGetInfo(gi_handle).id)
        changes.append(_change("create_gpu_instance", "nvmlDeviceCreateGpuInstanceWithPlacement", gi_id))
        for c in sorted(compute_instances, reverse=True):
            const = gpu_catalog.CI_PROFILE_BY_SLICES[c]
            info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi_handle, const, gpu_catalog.CI_ENGINE_PROFILE_SHARED)
            ci_handle = nvml.nvmlGpuInstanceCreateComputeInstance(gi_handle, int(info.id))
            created.append((ci_handle, c))
            changes.append(_change("create_compute_instance", "nvmlGpuInstanceCreateComputeInstance", gi_id,
                                   compute_slices=c))
    except NvmlError as e:
        if gi_id is None:
            changes.append(_change("create_gpu_instance", "nvmlDeviceCreateGpuInstanceWithPlacement", None))
        rollback_errors = []
        for ci_handle, c in reversed(created):
            try:
                nvml.nvmlComputeInstanceDestroy(ci_handle)
                changes.append(_change("destroy_compute_instance", "nvmlComputeInstanceDestroy", gi_id,
                                       compute_slices=c, rollback=True))
            except NvmlError as re:
                rollback_errors.append(re.msg)
        if not rollback_errors:
            try:
                nvml.nvmlGpuInstanceDestroy(gi_handle)
                changes.append(_change("destroy_gpu_instance", "nvmlGpuInstanceDestroy", gi_id, rollback=True))
            except NvmlError as re:
                rollback_errors.append(re.msg)
        e.details["nvml_changes"] = changes
        e.details["rolled_back"] = not rollback_errors
        e.details["gpu_instance_id"] = gi_id
        if rollback_errors:
            e.details["rollback_errors"] = rollback_errors
        raise
    return instances_of(nvml, index, gi_id)


def destroy_instance(nvml: Any, index: int, gpu_instance_id: int) -> None:
    """Destroy GPU instance ``gpu_instance_id`` (its CIs first). NvmlError IN_USE when processes use it."""
    ident = _identity(nvml, index)
    handle = ident["handle"]
    gi_handle = _gi_handle(nvml, index, gpu_instance_id)
    procs = [pr for pr in _processes(nvml, handle) if pr["gpu_instance_id"] == gpu_instance_id]
    if not procs:
        # processes may only be visible through the MIG device handles
        max_count = _optional(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 7
        mig_map = _mig_device_map(nvml, handle, max_count)
        mig_handles = [(mh, gi, ci) for (gi, ci), (_uuid, mh) in mig_map.items() if gi == gpu_instance_id]
        procs = [pr for pr in _processes(nvml, handle, mig_handles) if pr["gpu_instance_id"] == gpu_instance_id]
    if procs:
        pids = [pr["pid"] for pr in procs]
        raise NvmlError(IN_USE, call="nvmlGpuInstanceDestroy", msg=(
            "GPU %d instance %d is in use by processes %s; not destroyed"
            % (index, gpu_instance_id, ", ".join(str(p) for p in pids))), pids=pids, gpu=index,
            gpu_instance_id=gpu_instance_id)
    p = None
    info = nvml.nvmlGpuInstanceGetInfo(gi_handle)
    for lp in live_profiles(nvml, index):
        if lp.profile_id == int(info.profileId):
            p = lp
    gi_slices = p.compute_slices if p is not None else 8
    changes = []
    try:
        for ci_pid, (slices, _const) in sorted(_ci_profile_ids(nvml, gi_handle, gi_slices).items()):
            for ci_handle in nvml.nvmlGpuInstanceGetComputeInstances(gi_handle, ci_pid):
                ci_id = int(nvml.nvmlComputeInstanceGetInfo(ci_handle).id)
                nvml.nvmlComputeInstanceDestroy(ci_handle)
                changes.append(_change("destroy_compute_instance", "nvmlComputeInstanceDestroy", gpu_instance_id,
                                       compute_instance_id=ci_id, compute_slices=slices))
        nvml.nvmlGpuInstanceDestroy(gi_handle)
    except NvmlError as e:
        if changes:
            # the compute instances destroyed before the failure are a change of the host
            e.details["nvml_changes"] = changes
        raise


# -- after a transient error (nvml.retry): is the change already there? ---------------------------------------
# Each returns (True, result) when the driver made the change although the call failed, so that it is not made
# twice, and (False, None) when the action must run again.

def settle_mig_mode(nvml: Any, index: int, enabled: bool) -> Tuple[bool, Optional[Dict[str, Any]]]:
    """The requested MIG mode is pending (or current) already: done."""
    invalidate(nvml, index)
    handle = _identity(nvml, index)["handle"]
    _capable, current, pending = _mig_mode(nvml, handle)
    if bool(pending) == bool(enabled):
        return True, {"current": current, "pending": pending, "activation_status": 0}
    return False, None


def settle_destroy(nvml: Any, index: int, gpu_instance_id: int,
                   placement: Mapping[str, Any]) -> Tuple[bool, None]:
    """GPU instance ``gpu_instance_id`` is gone: done. Still there at the planned ``placement``: destroy it
    again (its remaining CIs first). Another instance under that id is not the planned one: GpuOpsError."""
    handle = _identity(nvml, index)["handle"]
    for _p, _h, gi_id, start, size, _cis in _gpu_instances(nvml, index, handle, gi_filter=gpu_instance_id):
        if (start, size) != (placement["start"], placement["size"]):
            raise GpuOpsError("GPU %d: GPU instance %d is at %d:%d now, not at the planned %d:%d; it is not destroyed"
                              % (index, gi_id, start, size, placement["start"], placement["size"]), gpu=index,
                              gpu_instance_id=gi_id)
        return False, None
    return True, None


def settle_create(nvml: Any, index: int, gi_profile: Any, start: int,
                  compute_instances: Sequence[int]) -> Tuple[bool, Optional[List[Dict[str, Any]]]]:
    """A GPU instance of ``gi_profile`` at ``start`` with the planned compute instances: done (no second
    create). One there with fewer CIs is what the failed try left half-made (the slot was free when the
    run planned it, under the host lock): it is destroyed, and the create runs again."""
    p = find_live_profile(nvml, index, gi_profile)
    handle = _identity(nvml, index)["handle"]
    for gp, _h, gi_id, at, _size, cis in _gpu_instances(nvml, index, handle):
        if at != start or gp.profile_id != p.profile_id:
            continue
        if sorted(c[1] for c in cis) == sorted(compute_instances):
            return True, instances_of(nvml, index, gi_id)
        destroy_instance(nvml, index, gi_id)
    return False, None


def _change(action, call, gpu_instance_id, **extra):
    """One NVML call that changed the GPU, as reported when a higher-level action fails halfway."""
    out = {"action": action, "nvml_call": call, "gpu_instance_id": gpu_instance_id}
    out.update(extra)
    return out
