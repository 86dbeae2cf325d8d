# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML simulator's read path: pynvml's query functions over the state file (``sim.state``).

Injected faults apply here too (a counted fault is used up under the host lock). The mutating calls
(MIG mode, GPU/compute instances, settings, GPU reset) and seeded random faults are in
``sim.writer``; ``nvml.factory`` opens this class, ``nvml.writable`` the writer.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.backend import Backend
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import (
    GPU_IS_LOST,
    INVALID_ARGUMENT,
    NOT_FOUND,
    NOT_SUPPORTED,
    UNINITIALIZED,
    VALUE_NOT_AVAILABLE_UINT,
    NvmlError,
    error_code,
)
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.mig_reader import MigReads
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.state import (
    _CLOCKS,
    _NO_ECC,
    DEFAULT_DRIVER,
    _POWER,
    ComputeInstanceHandle,
    DeviceHandle,
    GpuInstanceHandle,
    Obj,
    _health,
    cuda_for_driver,
    load_state,
    lock_path,
    save_state,
)


class SimReader(MigReads, Backend):
    """pynvml's function names over a JSON state file: the read path (queries, injected faults).

    The mutating calls are in ``sim.writer.SimBackend``; a read-only module never imports them."""

    kind = "simulator"
    mutating_calls: Tuple[str, ...] = ()  # the setters (sim.writer); a fault with after_change applies to them only

    def __init__(self, path: str) -> None:
        super(SimReader, self).__init__()
        self.path = path
        self.state: Any = None
        self._models = {}
        self._profiles = {}

    # -- plumbing --------------------------------------------------------------------------------
    def lock_file(self) -> str:
        return lock_path(self.path)

    def locked(self) -> None:
        """The host lock was just taken: read the state again (another run may have changed it)."""
        if self.state is not None:
            self.state = load_state(self.path)
            self.cache.clear()

    def _mutation(self):
        """Context of one mutating call: the host lock held, the state fresh."""
        return _Mutation(self)

    def _save(self):
        save_state(self.path, self.state)

    def sleep(self, seconds: float) -> None:
        """Backoff between retries (``nvml.retry``): the simulator records the wait and does not wait."""
        self.slept = getattr(self, "slept", []) + [seconds]

    @staticmethod
    def _matching_fault(faults, call, gpu):
        for i, f in enumerate(faults):
            if f.get("call") != call:
                continue
            if f.get("gpu") is not None and gpu is not None and int(f["gpu"]) != gpu:
                continue
            if f.get("gpu") is not None and gpu is None and call not in ("nvmlInit",):
                continue
            count = f.get("count")
            if count is not None and int(count) <= 0:
                continue
            return i, f
        return None, None

    def _random_fault(self, call):
        """Seeded random faults hit mutating calls only: see ``sim.writer``."""

    def _fault(self, call, gpu=None):
        faults = self.state.get("faults")
        i, f = self._matching_fault(faults, call, gpu) if faults else (None, None)
        if f is None:
            self._random_fault(call)
            return
        code = error_code(f.get("error", "NVML_ERROR_UNKNOWN"))
        if f.get("count") is not None:
            # a counted fault is used up: change the count under the lock, in the state as it is now
            with self._mutation():
                faults = self.state.get("faults") or []
                i, f = self._matching_fault(faults, call, gpu)
                if f is not None:
                    count = int(f["count"])
                    if count == 1:
                        faults.pop(i)
                    else:
                        f["count"] = count - 1
                    self._save()
        err = NvmlError(code, call=call, injected=True)
        if f.get("after_change") and call in self.mutating_calls:
            self._after_change_fault = err  # sim.writer raises it once the call has made its change
            return
        raise err

    def _enter(self, call, gpu=None):
        if self.state is None:
            raise NvmlError(UNINITIALIZED, call=call)
        self._fault(call, gpu)

    def _gpu(self, call, handle, mig_ok=False):
        """State dict of the GPU behind a device handle (faults and lost GPUs checked)."""
        if not isinstance(handle, DeviceHandle):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        self._enter(call, handle.gpu)
        gpus = self.state["gpus"]
        if handle.gpu < 0 or handle.gpu >= len(gpus):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        gpu = gpus[handle.gpu]
        if _health(gpu, "lost"):
            raise NvmlError(GPU_IS_LOST, call=call)
        if handle.is_mig and not mig_ok:
            raise NvmlError(NOT_SUPPORTED, call=call)
        if handle.is_mig and self._find_ci(gpu, handle.gi, handle.ci) is None:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return gpu

    def _model(self, gpu):
        key = gpu["model"]
        if key not in self._models:
            self._models[key] = gpu_catalog.find_model(key)
        return self._models[key]

    def _mig_gpu(self, call, handle):
        """GPU state for GI/CI calls: MIG-capable and MIG mode currently enabled."""
        gpu = self._gpu(call, handle)
        model = self._model(gpu)
        if not model.profiles or not gpu.get("mig_mode_current"):
            raise NvmlError(NOT_SUPPORTED, call=call)
        return gpu, model

    def _profile_by_id(self, call, model, profile_id):
        for p in model.profiles:
            if p.profile_id == profile_id:
                return p
        raise NvmlError(INVALID_ARGUMENT, call=call)

    @staticmethod
    def _find_gi(gpu, gi_id):
        for gi in gpu["gpu_instances"]:
            if gi["id"] == gi_id:
                return gi
        return None

    @staticmethod
    def _find_ci(gpu, gi_id, ci_id):
        for gi in gpu["gpu_instances"]:
            if gi["id"] == gi_id:
                for ci in gi["compute_instances"]:
                    if ci["id"] == ci_id:
                        return ci
        return None

    def _gi(self, call, gi_handle):
        if not isinstance(gi_handle, GpuInstanceHandle):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        gpu, model = self._mig_gpu(call, DeviceHandle(gi_handle.gpu))
        gi = self._find_gi(gpu, gi_handle.gi)
        if gi is None:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return gpu, model, gi

    def _ci(self, call, ci_handle):
        if not isinstance(ci_handle, ComputeInstanceHandle):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        gpu, model, gi = self._gi(call, GpuInstanceHandle(ci_handle.gpu, ci_handle.gi))
        ci = self._find_ci(gpu, ci_handle.gi, ci_handle.ci)
        if ci is None:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return gpu, model, gi, ci

    def _gi_profile(self, model, gi):
        for p in model.profiles:
            if p.profile_id == gi["profile_id"]:
                return p
        raise GpuOpsError("simulator state: GPU instance %s has unknown profile id %s" % (gi["id"], gi["profile_id"]))

    # -- system ----------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.state = load_state(self.path)
        try:
            self._fault("nvmlInit")
        except NvmlError:
            self.state = None
            raise

    def nvmlInitWithFlags(self, flags: int = 0) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.state = None

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.state.get("driver_version") or DEFAULT_DRIVER

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return int(self.state.get("cuda_driver_version") or cuda_for_driver(self.state.get("driver_version")))

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return int(self.state.get("cuda_driver_version") or cuda_for_driver(self.state.get("driver_version")))

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        major = gpu_catalog.version_tuple(self.state.get("driver_version") or DEFAULT_DRIVER)[0]
        return "%d.%s" % (major // 10 + 1 if major < 100 else 12, self.state.get("driver_version") or DEFAULT_DRIVER)

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._enter("nvmlSystemGetProcessName")
        for gpu in self.state["gpus"]:
            for p in gpu.get("processes", []):
                if int(p["pid"]) == int(pid):
                    return p.get("name") or "python"
        raise NvmlError(NOT_FOUND, call="nvmlSystemGetProcessName")

    # -- devices ---------------------------------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.state["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._enter("nvmlDeviceGetHandleByIndex", index)
        if not isinstance(index, int) or index < 0 or index >= len(self.state["gpus"]):
            raise NvmlError(INVALID_ARGUMENT, call="nvmlDeviceGetHandleByIndex")
        return DeviceHandle(index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Any:
        self._enter("nvmlDeviceGetHandleByUUID")
        uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        for gpu in self.state["gpus"]:
            if gpu["uuid"] == uuid:
                return DeviceHandle(gpu["index"])
            for gi in gpu["gpu_instances"]:
                for ci in gi["compute_instances"]:
                    if ci.get("uuid") == uuid:
                        return DeviceHandle(gpu["index"], gi["id"], ci["id"])
        raise NvmlError(NOT_FOUND, call="nvmlDeviceGetHandleByUUID")

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: Any) -> DeviceHandle:
        self._enter("nvmlDeviceGetHandleByPciBusId")
        bus_id = (bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)).lower()
        for gpu in self.state["gpus"]:
            if gpu["pci_bus_id"].lower() == bus_id or gpu["pci_bus_id"].lower()[4:] == bus_id:
                return DeviceHandle(gpu["index"])
        raise NvmlError(NOT_FOUND, call="nvmlDeviceGetHandleByPciBusId")

    def nvmlDeviceGetName(self, handle: Any) -> str:
        gpu = self._gpu("nvmlDeviceGetName", handle, mig_ok=True)
        if handle.is_mig:
            model = self._model(gpu)
            gi = self._find_gi(gpu, handle.gi)
            ci = self._find_ci(gpu, handle.gi, handle.ci)
            return "%s MIG %s" % (gpu["name"], self._ci_name(model, self._gi_profile(model, gi), ci["slices"]))
        return gpu["name"]

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        gpu = self._gpu("nvmlDeviceGetUUID", handle, mig_ok=True)
        if handle.is_mig:
            return self._find_ci(gpu, handle.gi, handle.ci)["uuid"]
        return gpu["uuid"]

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        gpu = self._gpu("nvmlDeviceGetSerial", handle)
        return gpu.get("serial", "")

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetPciInfo", handle)
        dev = int(gpu["pci_device_id"], 16)
        bus_id = gpu["pci_bus_id"]
        domain, bus, rest = bus_id.split(":")
        return Obj(
            busId=bus_id.encode(), busIdLegacy=bus_id[4:].encode(), domain=int(domain, 16), bus=int(bus, 16),
            device=int(rest.split(".")[0], 16), pciDeviceId=(dev << 16) | gpu_catalog.NVIDIA_VENDOR_ID,
            pciSubSystemId=(0x1463 << 16) | gpu_catalog.NVIDIA_VENDOR_ID,
        )

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> Any:
        gpu = self._gpu("nvmlDeviceGetMemoryInfo", handle, mig_ok=True)
        if handle.is_mig:
            model = self._model(gpu)
            gi = self._find_gi(gpu, handle.gi)
            total = self._gi_profile(model, gi).memory_mib * 1024 * 1024
            used = 0
        else:
            total = int(gpu["memory_total_mib"]) * 1024 * 1024
            used = 0 if gpu.get("mig_mode_current") else 512 * 1024 * 1024
        used += sum(int(p.get("used_memory_mib", 0)) for p in self._procs(gpu, handle)) * 1024 * 1024
        used = min(used, total)
        return Obj(total=total, free=total - used, used=used)

    # -- MIG mode --------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle: Any) -> List[int]:
        gpu = self._gpu("nvmlDeviceGetMigMode", handle)
        if not self._model(gpu).profiles:
            raise NvmlError(NOT_SUPPORTED, call="nvmlDeviceGetMigMode")
        return [int(gpu.get("mig_mode_current", 0)), int(gpu.get("mig_mode_pending", 0))]

    # -- processes -------------------------------------------------------------------------------
    def _procs(self, gpu, handle):
        procs = gpu.get("processes", [])
        if handle.is_mig:
            procs = [p for p in procs if _in_instance(p, handle)]
        return procs

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> List[Any]:
        gpu = self._gpu("nvmlDeviceGetComputeRunningProcesses", handle, mig_ok=True)
        out = []
        for p in self._procs(gpu, handle):
            gi = p.get("gpu_instance_id")
            ci = p.get("compute_instance_id")
            if gi is not None and ci is None:
                g = self._find_gi(gpu, gi)
                cis = g["compute_instances"] if g else []
                ci = cis[0]["id"] if cis else None
            out.append(Obj(
                pid=int(p["pid"]), usedGpuMemory=int(p.get("used_memory_mib", 0)) * 1024 * 1024,
                gpuInstanceId=VALUE_NOT_AVAILABLE_UINT if gi is None else gi,
                computeInstanceId=VALUE_NOT_AVAILABLE_UINT if ci is None else ci,
            ))
        return out

    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses

    # -- health ----------------------------------------------------------------------------------
    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        call = "nvmlDeviceGetTotalEccErrors"
        gpu = self._gpu(call, handle)
        if gpu["model"] in _NO_ECC or not gpu.get("settings", {}).get("ecc_mode_current", 1):
            raise NvmlError(NOT_SUPPORTED, call=call)
        if errorType not in (0, 1) or counterType not in (0, 1):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        key = "ecc_%s_%s" % ("volatile" if counterType == 0 else "aggregate",
                             "corrected" if errorType == 0 else "uncorrected")
        return int(_health(gpu, key))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        return 1 if _health(gpu, "retired_pages_pending") else 0

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> Tuple[int, int, int, int]:
        call = "nvmlDeviceGetRemappedRows"
        gpu = self._gpu(call, handle)
        if gpu["model"] in _NO_ECC:
            raise NvmlError(NOT_SUPPORTED, call=call)
        failure = 1 if _health(gpu, "remapped_rows_failure") else 0
        pending = 1 if _health(gpu, "remapped_rows_pending") else 0
        return (0, int(_health(gpu, "ecc_aggregate_uncorrected")), pending, failure)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int = 0) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperature", handle)
        if sensor != 0:
            raise NvmlError(INVALID_ARGUMENT, call="nvmlDeviceGetTemperature")
        return int(_health(gpu, "temperature_c"))

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetPowerUsage", handle)
        return int(round(float(_health(gpu, "power_w")) * 1000))

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        return Obj(gpu=int(_health(gpu, "utilization_gpu_pct")), memory=int(_health(gpu, "utilization_memory_pct")))

    # -- settings (gpu_settings) -----------------------------------------------------------------
    def _settings(self, call, handle):
        gpu = self._gpu(call, handle)
        return gpu, gpu.setdefault("settings", {})

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        gpu, s = self._settings("nvmlDeviceGetPowerManagementLimit", handle)
        return int(s.get("power_limit_mw", _POWER.get(gpu["model"], (300, 100))[0] * 1000))

    nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetPowerManagementLimit

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetPowerManagementDefaultLimit", handle)
        return _POWER.get(gpu["model"], (300, 100))[0] * 1000

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: Any) -> List[int]:
        gpu = self._gpu("nvmlDeviceGetPowerManagementLimitConstraints", handle)
        default, minimum = _POWER.get(gpu["model"], (300, 100))
        return [minimum * 1000, default * 1000]

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        gpu, s = self._settings("nvmlDeviceGetPersistenceMode", handle)
        return int(s.get("persistence_mode", 0))

    def nvmlDeviceGetComputeMode(self, handle: Any) -> int:
        gpu, s = self._settings("nvmlDeviceGetComputeMode", handle)
        return int(s.get("compute_mode", 0))

    def nvmlDeviceGetEccMode(self, handle: Any) -> List[int]:
        call = "nvmlDeviceGetEccMode"
        gpu, s = self._settings(call, handle)
        if gpu["model"] in _NO_ECC:
            raise NvmlError(NOT_SUPPORTED, call=call)
        return [int(s.get("ecc_mode_current", 1)), int(s.get("ecc_mode_pending", 1))]

    def _clocks(self, call, handle):
        gpu, s = self._settings(call, handle)
        clocks = _CLOCKS.get(gpu["model"])
        if clocks is None:
            raise NvmlError(NOT_SUPPORTED, call=call)
        return gpu, s, clocks

    @staticmethod
    def _graphics_steps(clocks):
        return list(range(clocks[1], 209, -15))

    def nvmlDeviceGetApplicationsClock(self, handle: Any, clock_type: int) -> int:
        call = "nvmlDeviceGetApplicationsClock"
        gpu, s, clocks = self._clocks(call, handle)
        current = s.get("applications_clocks") or {"memory": clocks[0], "graphics": clocks[2]}
        if clock_type in (0, 1):
            return int(current["graphics"])
        if clock_type == 2:
            return int(current["memory"])
        raise NvmlError(INVALID_ARGUMENT, call=call)

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: Any, clock_type: int) -> int:
        call = "nvmlDeviceGetDefaultApplicationsClock"
        gpu, s, clocks = self._clocks(call, handle)
        if clock_type in (0, 1):
            return clocks[2]
        if clock_type == 2:
            return clocks[0]
        raise NvmlError(INVALID_ARGUMENT, call=call)

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: Any) -> List[int]:
        gpu, s, clocks = self._clocks("nvmlDeviceGetSupportedMemoryClocks", handle)
        return [clocks[0]]

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: Any, memoryClockMHz: int) -> List[int]:
        call = "nvmlDeviceGetSupportedGraphicsClocks"
        gpu, s, clocks = self._clocks(call, handle)
        if memoryClockMHz != clocks[0]:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return self._graphics_steps(clocks)


class _Mutation(object):
    def __init__(self, backend):
        self.backend = backend
        self.lock = backend.host_lock()

    def __enter__(self):
        if self.lock.acquire():
            self.backend.locked()
        return self

    def __exit__(self, *exc):
        self.lock.release()
        return False


def _in_instance(proc, handle):
    """Whether a simulated process runs in the MIG device that `handle` names."""
    if proc.get("gpu_instance_id") != handle.gi:
        return False
    return proc.get("compute_instance_id") in (None, handle.ci)
