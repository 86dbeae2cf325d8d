# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.nvidia_driver_plan``: validate a driver choice against a host's PCI devices."""

from __future__ import annotations

DOCUMENTATION = r"""
name: nvidia_driver_plan
short_description: Validate an NVIDIA driver choice against the GPUs a host has
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Reads a PCI listing (C(<bus id> <vendor> <device> <class>) per line, as in C(/sys/bus/pci/devices)),
    finds the NVIDIA GPUs and NVSwitches, and returns the driver plan for the host.
  - Fails with a clear message when the branch is too old for a GPU model in the catalog, or when the
    proprietary kernel modules are asked for a model that needs the open ones.
options:
  _input:
    description: The PCI listing, one text or a list of lines.
    type: raw
    required: true
  branch:
    description: Driver branch such as V(550).
    type: str
    required: true
  version:
    description: Exact driver version pin, or empty.
    type: str
  kernel_modules:
    description: V(open), V(proprietary) or V(auto).
    type: str
    default: auto
  models:
    description: Catalog keys of GPU models to assume in addition to what PCI shows.
    type: list
    elements: str
  fabric_manager:
    description: V(true), V(false) or V(auto) (detect NVSwitch systems).
    type: raw
    default: auto
"""

EXAMPLES = r"""
- name: Plan the driver
  ansible.builtin.set_fact:
    plan: "{{ pci_listing | gpuops.k8s.nvidia_driver_plan(branch='570', kernel_modules='auto') }}"
"""

RETURN = r"""
_value:
  description: The plan (gpus, models, nvswitches, min_driver, kernel_modules, fabric_manager, reasons).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.module_utils.host.driver_policy import driver_plan
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def nvidia_driver_plan(listing, branch, version=None, kernel_modules="auto", models=None, fabric_manager="auto"):
    try:
        return driver_plan(listing or "", branch, version=version or None, kernel_modules=kernel_modules,
                           models=models or [], fabric_manager=fabric_manager)
    except GpuOpsError as e:
        raise AnsibleFilterError(e.msg)


class FilterModule(object):
    def filters(self):
        return {"nvidia_driver_plan": nvidia_driver_plan}
