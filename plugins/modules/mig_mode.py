#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: mig_mode
short_description: Enable or disable MIG mode on NVIDIA GPUs
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Sets MIG (Multi-Instance GPU) mode on the selected GPUs through NVML (real or simulated).
  - On Ampere (A30, A100) a change stays pending until the GPU is reset and then persists across reboots; the
    module reports RV(reset_required) and, with O(reset=true), resets the affected GPUs itself when no process
    uses them.
  - On Hopper and Blackwell (H100, H200, GH200, B200) the change applies at once and is lost at the next GPU reset
    or reboot; run the module at boot (or let the MIG manager do it) to keep it.
  - Everything is validated before anything changes. The module fails, naming what is valid, on an unknown
    device, on a GPU without MIG that is listed explicitly, when processes run on a GPU whose mode must change
    (naming their PIDs), and when disabling a GPU that still has MIG instances (remove them first with
    M(gpuops.k8s.mig_partition)). It never destroys MIG instances and never reboots the host.
extends_documentation_fragment:
  - gpuops.k8s.nvml
  - gpuops.k8s.nvml.retries
  - gpuops.k8s.attributes
  - gpuops.k8s.attributes.idempotent
options:
  state:
    description:
      - V(enabled) turns MIG mode on, V(disabled) turns it off.
    type: str
    choices: [enabled, disabled]
    default: enabled
  devices:
    description:
      - The GPUs to change, V(all) or a list of NVML indexes and/or GPU UUIDs.
      - With V(all), GPUs without MIG support are skipped and listed in RV(skipped_gpus).
    type: raw
    default: all
  reset:
    description:
      - Reset the GPUs whose new mode is still pending (Ampere), so it takes effect now.
      - Only GPUs the change concerns are reset, and only when no process uses them; otherwise the module fails
        before anything changes, naming the PIDs.
    type: bool
    default: false
attributes:
  check_mode:
    description: Reports the actions it would take (RV(actions)) and the predicted modes; calls no NVML setter.
  diff_mode:
    description: Before and after MIG mode (current and pending) per GPU UUID.
notes:
  - A MIG mode change that NVML answers with a transient error is tried again (O(nvml_attempts)); the mode is read
    again first, and a mode already pending is not set again. A failed GPU reset is never tried again.
seealso:
  - module: gpuops.k8s.gpu_info
  - module: gpuops.k8s.mig_partition
  - name: NVIDIA MIG user guide
    description: MIG mode, GPU reset and persistence per architecture.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
"""

EXAMPLES = r"""
- name: Enable MIG mode on every MIG-capable GPU
  gpuops.k8s.mig_mode:
    state: enabled
  register: mig

- name: Reboot when an Ampere GPU could not be reset
  ansible.builtin.reboot:
  when: mig.reset_required

- name: Enable MIG on GPUs 0 and 1 and reset them now when idle
  gpuops.k8s.mig_mode:
    state: enabled
    devices: [0, 1]
    reset: true

- name: Show what would change
  gpuops.k8s.mig_mode:
    state: disabled
    devices: [GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44]
  check_mode: true
  register: plan

- name: Print the plan
  ansible.builtin.debug:
    var: plan.actions
"""

RETURN = r"""
mig_mode:
  description: MIG mode of each selected GPU after the run (predicted in check mode).
  returned: success
  type: list
  elements: dict
  contains:
    index: {description: NVML index., type: int, sample: 0}
    uuid: {description: GPU UUID., type: str, sample: GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44}
    name: {description: NVML name., type: str, sample: NVIDIA A100-SXM4-80GB}
    model: {description: Catalog key., type: str, sample: a100_80gb}
    current: {description: MIG mode in effect., type: bool, sample: false}
    pending: {description: MIG mode after the next GPU reset., type: bool, sample: true}
    reset_required: {description: The requested mode waits for a GPU reset (or reboot)., type: bool, sample: true}
  sample: [{index: 0, uuid: GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44, name: NVIDIA A100-SXM4-80GB, model: a100_80gb,
            current: false, pending: true, reset_required: true}]
reset_required:
  description: Whether any selected GPU still needs a reset (or a reboot) for the requested mode.
  returned: success
  type: bool
  sample: false
skipped_gpus:
  description: GPUs left alone under O(devices=all) (no MIG support, or lost), with the reason.
  returned: success
  type: list
  elements: dict
  sample: [{index: 3, uuid: GPU-1b2c3d4e-5f60-4718-92a3-b4c5d6e7f809, name: NVIDIA L40S, reason: MIG not supported}]
actions:
  description: What was done (or would be done in check mode), in order.
  returned: success
  type: list
  elements: dict
  sample: [{action: set_mig_mode, gpu: 0, uuid: GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44, enabled: true},
           {action: reset_gpu, gpu: 0, uuid: GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44}]
nvml_retries:
  description:
    - One entry per transient NVML error tried again (see O(nvml_attempts)), with C(gpu), C(action) (V(set_mig_mode)),
      C(error), C(nvml_call), C(attempt) (the try that failed, from 1) and C(backoff_s); empty when none was.
  returned: success
  type: list
  elements: dict
  sample: [{gpu: 0, action: set_mig_mode, error: NVML_ERROR_IN_USE, nvml_call: nvmlDeviceSetMigMode, attempt: 1, backoff_s: 1.0}]
gpus:
  description: Every GPU of the host after the run, in the shape of M(gpuops.k8s.gpu_info)'s RV(gpuops.k8s.gpu_info#module:gpus).
  returned: success
  type: list
  elements: dict
  sample: []
backend:
  description: C(nvml) (real) or C(simulator).
  returned: success
  type: str
  sample: nvml
"""

from ansible_collections.gpuops.k8s.plugins.module_utils.mig.mode_runner import mig_mode
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.module_spec import nvml_module, retry_options, run_host_change


def main():
    module = nvml_module(dict(
        retry_options(),
        state=dict(type="str", choices=["enabled", "disabled"], default="enabled"),
        devices=dict(type="raw", default="all"),
        reset=dict(type="bool", default=False),
    ))
    run_host_change(module, mig_mode)


if __name__ == "__main__":
    main()
