# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML simulator in one import, for controller-side tools (tests, benchmarks, hack/, the e2e
harness): the state file (``sim.state``), both backends (``SimReader``, ``SimBackend``) and the
nvml_simulator module's logic (``sim.configure``). Plugins import the narrow modules instead.
"""

from __future__ import annotations

# pylint: disable=unused-import,wildcard-import,unused-wildcard-import
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.state import *  # noqa: F401,F403
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.reader import SimReader  # noqa: F401
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.writer import MUTATING_CALLS, SimBackend  # noqa: F401
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.configure import configure, valid_fault_error  # noqa: F401
