# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML backend interface, shared by the pynvml backend and the simulator, and the host lock.

A backend's methods carry pynvml's function names. Calls that take C arrays in pynvml have a Python
signature on both backends:

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
names who holds the lock. The lock is reentrant within one backend. ``lock_unless_check(backend,
what, check_mode)`` is that lock for a change and nothing in check mode (which changes nothing).
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
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

ENV_LOCK = "GPUOPS_NVML_LOCK"
ENV_LOCK_TIMEOUT = "GPUOPS_NVML_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0


def default_run_command(args: List[str]) -> Tuple[int, str, str]:
    """(rc, stdout, stderr) like AnsibleModule.run_command; used when no module is around."""
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    except OSError as e:
        return 127, "", str(e)
    out, err = proc.communicate()
    return proc.returncode, out, err


def lock_timeout() -> float:
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


def host_lock_path(run_dir: str = "/run") -> str:
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

    def __init__(self, path: str, what: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self.path = path
        self.what = what
        self.timeout = timeout
        self.depth = 0
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
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

    def acquire(self) -> bool:
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

    def release(self) -> None:
        import fcntl  # pylint: disable=import-outside-toplevel
        if not self.depth:
            return
        self.depth -= 1
        if self.depth:
            return
        fd, self._fd = self._fd, None
        if fd is None:
            return
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
def host_lock(backend: Backend, what: Optional[str] = None) -> Iterator[Backend]:
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


@contextmanager
def lock_unless_check(backend: Any, what: Optional[str] = None, check_mode: bool = False) -> Iterator[Any]:
    """``host_lock(backend, what)`` around a change; in check mode (nothing changes) no lock is taken."""
    if check_mode:
        yield backend
        return
    with host_lock(backend, what):
        yield backend


class Placement(object):
    """A GPU or compute instance placement: ``start`` and ``size`` in slices."""

    __slots__ = ("start", "size")

    def __init__(self, start: int, size: int) -> None:
        self.start = start
        self.size = size

    def __repr__(self):
        return "Placement(start=%d, size=%d)" % (self.start, self.size)


class Backend(object):
    """What every backend offers besides pynvml's function names: ``kind``, a ``cache`` dict for
    callers, the host lock, ``locked()`` (called once the lock is taken), ``reset_gpu(index)`` and ``sleep(seconds)``
    (the backoff between retries of a transient error)."""

    kind: Optional[str] = None
    # and pynvml's functions (declared for type checkers; the backends define them or forward them to pynvml)
    nvmlInit: Callable[[], None]
    nvmlShutdown: Callable[[], None]

    def __init__(self) -> None:
        self.cache: Dict[str, Any] = {}
        self._lock: Optional[HostLock] = None

    def lock_file(self) -> str:
        raise NotImplementedError

    def host_lock(self, what: Optional[str] = None) -> HostLock:
        if self._lock is None:
            self._lock = HostLock(self.lock_file(), what=what)
        elif what and not self._lock.held:
            self._lock.what = what
        return self._lock

    def locked(self) -> None:
        """Called once the host lock is taken: another run may have changed the GPUs."""
        self.cache.clear()

    def reset_gpu(self, index: int) -> None:
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        """The wait between two tries of a transient NVML error (``nvml.retry``); the simulator does not wait."""
        time.sleep(seconds)
