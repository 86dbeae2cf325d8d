# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML access layer: one context manager, two backends.

``open_nvml(simulator=None, run_command=None)`` yields a backend whose methods carry pynvml's
function names. With ``simulator`` (a path; default ``$GPUOPS_NVML_SIMULATOR``) it is the simulator
of ``nvml_sim``, otherwise the real NVML through nvidia-ml-py's ``pynvml``.

Both backends raise ``NvmlError`` (a ``GpuOpsError`` whose ``.value`` is the NVML return code,
the same numbers as pynvml) so callers handle them the same way.

Calls that take C arrays in pynvml have a Python signature here, on both backends:

* ``nvmlDeviceGetGpuInstancePossiblePlacements(device, profileId) -> [placement]``
* ``nvmlDeviceGetGpuInstances(device, profileId) -> [gpu instance handle]``
* ``nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, profileId) -> [placement]``
* ``nvmlGpuInstanceGetComputeInstances(gi, profileId) -> [compute instance handle]``
* ``nvmlDeviceCreateGpuInstanceWithPlacement(device, profileId, placement)``: ``placement`` is any
  object with ``start`` and ``size`` (or a dict with those keys).

A placement has ``.start`` and ``.size`` (memory slices for GPU instances, compute slices for
compute instances).

A GPU reset is not an NVML call: ``backend.reset_gpu(index)`` runs ``nvidia-smi -r -i <bus id>``
on a real host (refused with NVML_ERROR_IN_USE while processes run) and is simulated by the
simulator.

Mutating work is serialized per host by ``host_lock(backend, what)``: an exclusive ``fcntl`` lock
on a lock file (the simulator: ``<state file>.lock``; the real NVML: ``/run/gpuops/nvml.lock``, or
``$GPUOPS_NVML_LOCK``), waited for up to ``$GPUOPS_NVML_LOCK_TIMEOUT`` seconds (default 300). The
holder writes its pid, host, start time and what it does into the file, so a run that times out
names who holds the lock. The lock is reentrant within one backend.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

from ansible_collections.gpuops.k8s.plugins.module_utils.errors import GpuOpsError

ENV_SIMULATOR = "GPUOPS_NVML_SIMULATOR"
ENV_LOCK = "GPUOPS_NVML_LOCK"
ENV_LOCK_TIMEOUT = "GPUOPS_NVML_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0

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


def error_code(name):
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


def error_name(code):
    return ERROR_NAMES.get(code, "NVML_ERROR_%s" % code)


class NvmlError(GpuOpsError):
    """An NVML call failed. ``value`` is the NVML return code (pynvml's numbers)."""

    def __init__(self, value, call=None, msg=None, **details):
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
    def name(self):
        return error_name(self.value)

    def __reduce__(self):
        return (NvmlError, (self.value, self.call, self.msg))


def init_failure(err, backend="nvml"):
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


def text(value):
    """pynvml returns bytes for char-array struct fields; give str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    return value


def placement_of(placement):
    """(start, size) from a placement object, a dict or a tuple."""
    if isinstance(placement, dict):
        return int(placement["start"]), int(placement["size"])
    if isinstance(placement, (tuple, list)):
        return int(placement[0]), int(placement[1])
    return int(placement.start), int(placement.size)


def default_run_command(args):
    """(rc, stdout, stderr) like AnsibleModule.run_command; used when no module is around."""
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    except OSError as e:
        return 127, "", str(e)
    out, err = proc.communicate()
    return proc.returncode, out, err


def lock_timeout():
    """Seconds to wait for the host lock ($GPUOPS_NVML_LOCK_TIMEOUT, default 300)."""
    raw = os.environ.get(ENV_LOCK_TIMEOUT)
    if raw is None or raw.strip() == "":
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise GpuOpsError("$%s must be a number of seconds (0 or more), got %r" % (ENV_LOCK_TIMEOUT, raw))
    return value


def host_lock_path(run_dir="/run"):
    """The real backend's host lock: $GPUOPS_NVML_LOCK, else <run_dir>/gpuops/nvml.lock when that
    directory can be created and written (root), else gpuops-nvml-<uid>.lock in the temp directory."""
    if os.environ.get(ENV_LOCK):
        return os.environ[ENV_LOCK]
    directory = os.path.join(run_dir, "gpuops")
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        if os.access(directory, os.W_OK):
            return os.path.join(directory, "nvml.lock")
    except OSError:
        pass
    return os.path.join(tempfile.gettempdir(), "gpuops-nvml-%d.lock" % os.getuid())


class HostLock(object):
    """An exclusive, reentrant fcntl lock on ``path``; the holder's pid and ``what`` are written into it."""

    def __init__(self, path, what=None, timeout=None):
        self.path = path
        self.what = what
        self.timeout = timeout
        self.depth = 0
        self._fd = None

    @property
    def held(self):
        return self.depth > 0

    def _holder(self):
        try:
            with open(self.path) as f:
                info = json.loads(f.read() or "{}")
        except (IOError, OSError, ValueError):
            return "an unknown process"
        if not isinstance(info, dict):
            return "an unknown process"
        text = "pid %s (parent %s) on %s" % (info.get("pid", "?"), info.get("ppid", "?"), info.get("host", "?"))
        if info.get("what"):
            text += " (%s)" % info["what"]
        if info.get("since"):
            text += " since %s" % info["since"]
        return text

    def acquire(self):
        """Take the lock (True) or, when this object holds it already, count one level more (False)."""
        import fcntl  # pylint: disable=import-outside-toplevel
        if self.depth:
            self.depth += 1
            return False
        timeout = lock_timeout() if self.timeout is None else self.timeout
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise GpuOpsError("cannot open the NVML host lock %s: %s" % (self.path, e), lock_file=self.path)
        deadline = time.time() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except (IOError, OSError):
                if time.time() >= deadline:
                    os.close(fd)
                    holder = self._holder()
                    raise GpuOpsError(
                        "another run holds the NVML host lock %s: %s; waited %s s (set $%s to wait longer); "
                        "nothing was changed" % (self.path, holder, timeout, ENV_LOCK_TIMEOUT),
                        lock_file=self.path, lock_holder=holder, changed=False)
                time.sleep(0.02)
        info = {"pid": os.getpid(), "ppid": os.getppid(), "host": socket.gethostname(), "what": self.what or _command_line(),
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, 0)
        os.write(fd, json.dumps(info, sort_keys=True).encode("utf-8") + b"\n")
        self._fd = fd
        self.depth = 1
        return True

    def release(self):
        import fcntl  # pylint: disable=import-outside-toplevel
        if not self.depth:
            return
        self.depth -= 1
        if self.depth:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
        return False


def _command_line():
    return " ".join(sys.argv[:3]) or "python"


@contextmanager
def host_lock(backend, what=None):
    """Serialize mutating NVML work on this host: hold the backend's host lock (reentrant).

    On the simulator the state is read again once the lock is held, so the plan is made from what
    other runs left."""
    lock = backend.host_lock(what)
    fresh = lock.acquire()
    try:
        if fresh:
            backend.locked()
        yield backend
    finally:
        lock.release()


class _Placement(object):
    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start = start
        self.size = size

    def __repr__(self):
        return "Placement(start=%d, size=%d)" % (self.start, self.size)


class RealBackend(object):
    """The real NVML through pynvml; every pynvml.NVMLError becomes NvmlError."""

    kind = "nvml"

    def __init__(self, pynvml_module, run_command=None):
        self._nv = pynvml_module
        self._run_command = run_command or default_run_command
        self.cache = {}
        self._lock = None

    def host_lock(self, what=None):
        if self._lock is None:
            self._lock = HostLock(host_lock_path(), what=what)
        elif what and not self._lock.held:
            self._lock.what = what
        return self._lock

    def locked(self):
        """Called once the host lock is taken: another run may have changed the GPUs."""
        self.cache.clear()

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

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, device, profileId):
        items = self._array_call("nvmlDeviceGetGpuInstancePossiblePlacements",
                                 "nvmlDeviceGetGpuInstancePossiblePlacements", device, profileId,
                                 self._nv.c_nvmlGpuInstancePlacement_t, 16)
        return [_Placement(p.start, p.size) for p in items]

    def nvmlDeviceGetGpuInstances(self, device, profileId):
        return self._array_call("nvmlDeviceGetGpuInstances", "nvmlDeviceGetGpuInstances", device, profileId,
                                self._nv.c_nvmlGpuInstance_t, 16)

    def nvmlGpuInstanceGetComputeInstancePossiblePlacements(self, gpuInstance, profileId):
        items = self._array_call("nvmlGpuInstanceGetComputeInstancePossiblePlacements",
                                 "nvmlGpuInstanceGetComputeInstancePossiblePlacements", gpuInstance, profileId,
                                 self._nv.c_nvmlComputeInstancePlacement_t, 16)
        return [_Placement(p.start, p.size) for p in items]

    def nvmlGpuInstanceGetComputeInstances(self, gpuInstance, profileId):
        return self._array_call("nvmlGpuInstanceGetComputeInstances", "nvmlGpuInstanceGetComputeInstances",
                                gpuInstance, profileId, self._nv.c_nvmlComputeInstance_t, 16)

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, device, profileId, placement):
        import ctypes
        start, size = placement_of(placement)
        c_placement = self._nv.c_nvmlGpuInstancePlacement_t()
        c_placement.start = start
        c_placement.size = size
        return self._guard("nvmlDeviceCreateGpuInstanceWithPlacement",
                           self._nv.nvmlDeviceCreateGpuInstanceWithPlacement, device, profileId,
                           ctypes.byref(c_placement))

    # -- GPU reset -------------------------------------------------------------------------------
    def reset_gpu(self, index):
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


def _import_pynvml():
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


def simulator_path(simulator=None):
    """The simulator state file to use, or None for the real NVML."""
    return simulator or os.environ.get(ENV_SIMULATOR) or None


def open_backend(simulator=None, run_command=None):
    """Build (not initialize) the backend."""
    path = simulator_path(simulator)
    if path:
        from ansible_collections.gpuops.k8s.plugins.module_utils import nvml_sim
        return nvml_sim.SimBackend(path)
    return RealBackend(_import_pynvml(), run_command=run_command)


@contextmanager
def open_nvml(simulator=None, run_command=None):
    """Initialize NVML (real or simulated), yield the backend, shut NVML down.

    ``run_command`` (``AnsibleModule.run_command``-like callable) runs nvidia-smi for GPU resets on
    real hosts. Initialization failures become one clear GpuOpsError each.
    """
    backend = open_backend(simulator, run_command)
    try:
        backend.nvmlInit()
    except NvmlError as e:
        raise init_failure(e, backend.kind)
    try:
        yield backend
    finally:
        try:
            backend.nvmlShutdown()
        except NvmlError:
            pass
