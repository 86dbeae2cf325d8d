#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_health_check
short_description: Judge the health of a GPU host from NVML facts and kernel Xid errors
version_added: "0.1.0"
description:
  - Reads the GPUs of the host through NVML (real or simulated), or takes the facts that
    M(gpuops.k8s.gpu_info) returned, and the kernel log, and returns a health verdict.
  - A host is unhealthy when a GPU has more uncorrected ECC errors than O(ecc_error_threshold),
    retired pages pending, a row-remapping failure, a temperature above O(temperature_threshold_c),
    when fewer GPUs are visible than O(expected_gpus), or when the kernel log holds an Xid error that
    needs a drain, a GPU reset or a reboot.
  - Application Xids (13, 31, 43, 45, 68, 109) are ignored, as the NVIDIA device plugin does.
  - Read-only. The decision what to do with the Kubernetes node is taken by
    M(gpuops.k8s.gpu_health_plan) across all nodes.
author:
  - gpuops.k8s maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.k8s.nvml
  - gpuops.k8s.attributes.read_only
  - gpuops.k8s.attributes.idempotent
  - gpuops.k8s.health_policy
options:
  gpus:
    description:
      - The RV(gpuops.k8s.gpu_info#module:gpus) list of M(gpuops.k8s.gpu_info).
      - When omitted, the module reads the GPUs itself through NVML (or O(simulator), which is only used then).
    type: list
    elements: dict
  expected_gpus:
    description:
      - How many GPUs the host has when healthy. Fewer visible GPUs makes the host unhealthy.
      - Omit to skip the check.
    type: int
  kernel_log:
    description: Kernel log text to scan for Xid errors, instead of reading it on the host.
    type: str
  kernel_log_path:
    description: A file holding kernel log lines (with O(kernel_log_source=file) or V(auto)).
    type: path
  kernel_log_source:
    description:
      - Where the kernel log comes from. V(auto) reads O(kernel_log_path) when set, else
        C(journalctl -k), else C(dmesg). V(none) skips the Xid check.
    type: str
    choices: [auto, journal, dmesg, file, none]
    default: auto
  xid_window:
    description:
      - Only Xid errors logged within this many seconds count (lines with a wall-clock
        timestamp; lines without one always count). V(0) counts every line.
      - Keep it a few times the schedule interval so a recovered GPU is not judged on old errors.
    type: int
    default: 3600
seealso:
  - module: gpuops.k8s.gpu_info
  - module: gpuops.k8s.gpu_health_plan
  - name: NVIDIA Xid errors
    description: NVIDIA's Xid catalog.
    link: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
"""

EXAMPLES = r"""
- name: Check this GPU host
  gpuops.k8s.gpu_health_check:
    expected_gpus: 8
  register: health

- name: Check a simulated host with a stricter temperature limit
  gpuops.k8s.gpu_health_check:
    simulator: /var/tmp/sim/dgx-a100-01.json
    kernel_log_path: /var/tmp/sim/dgx-a100-01.kmsg
    temperature_threshold_c: 85
  register: health

- name: Show the verdict
  ansible.builtin.debug:
    msg: "{{ health.reason if not health.healthy else 'healthy' }}"
"""

RETURN = r"""
healthy:
  description: Whether no check found a problem.
  returned: success
  type: bool
  sample: false
problems:
  description: One entry per problem found.
  returned: success
  type: list
  elements: dict
  contains:
    check:
      description: V(ecc_uncorrected), V(retired_pages_pending), V(remapped_rows_failure), V(temperature), V(gpus_missing) or V(xid).
      type: str
    detail:
      description: A sentence for humans and the node annotation.
      type: str
    gpu:
      description: GPU index, or null when not tied to one GPU.
      type: int
    action:
      description: What the problem calls for, V(drain), V(reset_gpu) or V(reboot).
      type: str
  sample: [{check: xid, detail: "GPU 3: Xid 79 (GPU has fallen off the bus.)", gpu: 3, action: reboot, value: 79}]
reason:
  description: The problem details joined, empty when healthy.
  returned: success
  type: str
  sample: "GPU 2: volatile uncorrected ECC errors 12 > 10"
remediation:
  description: The strongest action among the problems, V(none), V(drain), V(reset_gpu) or V(reboot).
  returned: success
  type: str
  sample: reset_gpu
xids:
  description: Every Xid event found in the scanned log (including ignored ones), with its action.
  returned: success
  type: list
  elements: dict
  sample: [{xid: 48, pci_bus_id: "0000:17:00", timestamp: "2026-12-02T10:00:00+0000", action: reset_gpu}]
gpu_count:
  description: GPUs visible.
  returned: success
  type: int
  sample: 8
expected_gpus:
  description: O(expected_gpus) as given.
  returned: success
  type: int
  sample: 8
kernel_log_source:
  description: Where the kernel log was read from.
  returned: success
  type: str
  sample: journal
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.health.checks import policy_argument_spec, run_health_check


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="dict"),
            simulator=dict(type="path"),
            expected_gpus=dict(type="int"),
            kernel_log=dict(type="str"),
            kernel_log_path=dict(type="path"),
            kernel_log_source=dict(type="str", default="auto", choices=["auto", "journal", "dmesg", "file", "none"]),
            xid_window=dict(type="int", default=3600),
            **policy_argument_spec()
        ),
        mutually_exclusive=[("kernel_log", "kernel_log_path")],
        supports_check_mode=True,
    )

    def run(argv):
        return module.run_command(argv)

    run_and_exit(module, lambda: run_health_check(module.params, run, os.path.exists, time.time()), changed=False)


if __name__ == "__main__":
    main()
