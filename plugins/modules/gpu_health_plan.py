#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_health_plan
short_description: Decide which GPU nodes to cordon or uncordon from health verdicts
version_added: "0.1.0"
description:
  - Takes the verdicts of M(gpuops.k8s.gpu_health_check) for every GPU host and the Kubernetes
    Node objects of the GPU node pool, and returns one action per node with the exact Node merge
    patch to apply (taint, C(spec.unschedulable), audit annotations and a fault label).
  - V(cordon) an unhealthy node, V(keep) a node the health check already quarantined,
    V(wait) a recovering node that has not been healthy for O(uncordon_after) checks in a row yet,
    V(uncordon) a node that has, V(blocked) when the circuit breaker refuses more quarantine,
    V(report) when O(auto_cordon=false), V(none) otherwise.
  - The circuit breaker never lets the health check quarantine more than
    O(max_unhealthy_fraction) of the GPU nodes (counting nodes it already holds).
  - A node cordoned by someone else (no C(gpuops.k8s/health.cordoned-by) annotation) is never
    touched, and a node labelled C(gpuops.k8s/health.managed=false) is left alone.
  - Apply the patches with
    M(kubernetes.core.k8s) (O(kubernetes.core.k8s#module:state=patched), C(merge_type=merge)), as the
    C(gpuops.k8s.gpu_health) role does.
author:
  - gpuops.k8s maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.k8s.attributes.computation
options:
  verdicts:
    description: Node name to M(gpuops.k8s.gpu_health_check) result. Nodes without an entry are left as they are.
    type: dict
    required: true
  nodes:
    description: The Node objects of the GPU node pool (the RV(kubernetes.core.k8s_info#module:resources) list).
    type: list
    elements: dict
    required: true
  auto_cordon:
    description: Quarantine unhealthy nodes. With V(false) they are only reported.
    type: bool
    default: true
  dry_run:
    description: Plan only; every action comes back with RV(actions[].applied=false).
    type: bool
    default: true
  uncordon_after:
    description: Healthy checks in a row before a quarantined node is uncordoned (hysteresis).
    type: int
    default: 3
  max_unhealthy_fraction:
    description: The circuit breaker, the largest share (0 to 1) of GPU nodes the health check may hold quarantined.
    type: float
    default: 0.25
  taint:
    description: The taint put on a quarantined node, or null for cordon only.
    type: dict
    default: {key: nvidia.com/gpu-error, value: fatal, effect: NoSchedule}
  now:
    description: Timestamp written to the audit annotations (ISO 8601).
    type: str
    default: ""
  alerts:
    description:
      - Node name to a list of M(gpuops.k8s.gpu_health_alert) results (event-driven remediation).
      - A firing alert adds its problem to the node's verdict; while it fires the node keeps it in the
        C(gpuops.k8s/health.alerts) annotation, so checks without the alert keep the node quarantined until the
        resolved alert arrives. Dropped alerts (RV(gpuops.k8s.gpu_health_alert#module:accepted=false)) count for nothing.
    type: dict
    default: {}
  dra_dynamic_nodes:
    description:
      - Nodes that hand out their GPUs through NVIDIA's DRA driver with DynamicMIG (C(device_plugin_gpu_allocation=dra-dynamic)).
      - Such a node is quarantined per GPU, not cordoned - RV(device_taint_rules) holds one C(resource.k8s.io/v1)
        DeviceTaintRule per device of each failing GPU (the whole GPU and every MIG device of it, taint key
        C(gpuops.k8s/gpu-health)), C(NoExecute) for an uncorrectable ECC error or a problem needing a GPU reset or a
        reboot (fatal Xids), C(NoSchedule) for a warning (temperature, an Xid whose action is C(drain)). The node patch
        writes the audit annotations and the fault label only; the other GPUs keep serving.
      - Recovery (V(uncordon), after O(uncordon_after) healthy checks in a row) deletes the node's rules. The circuit
        breaker counts such a node as quarantined.
      - A problem that names no GPU (GPUs missing, an Xid on an unknown PCI bus), or a failing GPU the node's slices
        lack, cordons the node as in the other modes, beside the rules of the GPUs that can be named.
    type: list
    elements: str
    default: []
  resource_slices:
    description: The ResourceSlices of O(dra_dynamic_nodes) (the RV(kubernetes.core.k8s_info#module:resources) list).
    type: list
    elements: dict
    default: []
  device_taint_rules:
    description: >-
      The DeviceTaintRules the health check made before (label C(gpuops.k8s/health-node)), so that recovery deletes
      them and a rule is never weakened while its node stays quarantined.
    type: list
    elements: dict
    default: []
seealso:
  - module: gpuops.k8s.gpu_health_check
  - module: kubernetes.core.k8s
"""

EXAMPLES = r"""
- name: Plan health actions for the GPU node pool
  gpuops.k8s.gpu_health_plan:
    verdicts: "{{ dict(groups['gpu_nodes'] | zip(groups['gpu_nodes'] | map('extract', hostvars, 'gpu_health_verdict'))) }}"
    nodes: "{{ gpu_node_list.resources }}"
    dry_run: false
    max_unhealthy_fraction: 0.2
  register: plan

- name: Apply the planned patches
  kubernetes.core.k8s:
    kind: Node
    name: "{{ item.node }}"
    state: patched
    merge_type: merge
    definition: "{{ item.patch }}"
  loop: "{{ plan.actions | selectattr('applied') }}"
"""

RETURN = r"""
actions:
  description: One entry per node.
  returned: success
  type: list
  elements: dict
  contains:
    node:
      description: Node name.
      type: str
    action:
      description: V(cordon), V(keep), V(wait), V(uncordon), V(blocked), V(report) or V(none).
      type: str
    reason:
      description: Why.
      type: str
    patch:
      description: Node merge patch to apply, null when nothing changes.
      type: dict
    applied:
      description: Whether the patch is meant to be applied (false under O(dry_run)).
      type: bool
  sample: [{node: dgx-a100-01, action: cordon, reason: "GPU 0: Xid 79", applied: true, patch: {spec: {unschedulable: true}}}]
breaker:
  description: The circuit breaker's state.
  returned: success
  type: dict
  sample: {total_nodes: 8, limit: 2, fraction: 0.25, quarantined_before: [], open: false, blocked: []}
summary:
  description: Count of nodes per action.
  returned: success
  type: dict
  sample: {none: 7, cordon: 1}
device_taint_rules:
  description:
    - The DeviceTaintRules to create or update (C(apply), manifests) and to delete (C(delete), C(apiVersion), C(kind) and
      C(metadata.name) of each) for the
      O(dra_dynamic_nodes); both empty under O(dry_run). Actions of those nodes also carry C(scope) (V(devices) or
      V(node)) and C(device_taint_rules), the effect wanted per failing GPU index.
  returned: success
  type: dict
  sample: {apply: [], delete: [{apiVersion: resource.k8s.io/v1, kind: DeviceTaintRule, metadata: {name: gpuops-health-node1-gpu-3}}]}
dry_run:
  description: O(dry_run) as given.
  returned: success
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.health.checks import DEFAULT_TAINT
from ansible_collections.gpuops.k8s.plugins.module_utils.health.device_taints import plan_with_device_taints


def main():
    module = AnsibleModule(
        argument_spec=dict(
            verdicts=dict(type="dict", required=True),
            nodes=dict(type="list", elements="dict", required=True),
            auto_cordon=dict(type="bool", default=True),
            dry_run=dict(type="bool", default=True),
            uncordon_after=dict(type="int", default=3),
            max_unhealthy_fraction=dict(type="float", default=0.25),
            taint=dict(type="dict", default=dict(DEFAULT_TAINT)),
            now=dict(type="str", default=""),
            alerts=dict(type="dict", default={}),
            dra_dynamic_nodes=dict(type="list", elements="str", default=[]),
            resource_slices=dict(type="list", elements="dict", default=[]),
            device_taint_rules=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    policy = {"auto_cordon": p["auto_cordon"], "dry_run": p["dry_run"], "uncordon_after": p["uncordon_after"],
              "max_unhealthy_fraction": p["max_unhealthy_fraction"], "taint": p["taint"]}
    # a plan only (changed=false): the role applies it
    run_and_exit(module, lambda: plan_with_device_taints(
        p["verdicts"], p["nodes"], policy, now=p["now"], alerts=p["alerts"], dra_dynamic_nodes=p["dra_dynamic_nodes"],
        resource_slices=p["resource_slices"], device_taint_rules=p["device_taint_rules"]), changed=False)


if __name__ == "__main__":
    main()
