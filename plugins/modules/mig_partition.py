#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig_partition
short_description: Declarative MIG partitioning of NVIDIA GPUs with minimal, placement-aware changes
version_added: "1.0.0"
description:
  - Brings the MIG (Multi-Instance GPU) layout of every GPU of a host to the state described by a
    mig-parted v1 config file (O(config_file) and O(config)) or by the same list of entries given
    inline as O(layout).
  - Config files that C(nvidia-mig-parted) accepts are accepted unchanged, including the GPU
    Operator's C(default-mig-parted-config) (V(all-disabled), V(all-enabled), V(all-1g.10gb),
    V(all-balanced), ...), with the same validation rules and walk semantics; a GPU that no entry
    matches is left exactly as it is.
  - Everything is validated on every GPU before anything changes. An unknown profile, too many
    instances, a layout whose compute or memory slices or placements do not fit, or an unknown
    config name fails with a message that names the valid values, and nothing is changed.
  - Unlike mig-parted, which destroys every instance of a GPU whose profile counts change, the plan is
    minimal. A GPU instance that is already in the target layout (same GPU instance profile, same
    compute instances) is kept wherever the rest of the target fits around it, so its workload keeps
    running. Only the difference is destroyed and created, at explicit placements.
  - A MIG instance with running processes is never destroyed unless O(force=true).
  - MIG mode is enabled or disabled where the config says so. On Ampere (A100, A30) the change stays
    pending until a GPU reset (see M(gpuops.k8s.mig_mode) with O(gpuops.k8s.mig_mode#module:reset=true))
    and RV(reset_required) is returned; the instances are created by a later run once the mode is
    active. Hopper and newer GPUs apply the mode at once and the layout is created in the same run.
  - An NVML error that is transient (C(NVML_ERROR_IN_USE) while a process still releases an instance,
    C(NVML_ERROR_TIMEOUT), C(NVML_ERROR_NOT_READY)) is tried again up to O(nvml_attempts) times in all, waiting
    O(nvml_backoff) seconds, then twice as long each time. Before each new try the GPU is read again, so a change
    the driver made although the call failed is not made twice (an instance is never created twice, and only the
    instance the plan names is destroyed). Each retry is listed in RV(nvml_retries).
  - Any other NVML error (C(INVALID_ARGUMENT), C(NOT_SUPPORTED), C(NO_PERMISSION), C(INSUFFICIENT_RESOURCES),
    C(GPU_IS_LOST), C(UNKNOWN), ...) stops the run at once.
  - If an NVML call fails halfway, the module stops and fails with the GPUs as they are now, the
    actions that completed, the one that failed and those not attempted; running it again converges.
author:
  - gpuops.k8s contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.k8s.nvml
  - gpuops.k8s.nvml.retries
  - gpuops.k8s.attributes
options:
  config_file:
    description:
      - Path, on the managed host, of a mig-parted v1 config file (with C(version) V(v1) and C(mig-configs)).
      - Mutually exclusive with O(layout).
    type: path
  config:
    description:
      - Name of the config in O(config_file) to apply, for example V(all-1g.10gb) or V(all-balanced)
        (the value of the C(nvidia.com/mig.config) node label in the GPU Operator).
      - May be omitted when the file holds exactly one config.
    type: str
  layout:
    description:
      - The entries of one mig-parted config given inline, with mig-parted's keys and rules.
      - Mutually exclusive with O(config_file).
      - Each entry has C(devices) (V(all) or a list of GPU indexes), C(mig-enabled) (bool), C(mig-devices)
        (a mapping profile to count, required when C(mig-enabled) is true, V({}) means MIG on with no
        instances) and optionally C(device-filter) (a string or list of C(0xDDDDVVVV) PCI ids, with an
        optional C(:0xSSSSVVVV) subsystem part).
      - Profiles are GPU instance profiles such as V(1g.10gb), V(3g.40gb) or V(1g.10gb+me), or compute
        instance profiles such as V(1c.3g.40gb) (compute instances of one slice inside 3g.40gb GPU
        instances, packed as mig-parted does).
    type: list
    elements: dict
  missing_gpus:
    description:
      - What to do when the config lists a GPU index (in C(devices)) that this host does not have.
      - V(fail) refuses before anything changes, naming the GPUs present; V(warn) skips those indexes with
        a warning naming the GPUs present, as mig-parted's walker does (a fleet-wide config file naming
        devices 0-7 then works on a 4-GPU host).
      - Default V(fail) with O(layout) and V(warn) with O(config_file). The gpuops.k8s.mig role passes V(warn)
        when its layout comes from a config file.
    type: str
    choices: [fail, warn]
  force:
    description:
      - Destroy MIG instances that have running processes when the target layout needs them gone.
      - Without it such a plan fails before anything changes and names the busy instances.
      - With it the plan includes those destroys (marked RV(actions[].forced) and run first on their GPU). NVML
        itself still refuses to destroy an instance while processes hold it (C(NVML_ERROR_IN_USE)); the module
        then stops with the report described in the notes. Stop the workloads (drain the node) first.
    type: bool
    default: false
requirements:
  - PyYAML for the Python running the module, to read O(config_file) (it comes with ansible-core)
  - root or CAP_SYS_ADMIN on real GPU hosts to change MIG mode and create or destroy MIG instances
attributes:
  check_mode:
    description: Returns the planned RV(actions) and the predicted layout without calling any NVML setter.
  diff_mode:
    description: MIG mode and instances (profile and placement) before and after, per GPU UUID.
  idempotent:
    support: full
    description: A second run with the same config reports no change (every action V(keep)).
notes:
  - The module never resets a GPU or reboots a host; use M(gpuops.k8s.mig_mode) with O(gpuops.k8s.mig_mode#module:reset=true)
    or a reboot handler when RV(reset_required) is true.
  - Stop GPU clients such as the device plugin, DCGM and dcgm-exporter before changing MIG mode; changing
    instances only needs the affected instances to be idle.
  - The GPUs' changes are independent. When an NVML call fails on one GPU (a permanent error, or a transient one past
    O(nvml_attempts)), the rest of that GPU is not attempted, the module goes on with the host's other GPUs and fails at
    the end naming every failed GPU and its error, so a re-run redoes only the failed GPUs. An error that says the host
    cannot be changed at all (NVML_ERROR_NO_PERMISSION, DRIVER_NOT_LOADED, UNINITIALIZED, LIBRARY_NOT_FOUND,
    FUNCTION_NOT_FOUND, LIB_RM_VERSION_MISMATCH) stops the run there; the GPUs after it are not attempted.
  - When an NVML call fails the module fails with C(gpus), C(resources) and C(diagram) read again after the
    run, C(completed) (the actions done, and every NVML call of a failed action that changed the GPU before it
    failed, such as V(destroy_compute_instance) before a failed GPU instance destroy or V(create_gpu_instance) whose
    rollback failed, each with C(nvml_call) and C(part_of)), C(failed_action) (the first failure, with C(error),
    C(nvml_return) and C(error_details)), C(failed_actions) (one per failed GPU, in order), C(failed_gpus),
    C(not_attempted) (the actions of the failed GPUs after their failure, and of the GPUs not attempted),
    C(not_attempted_gpus), C(gpu_results) (per GPU C(gpu), C(uuid), C(status) V(done), V(failed), V(not_attempted) or
    V(unchanged), C(completed) and C(not_attempted) counts, and for a failed GPU C(error) and C(failed_action)),
    C(reset_required), C(reset_required_gpus), C(nvml_retries) and C(changed=true) if anything was done. When the last
    try of a transient error failed, its C(error_details) has C(attempts) and C(retries_exhausted=true) and the message
    says after how many attempts. No instance the plan does not destroy is touched on any GPU. Running the task again
    converges.
  - Invalid input fails before anything changes with C(errors) (one per GPU, with C(gpu) and C(msg)) and, where they
    apply, C(valid_profiles), C(valid_configs), C(max_instances) or C(busy_instances).
seealso:
  - module: gpuops.k8s.gpu_info
  - module: gpuops.k8s.mig_mode
  - module: gpuops.k8s.nvml_simulator
  - name: mig-parted config format
    description: NVIDIA's MIG partition editor, whose v1 config files this module reads.
    link: https://github.com/NVIDIA/mig-parted
"""

EXAMPLES = r"""
- name: Apply the GPU Operator's all-1g.10gb config from a mig-parted config file
  gpuops.k8s.mig_partition:
    config_file: /etc/nvidia-mig-manager/config.yaml
    config: all-1g.10gb

- name: Two 3g.40gb on GPUs 0-3, one 4g.40gb and three 1g.10gb on the others
  gpuops.k8s.mig_partition:
    layout:
      - devices: [0, 1, 2, 3]
        mig-enabled: true
        mig-devices: {"3g.40gb": 2}
      - devices: [4, 5, 6, 7]
        mig-enabled: true
        mig-devices: {"4g.40gb": 1, "1g.10gb": 3}

- name: Preview a change without touching the GPUs
  gpuops.k8s.mig_partition:
    config_file: /etc/nvidia-mig-manager/config.yaml
    config: all-balanced
  check_mode: true
  register: mig_plan

- name: Show what would be kept, destroyed and created
  ansible.builtin.debug:
    var: mig_plan.actions

- name: Only the H100 80GB cards, by PCI id; other GPUs are left as they are
  gpuops.k8s.mig_partition:
    layout:
      - device-filter: "0x233010DE"
        devices: all
        mig-enabled: true
        mig-devices: {"1c.3g.40gb": 3, "4g.40gb": 1}

- name: Repartition even where instances are busy (their processes lose the GPU)
  gpuops.k8s.mig_partition:
    layout:
      - devices: all
        mig-enabled: true
        mig-devices: {"7g.80gb": 1}
    force: true

- name: Print the slice diagram
  gpuops.k8s.mig_partition:
    config_file: /etc/nvidia-mig-manager/config.yaml
    config: all-3g.40gb
  register: mig
- name: Show the layout
  ansible.builtin.debug:
    var: mig.diagram
"""

RETURN = r"""
actions:
  description:
    - The plan, in the order it is executed per GPU. V(keep) entries are instances left running;
      V(set_mig_mode), V(destroy) and V(create) are changes.
    - In check mode the same list is returned and nothing is executed.
  returned: always
  type: list
  elements: dict
  contains:
    gpu:
      description: GPU index.
      type: int
      sample: 0
    uuid:
      description: GPU uuid.
      type: str
      sample: GPU-5d3a0d6e-1c1b-4c7e-9f00-3b8f1f0a4c21
    action:
      description: V(keep), V(set_mig_mode), V(destroy) or V(create).
      type: str
      sample: create
    enabled:
      description: The MIG mode requested (set_mig_mode).
      type: bool
      sample: true
    profile:
      description: GPU instance profile (keep, destroy, create).
      type: str
      sample: 3g.40gb
    placement:
      description: Placement in memory slices (keep, destroy, create).
      type: dict
      sample: {start: 4, size: 4}
    gpu_instance_id:
      description: NVML GPU instance id (keep, destroy; create once done).
      type: int
      sample: 2
    compute_instances:
      description: Compute slices of each compute instance created in the GPU instance (create).
      type: list
      elements: int
      sample: [3]
    mig_devices:
      description: Names of the MIG devices of the instance, one per compute instance.
      type: list
      elements: str
      sample: [1c.3g.40gb, 1c.3g.40gb, 1c.3g.40gb]
    busy:
      description: Whether processes run on the instance (keep, destroy).
      type: bool
      sample: false
    forced:
      description: A busy instance destroyed because of O(force=true) (destroy).
      type: bool
      sample: false
    after_reset:
      description: The instance is created by a later run, once a pending MIG mode change is active (create).
      type: bool
      sample: true
  sample:
    - {gpu: 0, action: keep, profile: 3g.40gb, placement: {start: 4, size: 4}, gpu_instance_id: 2, busy: true}
    - {gpu: 0, action: destroy, profile: 2g.20gb, placement: {start: 0, size: 2}, gpu_instance_id: 5, busy: false}
    - {gpu: 0, action: create, profile: 1g.10gb, placement: {start: 0, size: 1}, compute_instances: [1]}
gpus:
  description: Every GPU of the host after the run (predicted in check mode), in the shape of M(gpuops.k8s.gpu_info).
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      uuid: GPU-5d3a0d6e-1c1b-4c7e-9f00-3b8f1f0a4c21
      model: a100_80gb
      mig_mode_current: true
      mig_mode_pending: true
      instances:
        - {profile: 3g.40gb, placement: {start: 4, size: 4}, gpu_instance_id: 2, compute_instance_id: 0}
reset_required:
  description: A MIG mode change is pending until a GPU reset (Ampere); the layout of those GPUs is applied by a later run.
  returned: always
  type: bool
  sample: false
reset_required_gpus:
  description: Indexes of the GPUs waiting for a reset.
  returned: always
  type: list
  elements: int
  sample: []
skipped_gpus:
  description: GPUs the config matched that cannot be partitioned (no MIG support, or lost), with the reason.
  returned: always
  type: list
  elements: dict
  sample: [{index: 4, uuid: GPU-1b2c3d4e-5f60-4718-92a3-b4c5d6e7f809, name: NVIDIA L40S, reason: MIG not supported}]
absent_gpus:
  description: GPU indexes the config lists that this host does not have (skipped, with a warning; see O(missing_gpus)).
  returned: always
  type: list
  elements: int
  sample: [4, 5, 6, 7]
resources:
  description:
    - Kubernetes extended resources the NVIDIA device plugin advertises for this host with the mixed MIG
      strategy; a GPU without MIG (or with MIG disabled) counts as V(nvidia.com/gpu).
  returned: always
  type: dict
  sample: {"nvidia.com/mig-1g.10gb": 56}
diagram:
  description: One line per GPU picturing its memory slices and the instances on them (V(*) = busy, V(·) = free).
  returned: always
  type: list
  elements: str
  sample:
    - "GPU0 a100_80gb [3g.40gb                            |2g.20gb          |1g.10gb |1g.10gb ]  7/7 compute"
nvml_retries:
  description:
    - One entry per transient NVML error that was tried again (see O(nvml_attempts)); empty when none was.
    - Each has C(gpu), C(action) (V(set_mig_mode), V(destroy) or V(create)), C(profile) and C(gpu_instance_id) where the
      action has them, C(error) (the NVML error name), C(nvml_call), C(attempt) (the try that failed, from 1) and
      C(backoff_s) (the wait before the next try).
  returned: always
  type: list
  elements: dict
  sample:
    - {gpu: 3, action: destroy, profile: 1g.10gb, gpu_instance_id: 13, error: NVML_ERROR_IN_USE,
       nvml_call: nvmlGpuInstanceDestroy, attempt: 1, backoff_s: 1.0}
diff:
  description: MIG mode and instances before and after, keyed by GPU uuid (in diff mode).
  returned: when diff mode is on
  type: dict
  sample:
    before: {GPU-5d3a: {index: 0, mig_mode_current: true, instances: ["7g.80gb @0:8"]}}
    after: {GPU-5d3a: {index: 0, mig_mode_current: true, instances: ["3g.40gb @0:4", "3g.40gb @4:4"]}}
"""

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import writable
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.module_spec import nvml_module, retry_options


def main():
    module = nvml_module(
        dict(
            retry_options(),
            config_file=dict(type="path"),
            config=dict(type="str"),
            layout=dict(type="list", elements="dict"),
            force=dict(type="bool", default=False),
            missing_gpus=dict(type="str", choices=["fail", "warn"]),
        ),
        mutually_exclusive=[("config_file", "layout")],
        required_one_of=[("config_file", "layout")],
        required_by={"config": "config_file"},
    )

    def partition():
        with writable.open_nvml(module.params["simulator"], read_only=module.check_mode) as backend:
            return mig_engine.run_mig_partition(backend, module.params, check_mode=module.check_mode, diff=module._diff)

    run_and_exit(module, partition, warnings=True)


if __name__ == "__main__":
    main()
