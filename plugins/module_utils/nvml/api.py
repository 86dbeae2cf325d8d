# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML access layer in one import, for controller-side tools (tests, benchmarks, hack/, the e2e
harness): error codes, the backend interface and host lock, the pynvml backend, and ``open_nvml``
with the simulator's mutations (``nvml.writable``).

Plugins import the narrow modules instead (``nvml.errors``, ``nvml.factory`` or ``nvml.writable``,
``nvml.backend``) so that AnsiballZ ships only what a module uses.
"""

from __future__ import annotations

# pylint: disable=unused-import,wildcard-import,unused-wildcard-import
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import *  # noqa: F401,F403
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.backend import (  # noqa: F401
    DEFAULT_LOCK_TIMEOUT,
    ENV_LOCK,
    ENV_LOCK_TIMEOUT,
    Backend,
    HostLock,
    Placement,
    default_run_command,
    host_lock,
    host_lock_path,
    lock_timeout,
)
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.pynvml_backend import RealBackend, import_pynvml  # noqa: F401
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.factory import simulator_path  # noqa: F401
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.writable import open_backend, open_nvml  # noqa: F401
