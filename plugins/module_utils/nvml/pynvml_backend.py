# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real NVML backend through nvidia-ml-py's ``pynvml``."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.backend import Backend, Placement, default_run_command, host_lock_path
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import ENV_SIMULATOR, FUNCTION_NOT_FOUND, IN_USE, UNKNOWN, NvmlError, placement_of, text


class RealBackend(Backend):
    """The real NVML through pynvml; every pynvml.NVMLError becomes NvmlError."""

    kind = "nvml"

    def __init__(self, pynvml_module: Any, run_command: Optional[Callable[..., Any]] = None) -> None:
        super(RealBackend, self).__init__()
        self._nv = pynvml_module
        self._run_command = run_command or default_run_command

    def lock_file(self) -> str:
        return host_lock_path()

    def _translate(self, name, func):
        nv = self._nv

        def call(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except nv.NVMLError as e:
                raise NvmlError(getattr(e, "value", UNKNOWN), call=name)
        call.__name__ = name
        return call

    def __getattr__(self, name):
        if not name.startswith("nvml"):
            raise AttributeError(name)
        func = getattr(self._nv, name, None)
        if func is None:
            raise NvmlError(FUNCTION_NOT_FOUND, call=name,
                            msg="%s is not available in the installed nvidia-ml-py" % name)
        wrapped = self._translate(name, func)
        setattr(self, name, wrapped)
        return wrapped

    def _guard(self, name, func, *args):
        try:
            return func(*args)
        except self._nv.NVMLError as e:
            raise NvmlError(getattr(e, "value", UNKNOWN), call=name)

    # -- calls that take C arrays in pynvml ------------------------------------------------------
    def _array_call(self, name, fname, handle, profile_id, item_type, size):
        nv = self._nv
        import ctypes
        arr = (item_type * size)()
        count = ctypes.c_uint(size)
        self._guard(name, getattr(nv, fname), handle, profile_id, arr, ctypes.byref(count))
        return [arr[i] for i in range(count.value)]

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, device: str, profileId: int) -> List[Any]:
        items = self._array_call("nvmlDeviceGetGpuInstancePossiblePlacements",
                                 "nvmlDeviceGetGpuInstancePossiblePlacements", device, profileId,
                                 self._nv.c_nvmlGpuInstancePlacement_t, 16)
        return [Placement(p.start, p.size) for p in items]

    def nvmlDeviceGetGpuInstances(self, device: Any, profileId: int) -> List[Any]:
        return self._array_call("nvmlDeviceGetGpuInstances", "nvmlDeviceGetGpuInstances", device, profileId,
                                self._nv.c_nvmlGpuInstance_t, 16)

    def nvmlGpuInstanceGetComputeInstancePossiblePlacements(self, gpuInstance: Any, profileId: int) -> List[Placement]:
        items = self._array_call("nvmlGpuInstanceGetComputeInstancePossiblePlacements",
                                 "nvmlGpuInstanceGetComputeInstancePossiblePlacements", gpuInstance, profileId,
                                 self._nv.c_nvmlComputeInstancePlacement_t, 16)
        return [Placement(p.start, p.size) for p in items]

    def nvmlGpuInstanceGetComputeInstances(self, gpuInstance: Any, profileId: int) -> List[Any]:
        return self._array_call("nvmlGpuInstanceGetComputeInstances", "nvmlGpuInstanceGetComputeInstances",
                                gpuInstance, profileId, self._nv.c_nvmlComputeInstance_t, 16)

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, device: str, profileId: int, placement: Dict[str, Any]) -> str:
        import ctypes
        start, size = placement_of(placement)
        c_placement = self._nv.c_nvmlGpuInstancePlacement_t()
        c_placement.start = start
        c_placement.size = size
        return self._guard("nvmlDeviceCreateGpuInstanceWithPlacement",
                           self._nv.nvmlDeviceCreateGpuInstanceWithPlacement, device, profileId,
                           ctypes.byref(c_placement))

    # -- GPU reset -------------------------------------------------------------------------------
    def reset_gpu(self, index: int) -> None:
        """``nvidia-smi -r -i <bus id>``; refused (IN_USE) while compute processes run on the GPU."""
        handle = self.nvmlDeviceGetHandleByIndex(index)
        procs = self.nvmlDeviceGetComputeRunningProcesses(handle)
        if procs:
            raise NvmlError(IN_USE, call="reset_gpu", msg=(
                "GPU %d cannot be reset: processes are running on it (PIDs %s)"
                % (index, ", ".join(str(p.pid) for p in procs))), pids=[p.pid for p in procs])
        bus_id = text(self.nvmlDeviceGetPciInfo(handle).busId)
        cmd = ["nvidia-smi", "-r", "-i", bus_id]
        rc, out, err = self._run_command(cmd)
        if rc != 0:
            raise GpuOpsError("GPU reset failed: '%s' exited %s: %s" % (" ".join(cmd), rc, (err or out).strip()),
                              rc=rc, stdout=out, stderr=err, cmd=cmd)
        self.cache.clear()


def import_pynvml() -> Any:
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise GpuOpsError(
            "the Python package nvidia-ml-py (module pynvml) is required to talk to NVML on this host and is "
            "not importable by %s: install it (pip install nvidia-ml-py) or point the 'simulator' option / $%s "
            "at a simulator state file (%s)" % (_python(), ENV_SIMULATOR, e),
            nvml_backend="nvml",
        )
    return pynvml


def _python():
    import sys
    return sys.executable or "python"
