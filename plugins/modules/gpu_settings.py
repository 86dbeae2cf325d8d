#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_settings
short_description: Set persistence mode, compute mode, power limit, ECC and application clocks of NVIDIA GPUs
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Configures NVIDIA GPUs through NVML (real or simulated) the way C(nvidia-smi -pm/-c/-pl/-e/-ac) would, with
    check mode, diff and idempotence.
  - Every request is validated against every selected GPU before anything changes; the module fails naming what
    is valid (the GPU's power limit range, its supported clocks, features it lacks).
  - An ECC change takes effect at the next reboot or GPU reset; the module reports it as pending in
    RV(gpus[].ecc_mode_pending) and RV(reboot_required). It never reboots or resets a GPU.
  - Options left unset are not touched.
extends_documentation_fragment:
  - gpuops.k8s.nvml
  - gpuops.k8s.attributes
  - gpuops.k8s.attributes.idempotent
options:
  devices:
    description:
      - The GPUs to configure, V(all) or a list of NVML indexes and/or GPU UUIDs.
    type: raw
    default: all
  persistence_mode:
    description:
      - Keep the driver initialised while no client uses the GPU (C(nvidia-smi -pm)).
      - On real hosts nvidia-persistenced is the recommended way; the role M(gpuops.k8s.nvidia_driver) enables it.
    type: bool
  compute_mode:
    description:
      - V(exclusive_process) lets one process (or the MPS server) own the GPU; use it on MPS nodes.
        V(default) lets several processes share it; V(prohibited) allows none.
    type: str
    choices: [default, exclusive_process, prohibited]
  mps:
    description:
      - Shortcut used when O(compute_mode) is unset, V(true) selects V(exclusive_process) (MPS node),
        V(false) selects V(default).
    type: bool
  power_limit:
    description:
      - Power limit in watts, or V(default), V(min), V(max). Must be within the GPU's constraints
        (RV(gpus[].power_limit_min_w) to RV(gpus[].power_limit_max_w)).
    type: raw
  ecc:
    description:
      - ECC mode to use from the next reboot or GPU reset.
    type: bool
  application_clocks:
    description:
      - V(default), or a dict with C(memory_mhz) and C(graphics_mhz) among the GPU's supported clocks.
    type: raw
attributes:
  check_mode:
    description: Validates and reports RV(actions) and the predicted settings; calls no NVML setter.
  diff_mode:
    description: Before and after settings per GPU UUID.
seealso:
  - module: gpuops.k8s.gpu_info
  - module: gpuops.k8s.mig_mode
"""

EXAMPLES = r"""
- name: Persistence on, exclusive-process compute mode for MPS, 600 W power limit
  gpuops.k8s.gpu_settings:
    persistence_mode: true
    mps: true
    power_limit: 600

- name: Turn ECC on for the next boot
  gpuops.k8s.gpu_settings:
    ecc: true
  register: ecc

- name: Reboot when ECC is pending
  ansible.builtin.reboot:
  when: ecc.reboot_required

- name: Show what would change on GPU 0
  gpuops.k8s.gpu_settings:
    devices: [0]
    application_clocks: {memory_mhz: 2619, graphics_mhz: 1980}
    power_limit: default
  check_mode: true
  register: plan

- name: Print the plan
  ansible.builtin.debug:
    var: plan.actions
"""

RETURN = r"""
gpus:
  description: Settings of each selected GPU after the run (predicted in check mode); V(null) where unsupported.
  returned: success
  type: list
  elements: dict
  contains:
    index: {description: NVML index., type: int, sample: 0}
    uuid: {description: GPU UUID., type: str, sample: GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44}
    name: {description: NVML name., type: str, sample: NVIDIA H100 80GB HBM3}
    model: {description: Catalog key., type: str, sample: h100_80gb}
    persistence_mode: {description: Persistence mode., type: bool, sample: true}
    compute_mode: {description: Compute mode., type: str, sample: exclusive_process}
    power_limit_w: {description: Power limit in watts., type: float, sample: 600.0}
    power_limit_min_w: {description: Lowest power limit allowed., type: float, sample: 200.0}
    power_limit_max_w: {description: Highest power limit allowed., type: float, sample: 700.0}
    power_limit_default_w: {description: Default power limit., type: float, sample: 700.0}
    ecc_mode_current: {description: ECC mode in effect., type: bool, sample: true}
    ecc_mode_pending: {description: ECC mode from the next reboot or reset., type: bool, sample: false}
    application_clocks:
      description: Application clocks.
      type: dict
      sample: {memory_mhz: 2619, graphics_mhz: 1755}
    reboot_required: {description: An ECC change waits for a reboot or GPU reset., type: bool, sample: false}
actions:
  description: The changes made (planned in check mode), in order.
  returned: success
  type: list
  elements: dict
  sample: [{gpu: 0, uuid: GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44, setting: power_limit_w, before: 700.0, after: 600.0}]
reboot_required:
  description: At least one GPU has an ECC change pending until a reboot or GPU reset.
  returned: success
  type: bool
  sample: false
backend:
  description: V(nvml) or V(simulator).
  returned: success
  type: str
  sample: simulator
"""

from ansible_collections.gpuops.k8s.plugins.module_utils.host.settings import gpu_settings
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.module_spec import nvml_module, run_host_change


def main():
    module = nvml_module(dict(
        devices=dict(type="raw", default="all"),
        persistence_mode=dict(type="bool"),
        compute_mode=dict(type="str", choices=["default", "exclusive_process", "prohibited"]),
        mps=dict(type="bool"),
        power_limit=dict(type="raw"),
        ecc=dict(type="bool"),
        application_clocks=dict(type="raw"),
    ))
    run_host_change(module, gpu_settings)


if __name__ == "__main__":
    main()
