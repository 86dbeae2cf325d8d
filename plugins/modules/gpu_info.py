#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_info
short_description: Read NVIDIA GPUs, their MIG layout and health through NVML
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Reads the driver version and every GPU of the host through NVML (real or simulated) and returns
    them as RV(gpus), in the facts shape every gpuops.k8s NVML module returns.
  - For each GPU the identity (index, UUID, NVML name, catalog model, PCI ids), memory, MIG mode (current and
    pending), the MIG instances (one entry per compute instance, with profile, placement, ids, MIG UUID, memory
    and whether a process uses it), ECC error counters, retired pages and row remapping state, temperature,
    power, utilization, settings (persistence mode, compute mode, ECC mode, application clocks) and the
    compute processes.
  - MIG profile names, ids and memory sizes come from NVML at run time (the catalog only fills in while MIG
    mode is not active yet).
  - Read only; never changes anything.
extends_documentation_fragment:
  - gpuops.k8s.nvml
  - gpuops.k8s.attributes.read_only
  - gpuops.k8s.attributes.idempotent
options:
  diagram:
    description:
      - Also return RV(diagram), a text picture of the MIG slices of every GPU.
    type: bool
    default: true
seealso:
  - module: gpuops.k8s.mig_mode
  - module: gpuops.k8s.nvml_simulator
"""

EXAMPLES = r"""
- name: Read the GPUs of the host
  gpuops.k8s.gpu_info:
  register: gpu

- name: Show the MIG layout
  ansible.builtin.debug:
    msg: "{{ gpu.diagram }}"

- name: Fail when a GPU has an uncorrected ECC error since boot
  ansible.builtin.assert:
    that: gpu.gpus | map(attribute='ecc_errors.volatile_uncorrected') | select('gt', 0) | list | length == 0
    fail_msg: "uncorrected ECC errors on {{ inventory_hostname }}"

- name: Read a simulated host
  gpuops.k8s.gpu_info:
    simulator: /var/tmp/gpuops-sim/dgx-a100-01.json
"""

RETURN = r"""
driver_version:
  description: NVIDIA driver version.
  returned: success
  type: str
  sample: "550.127.08"
cuda_driver_version:
  description: Highest CUDA version the driver supports.
  returned: success
  type: str
  sample: "12.4"
backend:
  description: Which NVML was read, C(nvml) (real) or C(simulator).
  returned: success
  type: str
  sample: simulator
diagram:
  description: Text picture of the memory slices of every GPU and the MIG instances on them, one line per GPU.
  returned: when O(diagram=true) and the slice diagram renderer is part of the collection
  type: list
  elements: str
  sample: ["GPU0 h100_80gb [4g.40gb                            |3g.40gb 3x1c                       ]  7/7 compute",
           "GPU1 l40s_48gb [ full GPU (MIG not supported) ]"]
gpus:
  description: One entry per GPU, by NVML index.
  returned: success
  type: list
  elements: dict
  contains:
    index: {description: NVML index., type: int, returned: always, sample: 0}
    uuid: {description: GPU UUID., type: str, returned: always, sample: GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44}
    name: {description: NVML name., type: str, returned: always, sample: NVIDIA A100-SXM4-80GB}
    model: {description: Catalog key of the model (null when unknown)., type: str, returned: always, sample: a100_80gb}
    pci_device_id: {description: PCI device id., type: str, returned: always, sample: "0x20B2"}
    pci_bus_id: {description: PCI bus id., type: str, returned: always, sample: "00000000:07:00.0"}
    memory_total_mib: {description: Framebuffer memory in MiB., type: int, returned: always, sample: 81920}
    mig_capable: {description: Whether the GPU supports MIG., type: bool, returned: always, sample: true}
    mig_mode_current: {description: MIG mode in effect., type: bool, returned: always, sample: true}
    mig_mode_pending: {description: MIG mode after the next GPU reset (Ampere)., type: bool, returned: always, sample: true}
    lost:
      description: The GPU fell off the bus (NVML_ERROR_GPU_IS_LOST); the other readings are null then.
      type: bool
      returned: always
      sample: false
    instances:
      description: MIG instances, one entry per compute instance (a GPU instance without compute instance shows once).
      type: list
      elements: dict
      returned: always
      contains:
        profile:
          description: MIG device profile; C(<c>c.<gi profile>) for a compute instance smaller than its GPU instance.
          type: str
          sample: 3g.40gb
        gpu_instance_profile: {description: GPU instance profile., type: str, sample: 3g.40gb}
        gpu_instance_profile_id: {description: NVML profile id read at run time., type: int, sample: 9}
        placement:
          description: Placement of the GPU instance in memory slices.
          type: dict
          sample: {start: 0, size: 4}
        gpu_instance_id: {description: GPU instance id., type: int, sample: 1}
        compute_instance_id: {description: Compute instance id (null for a GPU instance without one)., type: int, sample: 0}
        compute_slices: {description: Compute slices of the compute instance (null without one)., type: int, sample: 3}
        has_compute_instance: {description: Whether the GPU instance has a compute instance., type: bool, sample: true}
        uuid: {description: MIG device UUID (null without compute instance)., type: str, sample: MIG-0d3f54a7-9c1b-4b8e-a1f2-3c4d5e6f7a8b}
        memory_mib: {description: Memory of the GPU instance in MiB., type: int, sample: 40192}
        busy: {description: Whether a compute process runs on it., type: bool, sample: false}
    ecc_errors:
      description: Uncorrected ECC errors since the last driver load (volatile) and over the GPU's life (aggregate).
      type: dict
      returned: always
      sample: {volatile_uncorrected: 0, aggregate_uncorrected: 0}
    retired_pages_pending: {description: Pages waiting to be retired at the next reset., type: bool, returned: always, sample: false}
    remapped_rows_pending: {description: Row remapping waits for a GPU reset., type: bool, returned: always, sample: false}
    remapped_rows_failure: {description: Row remapping failed (the GPU should be replaced)., type: bool, returned: always, sample: false}
    temperature_c: {description: GPU temperature in degrees Celsius., type: int, returned: always, sample: 34}
    power_w: {description: Power draw in watts., type: float, returned: always, sample: 71.2}
    power_limit_w: {description: Power limit in watts., type: float, returned: always, sample: 400.0}
    utilization_gpu_pct: {description: GPU utilization in percent., type: int, returned: always, sample: 0}
    persistence_mode: {description: Persistence mode., type: bool, returned: always, sample: false}
    compute_mode:
      description: Compute mode (C(default), C(exclusive_process), C(prohibited)).
      type: str
      returned: always
      sample: default
    ecc_mode_current: {description: ECC mode in effect., type: bool, returned: always, sample: true}
    ecc_mode_pending: {description: ECC mode after the next reset., type: bool, returned: always, sample: true}
    applications_clocks:
      description: Application clocks in MHz (null where not supported).
      type: dict
      returned: always
      sample: {graphics_mhz: 1275, memory_mhz: 1593}
    processes:
      description: Compute processes.
      type: list
      elements: dict
      returned: always
      sample: [{pid: 4242, name: python, gpu_instance_id: 1, compute_instance_id: 0, used_memory_mib: 1024}]
"""

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.gpu_state import gpu_info
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.module_spec import nvml_module


def main():
    module = nvml_module(dict(diagram=dict(type="bool", default=True)))
    run_and_exit(module, lambda: gpu_info(module.params["simulator"], diagram=module.params["diagram"],
                                          run_command=module.run_command), changed=False)


if __name__ == "__main__":
    main()
