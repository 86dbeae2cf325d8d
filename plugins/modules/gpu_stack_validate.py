#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_stack_validate
short_description: Validate and normalize the inputs of the Kubernetes GPU stack roles
version_added: "0.1.0"
description:
  - Checks the inputs of the P(gpuops.k8s.device_plugin#role), P(gpuops.k8s.dcgm_exporter#role),
    P(gpuops.k8s.gpu_tenancy#role) and P(gpuops.k8s.gpu_autoscaling#role) roles before any Kubernetes object changes,
    and returns them normalized for the role templates.
  - Device plugin configs are checked field by field against the device plugin v0.20.0 config file (C(version=v1)),
    MIG strategy, device list strategy, time-slicing and MPS replicas (at least 2), mutually exclusive sharing modes,
    MPS restrictions, per-node config labels that name an existing config.
  - Tenant quotas only keep C(requests.<resource>) keys for GPU resources, because Kubernetes never enforces
    C(limits.) or bare keys for extended resources; such keys are converted and a warning is emitted. MIG resource
    names are checked against the GPU catalog.
  - With O(nodes), the sum of the tenant GPU quotas per resource is compared with the cluster's allocatable GPUs and
    MIG slices; O(capacity_policy) decides whether an overcommit fails or warns.
  - PriorityClass C(value) and C(preemptionPolicy) are immutable; a change is refused, or planned as a replacement
    with O(priority_class_change_policy=replace).
  - HPA bounds, behavior windows and periods are checked against the autoscaling/v2 API limits.
  - O(component=queueing) returns the Kueue objects of the P(gpuops.k8s.gpu_queueing#role) role for O(tenants) on
    O(nodes) - one ResourceFlavor per GPU product and MIG profile the nodes offer, one ClusterQueue per tenant in one
    cohort, LocalQueues, WorkloadPriorityClasses - and fails (O(capacity_policy=fail)) when the tenants' nominal quota
    of a flavor exceeds what the nodes of that flavor offer.
  - O(component=dra) returns the DeviceClasses for whole GPUs, any MIG device and each MIG profile, and each tenant's
    claim quota (C(<class>.deviceclass.resource.k8s.io/devices)) from its GPU quota (P(gpuops.k8s.device_plugin#role)
    with C(device_plugin_gpu_allocation=dra), P(gpuops.k8s.gpu_tenancy#role) with C(gpu_tenancy_dra_quotas=true)).
  - This module only computes; it talks to no API server and changes nothing.
author:
  - gpuops.k8s maintainers (@gpuops)
options:
  component:
    description: Which role's inputs to validate.
    type: str
    required: true
    choices: [device_plugin, dcgm_exporter, tenancy, autoscaling, queueing, dra]
  configs:
    description: Named device plugin configs (name -> config file content), for O(component=device_plugin).
    type: dict
  default_config:
    description: The config nodes without the C(nvidia.com/device-plugin.config) label use.
    type: str
    default: default
  node_configs:
    description: Node name -> config name, the label values the role sets on nodes.
    type: dict
  gfd_enabled:
    description: Whether GPU Feature Discovery is deployed (MPS needs it).
    type: bool
    default: true
  mps_root:
    description: Host directory of the MPS control daemon pipes and shm.
    type: str
    default: /run/nvidia/mps
  metrics:
    description:
      - DCGM exporter metrics, a list of C({field, type, help}), for O(component=dcgm_exporter).
      - DCGM profiling fields (C(DCGM_FI_PROF_*)) are ratios or rates and must be V(gauge), as in dcgm-exporter's own CSVs.
    type: list
    elements: dict
  devices:
    description:
      - The devices dcgm-exporter watches (C(DCGM_EXPORTER_DEVICES_STR)), for O(component=dcgm_exporter).
      - V(f) (GPUs, or their GPU instances where MIG is enabled), C(g[:range]) (GPUs) or C(i[:range]) (GPU instances); a range
        is indexes or spans, for example V(g:0,2-4). Nothing else is valid.
    type: str
    default: f
  tenants:
    description: Tenants for O(component=tenancy) (see the P(gpuops.k8s.gpu_tenancy#role) role).
    type: list
    elements: dict
  priority_classes:
    description: PriorityClasses, name -> C({value, preemption_policy, description, global_default}).
    type: dict
  existing_priority_classes:
    description: The PriorityClass objects that exist now (from M(kubernetes.core.k8s_info)).
    type: list
    elements: dict
  priority_class_change_policy:
    description: What to do when an existing class would change its immutable value or preemption policy.
    type: str
    choices: [fail, replace]
    default: fail
  nodes:
    description:
      - Node objects (from M(kubernetes.core.k8s_info)) for the capacity check. Without it no capacity check runs.
    type: list
    elements: dict
  capacity_policy:
    description: What to do when tenant GPU quotas exceed the cluster's allocatable GPUs or MIG slices.
    type: str
    choices: [fail, warn, ignore]
    default: fail
  hpas:
    description: HPA definitions for O(component=autoscaling) (see the P(gpuops.k8s.gpu_autoscaling#role) role).
    type: list
    elements: dict
  gpu_quotas:
    description:
      - For O(component=tenancy). V(false) leaves the GPU keys out of the tenants' ResourceQuotas (scoped ones too,
        dropping a scoped quota left empty), for tenants whose GPU workloads Kueue admits
        (P(gpuops.k8s.gpu_queueing#role)), because a GPU ResourceQuota would refuse the pods of a workload that borrows
        quota from the cohort. The capacity check then has nothing to check for GPUs.
    type: bool
    default: true
  queueing:
    description:
      - Options for O(component=queueing) with keys C(cohort) (default C(gpu-tenants)), C(queue_name) (the LocalQueue
        in each tenant namespace, default C(gpu)), C(within_cluster_queue) (Never, LowerPriority,
        LowerOrNewerEqualPriority), C(reclaim_within_cohort) (Never, LowerPriority, Any) and C(tolerations) (added to
        every ResourceFlavor).
      - Without the two policies they are mapped from O(priority_classes)
        (a class with C(PreemptLowerPriority) gives C(LowerPriority) and C(Any), otherwise C(Never)).
    type: dict
  dra:
    description: Options for O(component=dra); C(profiles) limits the per-profile DeviceClasses (default every MIG
      profile of the GPU catalog); C(extended_resources=true) gives each per-profile class
      an C(extendedResourceName) of C(nvidia.com/mig-<profile>) (DRAExtendedResource, Kubernetes 1.37), so pod specs asking for
      that extended resource are served through DRA (the C(dra-dynamic) allocation of P(gpuops.k8s.device_plugin#role)).
    type: dict
attributes:
  check_mode:
    support: full
    description: Computes the same result in check mode; it never changes anything.
  diff_mode:
    support: none
    description: Nothing to diff; the roles' M(kubernetes.core.k8s) tasks show the object diffs.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller (or any host with Python); needs no Kubernetes client.
notes:
  - Facts used for the checks are in C(docs/k8s-stack.md).
seealso:
  - module: kubernetes.core.k8s
"""

EXAMPLES = r"""
- name: Validate device plugin configs before applying them
  gpuops.k8s.gpu_stack_validate:
    component: device_plugin
    default_config: default
    configs:
      default:
        version: v1
        flags: {migStrategy: none}
      a100-mixed:
        version: v1
        flags: {migStrategy: mixed}
      ts4:
        version: v1
        sharing:
          timeSlicing:
            resources:
              - {name: nvidia.com/gpu, replicas: 4}
    node_configs:
      dgx-a100-01: a100-mixed
  register: plan

- name: Check tenant quotas against the cluster
  gpuops.k8s.gpu_stack_validate:
    component: tenancy
    tenants:
      - name: team-a
        quota:
          hard:
            requests.nvidia.com/gpu: 4
            requests.nvidia.com/mig-1g.10gb: 8
    nodes: "{{ (lookup('kubernetes.core.k8s', kind='Node', wantlist=True)) }}"
    capacity_policy: warn
  register: tenancy
"""

RETURN = r"""
device_plugin:
  description: Normalized device plugin configs and a summary per config.
  returned: O(component=device_plugin)
  type: dict
  sample: {"configs": {"default": {"version": "v1", "flags": {"migStrategy": "none"}}},
           "summary": {"default": {"mig_strategy": "none", "sharing": "none", "replicas": 1}},
           "uses_mps": false, "uses_mig": false, "default_config": "default", "node_configs": {}}
devices:
  description: The validated O(devices), for O(component=dcgm_exporter).
  returned: O(component=dcgm_exporter)
  type: str
  sample: f
metrics_csv:
  description: The DCGM exporter collectors CSV built from O(metrics).
  returned: O(component=dcgm_exporter)
  type: str
  sample: "DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is active\n"
tenants:
  description: Tenants with normalized quotas (only C(requests.) keys for GPU resources).
  returned: O(component=tenancy)
  type: list
  elements: dict
  sample: [{"name": "team-a", "quota": {"hard": {"requests.nvidia.com/gpu": "4"}}, "priority_quotas": {}}]
priority_classes:
  description: Validated PriorityClasses.
  returned: O(component=tenancy)
  type: dict
  sample: {"gpu-critical": {"value": 1000000, "preemption_policy": "PreemptLowerPriority", "description": "",
                            "global_default": false}}
priority_class_plan:
  description: Which classes are created, updated in place, or replaced (deleted and re-created).
  returned: O(component=tenancy)
  type: dict
  sample: {"create": ["gpu-low"], "update": [], "replace": [], "changes": {}}
capacity:
  description: Quota vs allocatable per GPU resource; empty when O(nodes) is not given.
  returned: O(component=tenancy)
  type: dict
  sample: {"resources": {"nvidia.com/gpu": {"quota": 8, "allocatable": 16, "overcommitted": false,
                                            "tenants": {"team-a": 8}}},
           "allocatable": {"nvidia.com/gpu": 16}, "overcommitted": []}
queueing:
  description: Kueue manifests (C(flavors), C(cluster_queues), C(local_queues), C(priority_classes)), the
    per-flavor C(capacity) check, C(preemption), C(nominal) quota per tenant and flavor, and the validated C(tenants).
  returned: O(component=queueing)
  type: dict
  sample: {"capacity": {"flavors": {"mig-1g.10gb": {"resource": "nvidia.com/mig-1g.10gb", "quota": 6, "offered": 7,
                                                    "tenants": {"team-a": 4, "team-b": 2}, "overcommitted": false}},
                        "overcommitted": []},
           "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}}
dra:
  description: DeviceClass manifests (C(device_classes)) and the claim quota keys per tenant (C(quotas)).
  returned: O(component=dra)
  type: dict
  sample: {"quotas": {"team-a": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2",
                                 "mig-1g.10gb.nvidia.com.deviceclass.resource.k8s.io/devices": "4"}}}
hpas:
  description: Validated HPA specs (autoscaling/v2 field names).
  returned: O(component=autoscaling)
  type: list
  elements: dict
  sample: [{"name": "llm", "namespace": "team-a", "minReplicas": 1, "maxReplicas": 4, "metrics": [], "behavior": null,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"}, "labels": {}}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.validate import run_validate


def main():
    module = AnsibleModule(
        argument_spec=dict(
            component=dict(type="str", required=True, choices=["device_plugin", "dcgm_exporter", "tenancy", "autoscaling", "queueing", "dra"]),
            configs=dict(type="dict"),
            default_config=dict(type="str", default="default"),
            node_configs=dict(type="dict"),
            gfd_enabled=dict(type="bool", default=True),
            mps_root=dict(type="str", default="/run/nvidia/mps"),
            metrics=dict(type="list", elements="dict"),
            devices=dict(type="str", default="f"),
            tenants=dict(type="list", elements="dict"),
            priority_classes=dict(type="dict"),
            existing_priority_classes=dict(type="list", elements="dict"),
            priority_class_change_policy=dict(type="str", choices=["fail", "replace"], default="fail"),
            nodes=dict(type="list", elements="dict"),
            capacity_policy=dict(type="str", choices=["fail", "warn", "ignore"], default="fail"),
            hpas=dict(type="list", elements="dict"),
            gpu_quotas=dict(type="bool", default=True),
            queueing=dict(type="dict"),
            dra=dict(type="dict"),
        ),
        required_if=[
            ("component", "device_plugin", ("configs",)),
            ("component", "dcgm_exporter", ("metrics",)),
            ("component", "autoscaling", ("hpas",)),
        ],
        supports_check_mode=True,
    )
    try:
        result, warnings = run_validate(module.params)
    except GpuOpsError as e:
        module.fail_json(msg=e.msg, **e.details)
    for warning in warnings:
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
