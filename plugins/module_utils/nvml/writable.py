# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The factory for callers that change GPUs (mig_mode, mig_partition, gpu_settings, the boot-time
restore): the same backends as ``nvml.factory``, with the simulator's mutations (``sim.writer``).

The simulator's mutations are imported only when a simulator is in use and the caller may change
it: on a real host, or in check mode (``read_only``), the run never loads ``sim.writer``."""

from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import factory


def _simulator_class(simulator, read_only):
    if read_only or not factory.simulator_path(simulator):
        return None  # the factory's default: the simulator's read path (or the real NVML)
    from ansible_collections.gpuops.k8s.plugins.module_utils.sim.writer import SimBackend  # pylint: disable=import-outside-toplevel
    return SimBackend


def open_backend(simulator=None, run_command=None, read_only=False):
    return factory.open_backend(simulator, run_command, simulator_class=_simulator_class(simulator, read_only))


def open_nvml(simulator=None, run_command=None, read_only=False):
    """``factory.open_nvml`` for callers that change GPUs; ``read_only`` (check mode) opens the
    simulator without its mutations (its read path has no mutating calls)."""
    return factory.open_nvml(simulator, run_command, simulator_class=_simulator_class(simulator, read_only))
