# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The factory: which NVML backend a call gets.

``open_nvml(simulator=None, run_command=None)`` yields a backend whose methods carry pynvml's
function names. With ``simulator`` (a path; default ``$GPUOPS_NVML_SIMULATOR``) it is the simulator,
otherwise the real NVML through nvidia-ml-py's ``pynvml``. Initialization failures become one clear
``GpuOpsError`` each, never a traceback.

This module opens the simulator's read path only (``sim.reader``): a read-only module such as
``gpu_info`` neither ships nor imports the simulator's mutations. Each backend is imported when it is
opened: a simulated host never loads the pynvml backend, a real one never loads the simulator. Callers that change GPUs open the
backend through ``nvml.writable``, which passes the simulator with its mutations (``sim.writer``).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import ENV_SIMULATOR, NvmlError, init_failure

if TYPE_CHECKING:  # for the annotations only
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.backend import Backend


def simulator_path(simulator: Optional[str] = None) -> Optional[str]:
    """The simulator state file to use, or None for the real NVML."""
    return simulator or os.environ.get(ENV_SIMULATOR) or None


def open_backend(simulator: Optional[str] = None, run_command: Optional[Callable[..., Tuple[int, str, str]]] = None,
                 simulator_class: Optional[Callable[[str], Backend]] = None) -> Backend:
    """Build (not initialize) the backend: ``simulator_class(path)`` (default: the simulator's read
    path) when a simulator state file is set, else the real NVML."""
    path = simulator_path(simulator)
    if path:
        if simulator_class is None:
            from ansible_collections.gpuops.k8s.plugins.module_utils.sim.reader import SimReader
            return SimReader(path)
        return simulator_class(path)
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.pynvml_backend import (  # pylint: disable=import-outside-toplevel
        RealBackend, import_pynvml)
    return RealBackend(import_pynvml(), run_command=run_command)


@contextmanager
def open_nvml(simulator: Optional[str] = None, run_command: Optional[Callable[..., Tuple[int, str, str]]] = None,
              simulator_class: Optional[Callable[[str], Backend]] = None) -> Iterator[Backend]:
    """Initialize NVML (real or simulated), yield the backend, shut NVML down.

    ``run_command`` (``AnsibleModule.run_command``-like callable) runs nvidia-smi for GPU resets on
    real hosts. Initialization failures become one clear GpuOpsError each.
    """
    backend = open_backend(simulator, run_command, simulator_class)
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
