#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_plan
short_description: Plan a GPU fleet from tenants' demand - MIG layouts, sharing modes, quotas and cost
version_added: "0.1.0"
description:
  - Given the GPU nodes and the tenants' workloads, decides which MIG layout and which device-plugin sharing mode
    each node gets, how many GPUs are needed and what they cost, as one reviewable plan. It returns the inputs of
    the collection's roles - a mig-parted config for M(gpuops.k8s.mig_partition) and C(playbooks/mig_reconfigure.yml),
    per-node device-plugin configs for the C(device_plugin) role, tenant quotas for the C(gpu_tenancy) role - and
    optionally writes a Markdown + SVG report.
  - "Rules (from the GPU catalog): MIG profile sizes and placements per model; one sharing mode per node
    (time-slicing or MPS or MIG mixed); strict isolation is a MIG instance or a whole GPU, never time-slicing or MPS;
    time-sliced and MPS replicas on one GPU fit its memory; models without MIG (L40S, RTX 4090, L4) never get MIG.
    Demand that cannot fit is returned in RV(plan.unplaced) with the limit it hit."
  - The exact solver is a MILP (scipy.optimize.milp, HiGHS); the heuristic is first-fit decreasing over catalog-valid
    layouts, in bulk, and plans 10,000 GPUs in well under a second. Both keep current layouts where they still
    serve (O(disruption_budget)). C(plan.summary.lower_bound_gpus) is the LP relaxation's bound (scipy) or a
    covering bound.
  - Pure computation on the controller (no NVML); the only change it makes is writing O(report). docs/planning.md
    has the decision tree, the formulation and a worked example.
author:
  - gpuops.k8s maintainers (@gpuops)
requirements:
  - scipy >= 1.9 and numpy on the controller for O(solver=exact), the heuristic's LP rounding and the LP bound
    (without them the heuristic runs its greedy part only)
notes:
  - The report (O(report)) of a directory is its C(plan.md), with its pictures C(plan-slices.svg),
    C(plan-utilisation.svg) and C(plan-cost.svg) beside it.
extends_documentation_fragment:
  - gpuops.k8s.report
attributes:
  check_mode:
    description: The plan is computed; O(report) is not written and C(changed) says whether it would be.
  diff_mode:
    description: Each node's MIG config and device-plugin config before (its C(current)) and after; the report.
options:
  nodes:
    description:
      - The GPU nodes - C(name) (the Kubernetes node name), C(gpus) (a list of C(model) and C(count); model as NVML
        names it, e.g. C(NVIDIA A100-SXM4-80GB), C(NVIDIA L40S), or a catalog key), C(labels), C(current).
      - C(current) is today's MIG layout - a mig.config name (C(all-disabled), C(all-balanced), C(all-<profile>), or a
        config of O(current_configs)), a mapping profile to count, or a list with one of those per GPU. Build the list
        with the filters C(gpuops.k8s.gpu_plan_nodes) (from gpu_info facts or gpu_nodes inventory host vars).
      - C(busy) is the number of GPU pods running on the node (the filter C(gpuops.k8s.gpu_replan_nodes) sets it) - on
        equal cost a plan keeps the layouts of busy nodes and changes idle nodes first.
    type: list
    elements: dict
    required: true
  demand:
    description:
      - The tenants' workloads - C(tenant) (its namespace), C(name), C(replicas), C(memory_gb) (what one replica needs
        on one device), C(compute) (fraction of a GPU, default the slice the memory implies), C(kind) (V(inference),
        V(training), V(dev)), C(isolation) (V(strict), V(shared)), C(priority) (higher is placed first when GPUs run
        out), C(gpus_per_replica) (whole GPUs on one node), C(resource) (optional - the extended resource the item's
        pods already request, e.g. C(nvidia.com/mig-3g.40gb); the item is then served only on models where it gets
        that resource; the filter C(gpuops.k8s.gpu_pending_demand) sets it for pending pods).
    type: list
    elements: dict
    required: true
  objective:
    description: V(min_cost) - USD per hour at the catalog's or O(prices); V(min_gpus) - the number of GPUs.
    type: str
    choices: [min_cost, min_gpus]
    default: min_cost
  prices:
    description: USD per GPU-hour by model (NVML name or catalog key); overrides the catalog's on-demand prices.
    type: dict
  disruption_budget:
    description: At most this many GPUs whose known current layout changes; demand that would need more is unplaced.
    type: int
  solver:
    description: V(exact) - the MILP; V(heuristic) - the fast planner; V(auto) - exact up to 256 GPUs when scipy is there.
    type: str
    choices: [auto, exact, heuristic]
    default: auto
  time_limit_s:
    description: Time limit of the exact solver; on expiry its best solution is used (status C(time_limit)).
    type: float
    default: 60
  current_configs:
    description: A mig-parted v1 document (e.g. a previous plan's C(mig_parted_config)) naming the configs of C(current).
    type: dict
  bound:
    description: Compute the LP lower bound (scipy); false leaves the covering bound.
    type: bool
    default: true
seealso:
  - module: gpuops.k8s.mig_partition
  - module: gpuops.k8s.gpu_whatif
"""

EXAMPLES = r"""
- name: Plan the fleet from the inventory and the tenants' demand
  gpuops.k8s.gpu_plan:
    nodes: "{{ groups['gpu_nodes'] | map('extract', hostvars) | list | gpuops.k8s.gpu_plan_nodes }}"
    demand:
      - {tenant: team-a, name: chat, replicas: 14, memory_gb: 9, kind: inference, isolation: strict}
      - {tenant: team-b, name: finetune, replicas: 4, memory_gb: 30, kind: training, isolation: shared}
      - {tenant: team-c, name: notebooks, replicas: 10, memory_gb: 12, kind: dev, isolation: shared}
    report: /tmp/plan
  register: plan

- name: Re-plan after a demand change, changing at most 4 GPUs' layouts
  gpuops.k8s.gpu_plan:
    nodes: "{{ plan_nodes }}"
    demand: "{{ new_demand }}"
    current_configs: "{{ plan.plan.mig_parted_config }}"
    disruption_budget: 4
"""

RETURN = r"""
plan:
  description: The plan.
  returned: success
  type: dict
  contains:
    summary:
      description:
        - gpus_total, gpus_used, gpus_idle, cost_per_hour, lower_bound_gpus, lower_bound_cost_per_hour, lower_bound
          (lp or covering), gap_pct, reconfigured_gpus, allocation_pct, replicas_requested/placed/unplaced,
          one_gpu_per_replica (gpus, cost_per_hour), gpus_saved_pct, cost_saved_pct, by_model, solver, status,
          solve_seconds, slice_diagram (text).
      type: dict
      sample: {gpus_used: 4, cost_per_hour: 13.0, lower_bound_gpus: 4, reconfigured_gpus: 0, allocation_pct: 90.8}
    decisions:
      description: One per demand item - tenant, name, replicas, placed, mode (mig, time-slicing, mps, exclusive), resource, model, profile, reason, by_model.
      type: list
      elements: dict
    placements:
      description:
        - Replicas per node, GPU and slice - tenant, name, node, gpu, model, slice (profile, whole or shared), starts, replicas.
        - C(pod_labels), the labels that map a workload's pods to the demand item.
      type: list
      elements: dict
    unplaced:
      description: tenant, name, replicas, reason (the limit hit).
      type: list
      elements: dict
    mig_parted_config:
      description: One mig-parted version v1 document, one named config per distinct node layout.
      type: dict
    node_configs:
      description: Per node - node, mig_config, device_plugin_config, labels, sharing, gpus, gpus_used.
      type: list
      elements: dict
    device_plugin_configs:
      description: Named device-plugin configs (migStrategy, time-slicing or MPS replicas).
      type: dict
    quotas:
      description: "{tenant: {hard: {requests.<resource>: n}}} - what the plan gives each tenant."
      type: dict
    prices:
      description: USD per GPU-hour used per model.
      type: dict
report:
  description: The report written (path, files, changed_files); null without O(report).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import module_run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="dict", required=True),
            demand=dict(type="list", elements="dict", required=True),
            objective=dict(type="str", default="min_cost", choices=["min_cost", "min_gpus"]),
            prices=dict(type="dict"),
            disruption_budget=dict(type="int"),
            solver=dict(type="str", default="auto", choices=["auto", "exact", "heuristic"]),
            time_limit_s=dict(type="float", default=60),
            current_configs=dict(type="dict"),
            bound=dict(type="bool", default=True),
            report=dict(type="path"),
            report_title=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    run_and_exit(module, lambda: module_run.run(module.params, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
