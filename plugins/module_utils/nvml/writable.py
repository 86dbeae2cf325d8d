# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The factory for callers that change GPUs (mig_mode, mig_partition, gpu_settings, the boot-time
restore): the same backends as ``nvml.factory``, with the simulator's mutations (``sim.writer``)."""

from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import factory
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.writer import SimBackend


def open_backend(simulator=None, run_command=None):
    return factory.open_backend(simulator, run_command, simulator_class=SimBackend)


def open_nvml(simulator=None, run_command=None):
    return factory.open_nvml(simulator, run_command, simulator_class=SimBackend)
