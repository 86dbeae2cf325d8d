# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The factory for callers that change GPUs (mig_mode, mig_partition, gpu_settings, the boot-time
restore): the same backends as ``nvml.factory``, with the simulator's mutations (``sim.writer``).

The simulator's mutations are imported only when a simulator is in use and the caller may change
it: on a real host, or in check mode (``read_only``), the run never loads ``sim.writer``.

``run_locked(run, params, what, check_mode, run_command)`` is the whole frame of a module that changes
GPUs: open NVML (``params['simulator']``), run ``run(nvml, params, check_mode=...)`` under the host lock
(none in check mode) and record the backend's kind as ``result['backend']``."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import factory
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.backend import Backend, lock_unless_check


def _simulator_class(simulator, read_only):
    if read_only or not factory.simulator_path(simulator):
        return None  # the factory's default: the simulator's read path (or the real NVML)
    from ansible_collections.gpuops.k8s.plugins.module_utils.sim.writer import SimBackend  # pylint: disable=import-outside-toplevel
    return SimBackend


def open_backend(simulator: Optional[str] = None, run_command: Optional[Callable[..., Tuple[int, str, str]]] = None,
                 read_only: bool = False) -> Backend:
    return factory.open_backend(simulator, run_command, simulator_class=_simulator_class(simulator, read_only))


def open_nvml(simulator: Optional[str] = None, run_command: Optional[Callable[..., Any]] = None,
              read_only: bool = False) -> Any:
    """``factory.open_nvml`` for callers that change GPUs; ``read_only`` (check mode) opens the
    simulator without its mutations (its read path has no mutating calls)."""
    return factory.open_nvml(simulator, run_command, simulator_class=_simulator_class(simulator, read_only))


def run_locked(run: Callable[..., Any], params: Dict[str, Any], what: str, check_mode: bool = False,
               run_command: Optional[Callable[..., Any]] = None) -> Dict[str, Any]:
    """Open NVML for ``params['simulator']`` (or the real NVML), call ``run(nvml, params,
    check_mode=check_mode)`` under the host lock named ``what`` (check mode: no lock) and return its
    result with ``backend`` (``real`` or ``simulator``) added."""
    with open_nvml(params.get("simulator"), run_command) as nvml:
        with lock_unless_check(nvml, what, check_mode):
            result = run(nvml, params, check_mode=check_mode)
        result["backend"] = nvml.kind
    return result
