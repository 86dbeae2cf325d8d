# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared documentation of every module of the nvml action group: the O(simulator) option, requirements,
notes and the platform and action_group attributes."""

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
