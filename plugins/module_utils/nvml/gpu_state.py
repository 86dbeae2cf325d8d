# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading GPUs (facts and live MIG profiles), over either NVML backend.

The MIG changes (mode, instances, reset) are in ``nvml.mig_changes``: only what changes GPUs loads them.

Profiles are looked up by their NVML constant and their ids and memory sizes read from NVML at
run time (never a hard-coded profile id). Names come from the v2 profile info ``name`` field when
NVML gives one, else from the naming rule (``gpu_catalog.profile_name_from_memory``).

Facts shape: docs/architecture.md. Each instance is one compute instance (a GPU instance split
into several compute instances shows several entries with profiles like ``1c.3g.40gb``); a GPU
instance without compute instances shows one entry with ``compute_instance_id: null``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import (
    FUNCTION_NOT_FOUND,
    GPU_IS_LOST,
    INVALID_ARGUMENT,
    NO_PERMISSION,
    NOT_FOUND,
    NOT_SUPPORTED,
    VALUE_NOT_AVAILABLE_UINT,
    NvmlError,
    text,
)

MIB = 1024 * 1024
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
# errors that mean "this reading is not available here" (the fact becomes null)
_OPTIONAL = (NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND, NOT_FOUND)


def _optional(func, *args):
    try:
        return func(*args)
    except NvmlError as e:
        if e.value in _OPTIONAL:
            return None
        raise


def _cache(nvml):
    cache = getattr(nvml, "cache", None)
    if cache is None:
        cache = {}
        try:
            nvml.cache = cache
        except AttributeError:
            pass
    return cache


def invalidate(nvml: Any, index: Optional[int] = None) -> None:
    """Forget cached profile info (after a MIG mode change or reset)."""
    cache = _cache(nvml)
    if index is None:
        cache.clear()
    else:
        for key in [k for k in cache if k[1] == index]:
            del cache[key]


def cuda_version_string(value: Optional[int]) -> Optional[str]:
    """12040 -> '12.4' (nvmlSystemGetCudaDriverVersion)."""
    if value is None:
        return None
    value = int(value)
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


# --------------------------------------------------------------------------------------------------
# Identity of one GPU
# --------------------------------------------------------------------------------------------------

def _identity(nvml, index):
    key = ("identity", index)
    cache = _cache(nvml)
    if key in cache:
        return cache[key]
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = text(nvml.nvmlDeviceGetName(handle))
    uuid = text(nvml.nvmlDeviceGetUUID(handle))
    pci = nvml.nvmlDeviceGetPciInfo(handle)
    device_id = (int(pci.pciDeviceId) >> 16) & 0xFFFF
    bus_id = text(pci.busId)
    total_mib = int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // MIB
    model = gpu_catalog.lookup_model(device_id) or gpu_catalog.lookup_model(name)
    if model is not None and gpu_catalog.lookup_model(name) is not None and gpu_catalog.lookup_model(name).key != model.key:
        model = gpu_catalog.lookup_model(name)
    ident = {
        "handle": handle, "name": name, "uuid": uuid, "pci_device_id": "0x%04X" % device_id, "pci_bus_id": bus_id,
        "memory_total_mib": total_mib, "model": model,
    }
    cache[key] = ident
    return ident


def _mig_mode(nvml, handle):
    """(capable, current, pending)."""
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except NvmlError as e:
        if e.value in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
            return False, False, False
        raise
    return True, bool(current), bool(pending)


# --------------------------------------------------------------------------------------------------
# Profiles
# --------------------------------------------------------------------------------------------------

def _live_name(info, constant, total_mib):
    name = text(getattr(info, "name", None) or b"")
    if name:
        name = name.strip()
        if name.upper().startswith("MIG "):
            name = name[4:].strip()
        if name:
            return name
    return gpu_catalog.profile_name_from_memory(int(info.memorySizeMB), total_mib, int(info.sliceCount),
                                                suffix=gpu_catalog.CONSTANT_SUFFIX.get(constant, ""))


def _gi_profile_info(nvml, handle, const):
    """v2 profile info (with name); v1 on drivers without nvmlDeviceGetGpuInstanceProfileInfoV."""
    try:
        return nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, const)
    except NvmlError as e:
        if e.value != FUNCTION_NOT_FOUND:
            raise
    return nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, const, 1)


def live_profiles(nvml: Any, index: int) -> List[Any]:
    """The GPU instance profiles of GPU ``index`` as GiProfile tuples with NVML's live values.

    Reads ids, memory sizes, max counts and placements from NVML (looked up by profile constant).
    While NVML cannot list them (MIG mode not enabled yet), the catalog's profiles for the model
    are returned. [] for GPUs without MIG or unknown models NVML can't describe.
    """
    key = ("profiles", index)
    cache = _cache(nvml)
    if key in cache:
        return cache[key]
    ident = _identity(nvml, index)
    handle, model = ident["handle"], ident["model"]
    capable, current, pending = _mig_mode(nvml, handle)
    if not capable:
        cache[key] = []
        return []
    constants = [p.constant for p in model.profiles] if model is not None else list(range(gpu_catalog.GI_PROFILE_COUNT))
    out = []
    live = True
    for const in constants:
        try:
            info = _gi_profile_info(nvml, handle, const)
        except NvmlError as e:
            if e.value in (NOT_SUPPORTED, INVALID_ARGUMENT):
                if not current:
                    live = False
                    break
                continue
            raise
        known = gpu_catalog.profile_by_constant(model, const) if model is not None else None
        try:
            placements = nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, int(info.id))
            starts = tuple(int(p.start) for p in placements)
            memory_slices = int(placements[0].size) if placements else (known.memory_slices if known else 0)
        except NvmlError as e:
            if e.value not in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
                raise
            starts = known.placements if known else ()
            memory_slices = known.memory_slices if known else 0
        out.append(gpu_catalog.GiProfile(
            name=_live_name(info, const, ident["memory_total_mib"]),
            constant=const,
            profile_id=int(info.id),
            compute_slices=int(info.sliceCount),
            memory_slices=memory_slices,
            max_instances=int(info.instanceCount),
            placements=starts,
            memory_mib=int(info.memorySizeMB),
            sm=int(getattr(info, "multiprocessorCount", 0)) or (known.sm if known else None),
        ))
    if not live:
        out = list(model.profiles) if model is not None else []
        # not cached: the live values appear once MIG mode is active
        return out
    cache[key] = out
    return out


def find_live_profile(nvml: Any, index: int, profile: Any) -> Any:
    """The live GiProfile called ``profile`` (name or GiProfile) on GPU ``index``; GpuOpsError if none."""
    profiles = live_profiles(nvml, index)
    name = profile.name if isinstance(profile, gpu_catalog.GiProfile) else profile
    canon = gpu_catalog.canonical_profile_name(name)
    for p in profiles:
        if p.name == canon:
            return p
    if isinstance(profile, gpu_catalog.GiProfile):
        for p in profiles:
            if p.constant == profile.constant:
                return p
    ident = _identity(nvml, index)
    if not profiles:
        raise GpuOpsError("GPU %d (%s) does not support MIG; profile %r cannot be used" % (index, ident["name"], name),
                          gpu=index)
    raise GpuOpsError("profile %r does not exist on GPU %d (%s); valid profiles: %s"
                      % (name, index, ident["name"], ", ".join(p.name for p in profiles)),
                      gpu=index, valid_profiles=[p.name for p in profiles])


def _ci_profile_ids(nvml, gi_handle, gi_compute_slices):
    """{ci_profile_id: (slices, constant)} for the CI profiles possible in this GI."""
    out = {}
    for slices in gpu_catalog.ci_slice_options(gi_compute_slices):
        const = gpu_catalog.CI_PROFILE_BY_SLICES.get(slices)
        if const is None:
            continue
        try:
            info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi_handle, const, gpu_catalog.CI_ENGINE_PROFILE_SHARED)
        except NvmlError as e:
            if e.value in (NOT_SUPPORTED, INVALID_ARGUMENT):
                continue
            raise
        out[int(info.id)] = (int(info.sliceCount), const)
    return out


# --------------------------------------------------------------------------------------------------
# Processes and instances
# --------------------------------------------------------------------------------------------------

def _uint_or_none(value):
    if value is None:
        return None
    value = int(value)
    return None if value == VALUE_NOT_AVAILABLE_UINT else value


def _process_name(nvml, pid):
    try:
        return text(nvml.nvmlSystemGetProcessName(pid))
    except NvmlError:
        pass
    if getattr(nvml, "kind", None) == "nvml":
        # NVML cannot name processes of other containers / users: ask procfs
        try:
            with open("/proc/%d/comm" % pid) as f:
                return f.read().strip() or None
        except (IOError, OSError):
            return None
    return None


def _processes(nvml, handle, mig_handles=()):
    seen = set()
    out = []
    sources = [handle] + list(mig_handles)
    for h, gi_id, ci_id in [(s, None, None) if s is handle else s for s in sources]:
        procs = _optional(nvml.nvmlDeviceGetComputeRunningProcesses, h) or []
        for p in procs:
            gi = _uint_or_none(getattr(p, "gpuInstanceId", None))
            ci = _uint_or_none(getattr(p, "computeInstanceId", None))
            if gi is None and gi_id is not None:
                gi, ci = gi_id, ci_id
            key = (int(p.pid), gi, ci)
            if key in seen:
                continue
            seen.add(key)
            name = _process_name(nvml, int(p.pid))
            used = getattr(p, "usedGpuMemory", None)
            out.append({
                "pid": int(p.pid), "name": name, "gpu_instance_id": gi, "compute_instance_id": ci,
                "used_memory_mib": int(used) // MIB if used is not None else None,
            })
    out.sort(key=lambda p: (p["pid"], p["gpu_instance_id"] or 0))
    return out


def _mig_device_map(nvml, handle, max_count):
    """{(gi_id, ci_id): (uuid, mig handle)} from the MIG device handles."""
    out = {}
    for i in range(max_count):
        try:
            mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
        except NvmlError as e:
            if e.value in (NOT_FOUND, INVALID_ARGUMENT):
                continue
            if e.value in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
                break
            raise
        gi = nvml.nvmlDeviceGetGpuInstanceId(mh)
        ci = nvml.nvmlDeviceGetComputeInstanceId(mh)
        out[(int(gi), int(ci))] = (text(nvml.nvmlDeviceGetUUID(mh)), mh)
    return out


def _gpu_instances(nvml, index, handle, gi_filter=None):
    """[(GiProfile, gi_handle, gi_id, start, size, [(ci_id, slices, start)])] of the GPU."""
    out = []
    for p in live_profiles(nvml, index):
        gis = nvml.nvmlDeviceGetGpuInstances(handle, p.profile_id)
        for gi_handle in gis:
            info = nvml.nvmlGpuInstanceGetInfo(gi_handle)
            gi_id = int(info.id)
            if gi_filter is not None and gi_id != gi_filter:
                continue
            cis = []
            for ci_pid, (slices, _const) in sorted(_ci_profile_ids(nvml, gi_handle, p.compute_slices).items()):
                for ci_handle in nvml.nvmlGpuInstanceGetComputeInstances(gi_handle, ci_pid):
                    ci_info = nvml.nvmlComputeInstanceGetInfo(ci_handle)
                    cis.append((int(ci_info.id), slices, int(ci_info.placement.start)))
            cis.sort()
            out.append((p, gi_handle, gi_id, int(info.placement.start), int(info.placement.size), cis))
    out.sort(key=lambda g: (g[3], g[2]))
    return out


def _instances(gpu_instances, mig_map, processes):
    out = []
    for p, _gi_handle, gi_id, start, size, cis in gpu_instances:
        gi_procs = [pr for pr in processes if pr["gpu_instance_id"] == gi_id]
        base = {
            "gpu_instance_profile": p.name,
            "gpu_instance_profile_id": p.profile_id,
            "placement": {"start": start, "size": size},
            "gpu_instance_id": gi_id,
        }
        if not cis:
            inst = dict(base, profile=p.name, compute_instance_id=None, compute_slices=None,
                        has_compute_instance=False, uuid=None, memory_mib=p.memory_mib, busy=bool(gi_procs))
            out.append(inst)
            continue
        for ci_id, slices, _ci_start in cis:
            name = p.name if slices == p.compute_slices else "%dc.%s" % (slices, p.name)
            uuid = mig_map.get((gi_id, ci_id), (None, None))[0]
            busy = any(pr["compute_instance_id"] in (None, ci_id) for pr in gi_procs)
            out.append(dict(base, profile=name, compute_instance_id=ci_id, compute_slices=slices,
                            has_compute_instance=True, uuid=uuid, memory_mib=p.memory_mib, busy=busy))
    return out


# --------------------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------------------

def read_gpu(nvml: Any, index: int) -> Dict[str, Any]:
    """Facts of GPU ``index`` (shape: docs/architecture.md)."""
    try:
        return _read_gpu(nvml, index)
    except NvmlError as e:
        if e.value != GPU_IS_LOST:
            raise
        return _lost_gpu(nvml, index)


def _lost_gpu(nvml, index):
    return {
        "index": index, "lost": True, "uuid": None, "name": None, "model": None, "pci_device_id": None,
        "pci_bus_id": None, "memory_total_mib": None, "mig_capable": None, "mig_mode_current": None,
        "mig_mode_pending": None, "instances": [], "processes": [],
        "ecc_errors": {"volatile_uncorrected": None, "aggregate_uncorrected": None},
        "retired_pages_pending": None, "remapped_rows_pending": None, "remapped_rows_failure": None,
        "temperature_c": None, "power_w": None, "power_limit_w": None, "utilization_gpu_pct": None,
        "persistence_mode": None, "compute_mode": None, "ecc_mode_current": None, "ecc_mode_pending": None,
        "applications_clocks": None,
    }


def _read_gpu(nvml, index):
    ident = _identity(nvml, index)
    handle = ident["handle"]
    model = ident["model"]
    capable, current, pending = _mig_mode(nvml, handle)
    instances = []
    mig_map = {}
    gpu_instances = []
    if capable and current:
        max_count = _optional(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or (model.compute_slices if model else 7)
        mig_map = _mig_device_map(nvml, handle, max_count)
        gpu_instances = _gpu_instances(nvml, index, handle)
    mig_handles = [(mh, gi, ci) for (gi, ci), (_uuid, mh) in sorted(mig_map.items())]
    processes = _processes(nvml, handle, mig_handles)
    if gpu_instances:
        instances = _instances(gpu_instances, mig_map, processes)

    def ecc(counter):
        return _optional(nvml.nvmlDeviceGetTotalEccErrors, handle, 1, counter)

    remapped = _optional(nvml.nvmlDeviceGetRemappedRows, handle)
    retired = _optional(nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
    power = _optional(nvml.nvmlDeviceGetPowerUsage, handle)
    limit = _optional(nvml.nvmlDeviceGetPowerManagementLimit, handle)
    util = _optional(nvml.nvmlDeviceGetUtilizationRates, handle)
    persistence = _optional(nvml.nvmlDeviceGetPersistenceMode, handle)
    compute_mode = _optional(nvml.nvmlDeviceGetComputeMode, handle)
    ecc_mode = _optional(nvml.nvmlDeviceGetEccMode, handle)
    app_gr = _optional(nvml.nvmlDeviceGetApplicationsClock, handle, 0)
    app_mem = _optional(nvml.nvmlDeviceGetApplicationsClock, handle, 2) if app_gr is not None else None
    return {
        "index": index,
        "uuid": ident["uuid"],
        "name": ident["name"],
        "model": model.key if model is not None else None,
        "pci_device_id": ident["pci_device_id"],
        "pci_bus_id": ident["pci_bus_id"],
        "memory_total_mib": ident["memory_total_mib"],
        "mig_capable": capable,
        "mig_mode_current": current,
        "mig_mode_pending": pending,
        "instances": instances,
        "ecc_errors": {"volatile_uncorrected": ecc(0), "aggregate_uncorrected": ecc(1)},
        "retired_pages_pending": None if retired is None else bool(retired),
        "remapped_rows_pending": None if remapped is None else bool(remapped[2]),
        "remapped_rows_failure": None if remapped is None else bool(remapped[3]),
        "temperature_c": _optional(nvml.nvmlDeviceGetTemperature, handle, 0),
        "power_w": None if power is None else round(power / 1000.0, 1),
        "power_limit_w": None if limit is None else round(limit / 1000.0, 1),
        "utilization_gpu_pct": None if util is None else int(util.gpu),
        "persistence_mode": None if persistence is None else bool(persistence),
        "compute_mode": None if compute_mode is None else COMPUTE_MODES.get(compute_mode, str(compute_mode)),
        "ecc_mode_current": None if ecc_mode is None else bool(ecc_mode[0]),
        "ecc_mode_pending": None if ecc_mode is None else bool(ecc_mode[1]),
        "applications_clocks": None if app_gr is None else {"graphics_mhz": app_gr, "memory_mhz": app_mem},
        "processes": processes,
        "lost": False,
    }


def read_host(nvml: Any) -> Dict[str, Any]:
    """Driver versions and the facts of every GPU."""
    count = nvml.nvmlDeviceGetCount()
    cuda = _optional(nvml.nvmlSystemGetCudaDriverVersion)
    return {
        "driver_version": text(nvml.nvmlSystemGetDriverVersion()),
        "cuda_driver_version": cuda_version_string(cuda),
        "gpus": [read_gpu(nvml, i) for i in range(count)],
    }


def gpu_info(simulator: Optional[str] = None, diagram: bool = True,
             run_command: Optional[Callable[..., Any]] = None) -> Dict[str, Any]:
    """The gpu_info module's result: read_host plus the backend kind and, when available, a slice diagram."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.factory import open_nvml

    with open_nvml(simulator, run_command) as nvml:
        host = read_host(nvml)
        host["backend"] = nvml.kind
    if diagram:
        try:
            from ansible_collections.gpuops.k8s.plugins.module_utils.report import diagram as slice_diagram
        except ImportError:
            slice_diagram = None  # type: ignore[assignment]
        if slice_diagram is not None:
            lines = slice_diagram.render(host["gpus"])
            host["diagram"] = lines.splitlines() if isinstance(lines, str) else list(lines)
    return host
