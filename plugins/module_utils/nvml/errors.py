# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML return codes and ``NvmlError``: below both backends (pynvml and the simulator).

Every NVML failure, on either backend, is an ``NvmlError`` (a ``GpuOpsError``) whose ``.value`` is
the NVML return code, the same numbers as pynvml, so callers handle both backends the same way.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

ENV_SIMULATOR = "GPUOPS_NVML_SIMULATOR"

# NVML return codes (nvml.h; identical to pynvml's NVML_ERROR_* values).
NVML_SUCCESS = 0
ERROR_CODES = {
    "NVML_ERROR_UNINITIALIZED": 1,
    "NVML_ERROR_INVALID_ARGUMENT": 2,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_ALREADY_INITIALIZED": 5,
    "NVML_ERROR_NOT_FOUND": 6,
    "NVML_ERROR_INSUFFICIENT_SIZE": 7,
    "NVML_ERROR_INSUFFICIENT_POWER": 8,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_TIMEOUT": 10,
    "NVML_ERROR_IRQ_ISSUE": 11,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_CORRUPTED_INFOROM": 14,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_RESET_REQUIRED": 16,
    "NVML_ERROR_OPERATING_SYSTEM": 17,
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": 18,
    "NVML_ERROR_IN_USE": 19,
    "NVML_ERROR_MEMORY": 20,
    "NVML_ERROR_NO_DATA": 21,
    "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED": 22,
    "NVML_ERROR_INSUFFICIENT_RESOURCES": 23,
    "NVML_ERROR_FREQ_NOT_SUPPORTED": 24,
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH": 25,
    "NVML_ERROR_DEPRECATED": 26,
    "NVML_ERROR_NOT_READY": 27,
    "NVML_ERROR_GPU_NOT_FOUND": 28,
    "NVML_ERROR_INVALID_STATE": 29,
    "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED": 30,
    "NVML_ERROR_UNKNOWN": 999,
}
ERROR_NAMES = dict((v, k) for k, v in ERROR_CODES.items())

UNINITIALIZED = 1
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
RESET_REQUIRED = 16
LIB_RM_VERSION_MISMATCH = 18
IN_USE = 19
INSUFFICIENT_RESOURCES = 23
INVALID_STATE = 29
UNKNOWN = 999

# pynvml's NVML_VALUE_NOT_AVAILABLE for unsigned ints: "no GPU/compute instance" in process info.
VALUE_NOT_AVAILABLE_UINT = 0xFFFFFFFF

_DESCRIPTIONS = {
    1: "NVML was not initialized",
    2: "invalid argument",
    3: "not supported on this device",
    4: "insufficient permissions",
    6: "not found",
    9: "NVIDIA driver not loaded",
    12: "NVML shared library not found",
    13: "function not found in the NVML library (driver too old)",
    15: "the GPU is lost (fell off the bus)",
    16: "the GPU requires a reset",
    18: "NVML library / kernel driver version mismatch",
    19: "in use",
    23: "insufficient resources",
    29: "invalid state",
    999: "unknown error",
}

_HINTS = {
    NO_PERMISSION: "run as root (become: true)",
    GPU_IS_LOST: "the GPU needs a reset or the host a reboot; check dmesg for Xid errors",
    LIB_RM_VERSION_MISMATCH: "the driver was upgraded without reloading the kernel module: reboot the host",
}


def error_code(name: Union[str, int]) -> int:
    """NVML return code for ``NVML_ERROR_IN_USE``, ``IN_USE`` or ``19``; GpuOpsError otherwise."""
    if isinstance(name, int) and not isinstance(name, bool):
        if name in ERROR_NAMES:
            return name
    else:
        text = str(name).strip().upper()
        if text.isdigit() and int(text) in ERROR_NAMES:
            return int(text)
        if not text.startswith("NVML_ERROR_"):
            text = "NVML_ERROR_" + text
        if text in ERROR_CODES:
            return ERROR_CODES[text]
    raise GpuOpsError(
        "unknown NVML error %r; valid names: %s" % (name, ", ".join(sorted(ERROR_CODES))),
        valid_errors=sorted(ERROR_CODES),
    )


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, "NVML_ERROR_%s" % code)


class NvmlError(GpuOpsError):
    """An NVML call failed. ``value`` is the NVML return code (pynvml's numbers)."""

    def __init__(self, value: int, call: Optional[str] = None, msg: Optional[str] = None, **details: Any) -> None:
        self.value = value
        self.call = call
        name = error_name(value)
        if msg is None:
            desc = _DESCRIPTIONS.get(value, name)
            msg = "%s failed: %s (%s)" % (call or "NVML call", name, desc)
            if value in _HINTS:
                msg += "; " + _HINTS[value]
        details.setdefault("nvml_error", name)
        details.setdefault("nvml_error_code", value)
        if call:
            details.setdefault("nvml_call", call)
        super(NvmlError, self).__init__(msg, **details)

    @property
    def name(self) -> str:
        return error_name(self.value)

    def __reduce__(self):
        return (NvmlError, (self.value, self.call, self.msg))


def init_failure(err: NvmlError, backend: Optional[str] = "nvml") -> GpuOpsError:
    """Turn an NvmlError from nvmlInit into the one clear GpuOpsError for that situation."""
    code = err.value
    if code == LIBRARY_NOT_FOUND:
        msg = ("NVML library libnvidia-ml.so.1 not found (NVML_ERROR_LIBRARY_NOT_FOUND): the NVIDIA driver is "
               "not installed on this host. Install the driver (its libnvidia-ml.so.1 comes with it), or point "
               "the 'simulator' option / $%s at a simulator state file" % ENV_SIMULATOR)
    elif code == DRIVER_NOT_LOADED:
        msg = ("NVIDIA driver not loaded (NVML_ERROR_DRIVER_NOT_LOADED): libnvidia-ml is installed but the "
               "nvidia kernel module is not running. Check 'lsmod | grep nvidia' and dmesg; load it with "
               "'modprobe nvidia' or reboot after installing the driver")
    elif code == NO_PERMISSION:
        msg = ("no permission to use NVML (NVML_ERROR_NO_PERMISSION): run the task as root (become: true) or "
               "give this user access to /dev/nvidia*")
    elif code == LIB_RM_VERSION_MISMATCH:
        msg = ("NVML library and kernel driver versions differ (NVML_ERROR_LIB_RM_VERSION_MISMATCH): the driver "
               "was upgraded without reloading the kernel module; reboot the host")
    else:
        msg = "NVML initialization failed: %s (%s)" % (err.name, _DESCRIPTIONS.get(code, "error %s" % code))
    return GpuOpsError(msg, nvml_error=err.name, nvml_error_code=code, nvml_backend=backend)


def text(value: Any) -> Any:
    """pynvml returns bytes for char-array struct fields; give str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    return value


def placement_of(placement: Any) -> Tuple[int, int]:
    """(start, size) from a placement object, a dict or a tuple."""
    if isinstance(placement, dict):
        return int(placement["start"]), int(placement["size"])
    if isinstance(placement, (tuple, list)):
        return int(placement[0]), int(placement[1])
    return int(placement.start), int(placement.size)
