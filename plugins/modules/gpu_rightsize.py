#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_rightsize
short_description: Right-size tenants' GPU demand from measured DCGM use in Prometheus
version_added: "0.1.0"
description:
  - Reads a window of dcgm-exporter series from Prometheus' HTTP API - memory C(DCGM_FI_DEV_FB_USED) and compute
    C(DCGM_FI_PROF_GR_ENGINE_ACTIVE) or C(DCGM_FI_DEV_GPU_UTIL) (always 0 on MIG devices), per GPU and per MIG
    device, with the exporter's C(namespace)/C(pod) labels - maps the pods to gpu_plan's demand items (label
    C(gpuops.k8s/demand-item) when O(pods) are given, else namespace plus workload name) and proposes for each item
    the size that holds the p95 plus O(headroom_pct), never less than the observed peak memory.
  - Items with less history than O(min_history) and items without series are left unchanged, with the reason. A
    metric with no series at all, an unreachable Prometheus or a URL that is not a Prometheus API fail, and nothing
    is written.
  - Returns a new demand list for M(gpuops.k8s.gpu_plan) (only C(memory_gb) and C(compute) change) and one change
    with its reason per changed field; O(demand_out) writes both as a demand file. docs/rightsize.md has the rule
    and the PromQL.
author:
  - gpuops.k8s maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.k8s.attributes
  - gpuops.k8s.attributes.idempotent
  - gpuops.k8s.prometheus
attributes:
  platform:
    support: full
    description: Runs on the controller; Prometheus is read in check mode too, O(demand_out) is not written.
    platforms: all
options:
  window:
    description: How far back to read (a Prometheus duration, V(7d), V(24h), V(15m)).
    type: str
    default: 7d
  step:
    description: Resolution of the subquery that finds each pod's first sample (the history); a Prometheus duration.
    type: str
    default: 5m
  min_history:
    description: Items with less history than this (from their pods' first sample to now) are left unchanged.
    type: str
    default: 24h
  headroom_pct:
    description: Headroom over the p95, in percent; the proposal is never below the observed peak memory.
    type: float
    default: 20
  memory_metric:
    description: The memory series, MiB per device (dcgm-exporter's, or a recording rule with the same labels).
    type: str
    default: DCGM_FI_DEV_FB_USED
  compute_metric:
    description:
      - The compute series - C(DCGM_FI_PROF_GR_ENGINE_ACTIVE) (0-1 of the device, also per MIG device, scaled to a
        fraction of the GPU by the profile's compute slices) or C(DCGM_FI_DEV_GPU_UTIL) (0-100, per GPU, 0 on MIG).
      - C(compute) changes only for items that declare it.
    type: str
    default: DCGM_FI_PROF_GR_ENGINE_ACTIVE
    choices: [DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL]
  demand:
    description: gpu_plan's demand list (tenant, name, replicas, memory_gb, compute, kind, isolation, ...).
    type: list
    elements: dict
  demand_file:
    description: A YAML or JSON file with a C(demand) list (a gpu_plan demand file, or the O(demand_out) of a previous run).
    type: path
  plan:
    description: The last gpu_plan result (its C(plan)); gives each item's model and current resource / profile.
    type: dict
  models:
    description: GPU models (catalog keys or NVML names) for items the O(plan) does not name; the first is used.
    type: list
    elements: str
  pods:
    description:
      - Pods as M(kubernetes.core.k8s_info) returns them (or C({namespace, name, labels})), so that their
        C(gpuops.k8s/demand-item) label maps them; without them the namespace and the workload name decide.
    type: list
    elements: dict
  demand_out:
    description:
      - Write C({demand, changes}) here (YAML) - a gpu_plan demand file; only when its content changes.
    type: path
notes:
  - The right-sizer needs history - 24 h by default; a test or a demo can shorten O(window) and O(min_history).
  - Compute of time-sliced GPUs is per GPU, not per pod (DCGM reports devices); memory likewise on shared devices.
"""

EXAMPLES = r"""
- name: Right-size from a week of DCGM history and write a demand file for gpu_plan
  gpuops.k8s.gpu_rightsize:
    prometheus_url: http://prometheus-operated.monitoring:9090
    demand_file: /srv/gpuops/demand.yml
    plan: "{{ last_plan }}"
    demand_out: /srv/gpuops/demand-rightsized.yml
  register: rs

- name: Re-plan with the right-sized demand, keeping today's layouts where they serve
  gpuops.k8s.gpu_plan:
    nodes: "{{ nodes }}"
    demand: "{{ rs.demand }}"
    current_configs: "{{ last_plan.mig_parted_config }}"
"""

RETURN = r"""
items:
  description:
    - Per demand item - C(tenant), C(name), C(model), C(observed) (C(memory_gb_peak), C(memory_gb_p95),
      C(compute_peak), C(compute_p95) as fractions of a GPU, C(samples), C(history_h); GB and hours rounded to 3
      decimals, fractions to 4; null without series),
      C(before) and C(after) (C(memory_gb), C(compute), C(profile)), C(changed), C(reason).
  returned: success
  type: list
  elements: dict
demand:
  description: The demand list with the right-sized C(memory_gb) / C(compute); gpu_plan accepts it as is.
  returned: success
  type: list
  elements: dict
changes:
  description: One entry per changed field - C(tenant), C(name), C(field), C(before), C(after), C(reason).
  returned: success
  type: list
  elements: dict
queries:
  description: The PromQL sent, by statistic.
  returned: success
  type: dict
demand_out:
  description: Path written (or that would be written in check mode); null without O(demand_out).
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.prometheus import connection_options
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import rightsize


def main():
    module = AnsibleModule(
        argument_spec=dict(
            connection_options(),
            window=dict(type="str", default="7d"),
            step=dict(type="str", default="5m"),
            min_history=dict(type="str", default="24h"),
            headroom_pct=dict(type="float", default=20),
            memory_metric=dict(type="str", default="DCGM_FI_DEV_FB_USED"),
            compute_metric=dict(type="str", default="DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                                choices=["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"]),
            demand=dict(type="list", elements="dict"),
            demand_file=dict(type="path"),
            plan=dict(type="dict"),
            models=dict(type="list", elements="str"),
            pods=dict(type="list", elements="dict"),
            demand_out=dict(type="path"),
        ),
        mutually_exclusive=[("demand", "demand_file")],
        required_one_of=[("demand", "demand_file")],
        supports_check_mode=True,
    )
    run_and_exit(module, lambda: rightsize.run(dict(module.params), check_mode=module.check_mode, diff=module._diff))


if __name__ == "__main__":
    main()
