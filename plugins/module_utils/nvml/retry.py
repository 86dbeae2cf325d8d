# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bounded retries of transient NVML errors, with exponential backoff, inside one run.

Which return codes are transient (docs/fleet-operations.md, "Transient NVML errors", gives the sources):

* ``NVML_ERROR_IN_USE`` (19), "an operation cannot be performed because the GPU is currently in use":
  nvml.h on ``nvmlDeviceSetMigMode`` says the caller "is expected to idle the device and retry"; a process
  that is still releasing a GPU instance gives it on a destroy. Not retried when the pre-check itself saw
  the processes (the error then carries ``pids``): a running workload does not go away in seconds.
* ``NVML_ERROR_TIMEOUT`` (10): a wait in the driver ran out; nothing says the device is bad.
* ``NVML_ERROR_NOT_READY`` (27), "the system is not ready for the request".

Every other code fails at once: the argument, support, permission, resource and placement errors
(INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION, INSUFFICIENT_RESOURCES, ...) give the same answer on
a retry, and GPU_IS_LOST, RESET_REQUIRED, IRQ_ISSUE and UNKNOWN ("an internal driver error") need a
person or a reset, not a second call.

``call(policy, action, settle, on_retry)`` runs ``action()``; after a transient error it waits
``policy.delay(attempt)`` with the policy's ``sleep`` (the backend's: the simulator never sleeps), then
calls ``settle()`` first, which re-reads the GPU: an error may come after the driver made the change,
so ``settle`` returns ``(True, result)`` when the change is already there (no second call) and
``(False, None)`` when the action must run again.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import NvmlError, error_code

TRANSIENT = (error_code("NVML_ERROR_IN_USE"), error_code("NVML_ERROR_TIMEOUT"), error_code("NVML_ERROR_NOT_READY"))
DEFAULT_ATTEMPTS = 3
DEFAULT_BACKOFF = 1.0
MAX_ATTEMPTS = 20


def is_transient(err: BaseException) -> bool:
    """An NVML error worth another attempt (module docstring); the pre-check's own IN_USE (with ``pids``) is not."""
    if not isinstance(err, NvmlError) or err.value not in TRANSIENT:
        return False
    return not err.details.get("pids")


class RetryPolicy(object):
    """``attempts`` tries in all (1: no retry); the wait before try n+1 is ``backoff * 2**(n-1)`` seconds."""

    def __init__(self, attempts: int = DEFAULT_ATTEMPTS, backoff: float = DEFAULT_BACKOFF,
                 sleep: Optional[Callable[[float], None]] = None) -> None:
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS:
            raise GpuOpsError("nvml_attempts must be a whole number from 1 (no retry) to %d, got %r"
                              % (MAX_ATTEMPTS, attempts))
        if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not 0 <= backoff <= 60:
            raise GpuOpsError("nvml_backoff must be a number of seconds from 0 to 60, got %r" % (backoff,))
        self.attempts = attempts
        self.backoff = float(backoff)
        self.sleep = sleep if sleep is not None else time.sleep

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        return self.backoff * (2 ** (attempt - 1))


def policy_from_params(params: Dict[str, Any], nvml: Any = None) -> RetryPolicy:
    """The policy of a module's ``nvml_attempts`` / ``nvml_backoff``; the backend's ``sleep`` (if any) waits."""
    attempts = params.get("nvml_attempts")
    backoff = params.get("nvml_backoff")
    return RetryPolicy(DEFAULT_ATTEMPTS if attempts is None else attempts,
                       DEFAULT_BACKOFF if backoff is None else backoff,
                       getattr(nvml, "sleep", None))


def call(policy: RetryPolicy, action: Callable[[], Any], settle: Optional[Callable[[], Tuple[bool, Any]]] = None,
         on_retry: Optional[Callable[[NvmlError, int, float], None]] = None) -> Any:
    """``action()`` with up to ``policy.attempts`` tries on transient errors (module docstring).

    The last error is raised with ``attempts`` (tries made) and, when it was transient, ``retries_exhausted``;
    ``nvml_changes`` of every failed try are kept together on it."""
    changes: List[Dict[str, Any]] = []
    attempt = 1
    while True:
        try:
            if attempt > 1 and settle is not None:
                done, result = settle()
                if done:
                    return result
            return action()
        except NvmlError as e:
            changes.extend(e.details.pop("nvml_changes", None) or [])
            transient = is_transient(e)
            if not transient or attempt >= policy.attempts:
                e.details["attempts"] = attempt
                if changes:
                    e.details["nvml_changes"] = changes
                if transient:
                    e.details["retries_exhausted"] = True
                    e.msg = "%s (after %d attempts)" % (e.msg, attempt)
                raise
            delay = policy.delay(attempt)
            if on_retry is not None:
                on_retry(e, attempt, delay)
            policy.sleep(delay)
            attempt += 1
