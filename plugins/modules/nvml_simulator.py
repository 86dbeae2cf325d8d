#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nvml_simulator
short_description: Create and change a simulated GPU host for the NVML modules
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Writes the JSON state file of the NVML simulator, a host with the given GPUs, driver version, running
    processes, health readings and injected NVML faults. Every module of the C(gpuops.k8s.nvml) action group
    reads and changes it when its C(simulator) option (or E(GPUOPS_NVML_SIMULATOR)) points at the file.
  - The simulator obeys real MIG rules taken from the collection's GPU catalog (profiles per model, maximum
    instances, placements, compute slices, compute instance sizes, MIG mode semantics per generation, busy
    GPUs and instances); see docs/nvml-simulator.md in the collection.
  - An existing host keeps its GPUs and MIG layout; only O(driver_version), O(processes), O(faults) and
    O(health) change, and O(reboot) simulates a host reboot. O(reset=true) recreates it from scratch.
options:
  path:
    description:
      - State file of the simulated host.
    type: path
    required: true
  state:
    description:
      - V(present) creates or updates the simulated host, V(absent) removes its state file.
    type: str
    choices: [present, absent]
    default: present
  gpus:
    description:
      - The GPUs of the host, in index order. Required to create a host.
      - On an existing host it must match the host's GPUs (use O(reset=true) to change them).
    type: list
    elements: dict
    suboptions:
      model:
        description:
          - Catalog key (for example V(a100_80gb), V(h100_80gb), V(h200_141gb), V(l40s_48gb)), NVML name
            (for example V(NVIDIA H100 80GB HBM3)) or PCI device id.
        type: str
        required: true
      count:
        description: Number of GPUs of this model.
        type: int
        default: 1
  driver_version:
    description:
      - Driver version the simulated NVML reports (the CUDA version follows from its branch).
      - Defaults to V(550.127.08) for a new host.
    type: str
  processes:
    description:
      - The compute processes running on the host; replaces the current list (V([]) stops them all).
      - A process makes its GPU busy (no MIG mode change, no reset) and, with O(processes[].gpu_instance_id),
        its MIG instance busy (not destroyed).
    type: list
    elements: dict
    suboptions:
      gpu:
        description: GPU index.
        type: int
        required: true
      gpu_instance_id:
        description: GPU instance the process runs in (required on a GPU in MIG mode with instances).
        type: int
      compute_instance_id:
        description: Compute instance inside that GPU instance (default the first).
        type: int
      pid:
        description: Process id.
        type: int
        required: true
      name:
        description: Process name.
        type: str
        default: python
      used_memory_mib:
        description: GPU memory the process uses, in MiB.
        type: int
        default: 0
  faults:
    description:
      - Injected NVML failures; replaces the current list (V([]) clears them).
      - The named call fails with that NVML error O(faults[].count) times (every time when omitted); the
        remaining count is kept in the state file across module runs.
    type: list
    elements: dict
    suboptions:
      call:
        description:
          - pynvml function name, for example V(nvmlDeviceCreateGpuInstanceWithPlacement), V(nvmlDeviceSetMigMode),
            V(nvmlInit), or V(reset_gpu) for the GPU reset.
        type: str
        required: true
      error:
        description: NVML error name such as V(NVML_ERROR_IN_USE) (the V(NVML_ERROR_) prefix may be left out).
        type: str
        default: NVML_ERROR_UNKNOWN
      count:
        description: How many times the call fails; omit for always.
        type: int
      gpu:
        description: Only fail calls on this GPU index.
        type: int
  health:
    description:
      - Health readings per GPU; each entry changes only the keys it gives (set a counter back to 0 to clear an
        error). Volatile ECC counters reset at a GPU reset or reboot.
    type: list
    elements: dict
    suboptions:
      gpu:
        description: GPU index.
        type: int
        required: true
      ecc_volatile_uncorrected:
        description: Uncorrected ECC errors since the driver loaded.
        type: int
      ecc_aggregate_uncorrected:
        description: Uncorrected ECC errors over the GPU's life.
        type: int
      ecc_volatile_corrected:
        description: Corrected ECC errors since the driver loaded.
        type: int
      ecc_aggregate_corrected:
        description: Corrected ECC errors over the GPU's life.
        type: int
      retired_pages_pending:
        description: Pages wait to be retired.
        type: bool
      remapped_rows_pending:
        description: Row remapping waits for a GPU reset.
        type: bool
      remapped_rows_failure:
        description: Row remapping failed.
        type: bool
      temperature_c:
        description: GPU temperature.
        type: int
      power_w:
        description: Power draw in watts.
        type: float
      utilization_gpu_pct:
        description: GPU utilization in percent.
        type: int
      utilization_memory_pct:
        description: Memory utilization in percent.
        type: int
      lost:
        description: The GPU fell off the bus; NVML calls on it fail with NVML_ERROR_GPU_IS_LOST until a reset.
        type: bool
  reboot:
    description:
      - Simulate a host reboot before O(processes), O(faults) and O(health) apply. Pending MIG modes take effect on Ampere,
        MIG mode is lost on Hopper and newer, all MIG instances and processes are gone, volatile ECC counters
        and non-persistent settings go back to their defaults.
      - Always reports a change.
    type: bool
    default: false
  reset:
    description:
      - Recreate the host from O(gpus) (new UUIDs, no MIG instances, no processes, no faults). Always a change.
    type: bool
    default: false
  seed:
    description:
      - Seed for the GPU UUIDs and serials of a new host, for reproducible state files.
    type: int
attributes:
  check_mode:
    support: full
    description: Reports the change and the diff; writes nothing.
  diff_mode:
    support: full
    description: Before and after summary of the simulated host (GPUs, MIG mode, instances, processes, health, faults).
  idempotent:
    support: partial
    description: Idempotent except for the options that are events.
    details: O(reboot=true) and O(reset=true) always change the host; everything else is idempotent.
  platform:
    support: full
    platforms: posix
    description: Any POSIX host; writes a JSON file.
seealso:
  - module: gpuops.k8s.gpu_info
  - module: gpuops.k8s.mig_mode
"""

EXAMPLES = r"""
- name: Create a simulated DGX A100
  gpuops.k8s.nvml_simulator:
    path: /var/tmp/gpuops-sim/dgx-a100-01.json
    gpus:
      - model: a100_80gb
        count: 8

- name: Run a process on GPU instance 1 of GPU 0
  gpuops.k8s.nvml_simulator:
    path: /var/tmp/gpuops-sim/dgx-a100-01.json
    processes:
      - gpu: 0
        gpu_instance_id: 1
        pid: 4242
        name: vllm

- name: Make the next GPU instance creation fail once
  gpuops.k8s.nvml_simulator:
    path: /var/tmp/gpuops-sim/dgx-a100-01.json
    faults:
      - call: nvmlDeviceCreateGpuInstanceWithPlacement
        error: NVML_ERROR_INSUFFICIENT_RESOURCES
        count: 1

- name: Inject an uncorrected ECC error on GPU 3
  gpuops.k8s.nvml_simulator:
    path: /var/tmp/gpuops-sim/dgx-a100-01.json
    health:
      - gpu: 3
        ecc_volatile_uncorrected: 1

- name: Reboot the simulated host
  gpuops.k8s.nvml_simulator:
    path: /var/tmp/gpuops-sim/dgx-a100-01.json
    reboot: true

- name: Use the simulated host in the NVML modules
  gpuops.k8s.gpu_info:
    simulator: /var/tmp/gpuops-sim/dgx-a100-01.json
"""

RETURN = r"""
path:
  description: The state file.
  returned: always
  type: str
  sample: /var/tmp/gpuops-sim/dgx-a100-01.json
created:
  description: Whether the host was (or in check mode would be) created or recreated.
  returned: when O(state=present)
  type: bool
  sample: true
rebooted:
  description: Whether a reboot was simulated.
  returned: when O(state=present)
  type: bool
  sample: false
simulator:
  description: Summary of the simulated host after the run.
  returned: when O(state=present)
  type: dict
  contains:
    driver_version: {description: Driver version., type: str, sample: "550.127.08"}
    boot_id: {description: Incremented by every simulated reboot., type: int, sample: 1}
    faults: {description: Faults still armed., type: list, elements: dict, sample: []}
    gpus:
      description: GPUs with model, NVML name, UUID, PCI bus id, MIG mode, GPU instances, processes and health overrides.
      type: list
      elements: dict
      sample: [{index: 0, model: a100_80gb, name: NVIDIA A100-SXM4-80GB, uuid: GPU-5a4c2e1d-0b7f-4f1e-9d7c-2a1f0e6b3c44,
                pci_bus_id: "00000000:07:00.0", mig_mode_current: false, mig_mode_pending: false, gpu_instances: [],
                processes: [], health: {}}]
  sample: {}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.configure import configure


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            gpus=dict(type="list", elements="dict", options=dict(
                model=dict(type="str", required=True),
                count=dict(type="int", default=1),
            )),
            driver_version=dict(type="str"),
            processes=dict(type="list", elements="dict", options=dict(
                gpu=dict(type="int", required=True),
                gpu_instance_id=dict(type="int"),
                compute_instance_id=dict(type="int"),
                pid=dict(type="int", required=True),
                name=dict(type="str", default="python"),
                used_memory_mib=dict(type="int", default=0),
            )),
            faults=dict(type="list", elements="dict", options=dict(
                call=dict(type="str", required=True),
                error=dict(type="str", default="NVML_ERROR_UNKNOWN"),
                count=dict(type="int"),
                gpu=dict(type="int"),
            )),
            health=dict(type="list", elements="dict", options=dict(
                gpu=dict(type="int", required=True),
                ecc_volatile_uncorrected=dict(type="int"),
                ecc_aggregate_uncorrected=dict(type="int"),
                ecc_volatile_corrected=dict(type="int"),
                ecc_aggregate_corrected=dict(type="int"),
                retired_pages_pending=dict(type="bool"),
                remapped_rows_pending=dict(type="bool"),
                remapped_rows_failure=dict(type="bool"),
                temperature_c=dict(type="int"),
                power_w=dict(type="float"),
                utilization_gpu_pct=dict(type="int"),
                utilization_memory_pct=dict(type="int"),
                lost=dict(type="bool"),
            )),
            reboot=dict(type="bool", default=False),
            reset=dict(type="bool", default=False),
            seed=dict(type="int"),
        ),
        supports_check_mode=True,
    )
    run_and_exit(module, lambda: configure(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
