# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared documentation of every module of the nvml action group: the O(simulator) option, requirements,
notes and the platform and action_group attributes.

C(gpuops.k8s.nvml.retries): the O(nvml_attempts) and O(nvml_backoff) options of the modules that change MIG
(mig_mode, mig_partition; argument spec: module_utils/nvml/module_spec.py's ``retry_options()``); such a module
returns RV(nvml_retries)."""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  simulator:
    description:
      - Path of an NVML simulator state file (see M(gpuops.k8s.nvml_simulator)) on the managed host.
      - When set, the module talks to the simulator instead of the real NVML.
      - Defaults to the environment variable E(GPUOPS_NVML_SIMULATOR) of the module process; without
        either, the real NVML (C(libnvidia-ml.so.1) through the C(pynvml) module of nvidia-ml-py) is used.
      - Set it once for a play with C(module_defaults) and the action group C(group/gpuops.k8s.nvml).
    type: path
attributes:
  platform:
    support: full
    platforms: linux
    description: GPU hosts running Linux (NVML); any POSIX host with O(simulator).
  action_group:
    support: full
    description: Use C(group/gpuops.k8s.nvml) in C(module_defaults) to set O(simulator) once.
    membership:
      - gpuops.k8s.nvml
requirements:
  - On real GPU hosts, the Python package C(nvidia-ml-py) (module C(pynvml)) for the Python running the module,
    an NVIDIA driver providing C(libnvidia-ml.so.1) with its kernel module loaded, and root for changes.
  - Nothing extra with O(simulator).
notes:
  - A missing nvidia-ml-py, a missing C(libnvidia-ml.so.1), a driver that is not loaded and missing permissions
    each fail with one message saying what to do.
"""

    # Literal strings only: ansible-test's yamllint reads each fragment from the source text.
    RETRIES = r"""
options:
  nvml_attempts:
    description:
      - How many times in all an NVML change (set MIG mode, destroy or create an instance) is tried when NVML answers
        with a transient error (C(NVML_ERROR_IN_USE), C(NVML_ERROR_TIMEOUT), C(NVML_ERROR_NOT_READY)); the GPU is
        read again before each new try, so a change the driver made although the call failed is not made again.
      - V(1) tries once and fails at once, as before retries existed. At most V(20).
      - Other NVML errors are never tried again. Each retry is listed in RV(nvml_retries). Check mode calls no setter
        and is not affected.
    type: int
    default: 3
  nvml_backoff:
    description:
      - Seconds to wait before the first new try; each further wait is twice the one before (V(1.0) waits 1 s, then 2 s).
      - From V(0) to V(60). The simulator (O(simulator)) never waits.
    type: float
    default: 1.0
"""
