# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.gpu_pending_demand``: pending GPU pods -> gpu_plan demand (the closed loop)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import pending

DOCUMENTATION = r"""
name: gpu_pending_demand
short_description: The demand of gpuops.k8s.gpu_plan with the GPU pods the scheduler cannot place
version_added: "0.1.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Finds the pods that wait for an NVIDIA resource - phase C(Pending), condition C(PodScheduled) False with reason
    C(Unschedulable) and the scheduler's message naming a resource the pod requests (C(Insufficient
    nvidia.com/mig-3g.40gb)); pods pending for anything else are listed in C(ignored) with the reason.
  - A pending pod of a demand item (label C(gpuops.k8s/demand-item), else namespace plus workload name) raises the
    item's C(replicas) to its running plus pending pods. Other pending pods make new items (tenant = namespace,
    name = workload), sized so that the planner picks the resource they ask for.
  - docs/closed-loop.md has the rules.
options:
  _input:
    description: Pod resources as kubernetes.core.k8s_info returns them (pending and running GPU pods).
    type: list
    elements: dict
    required: true
  demand:
    description: gpu_plan's demand list (e.g. gpu_rightsize's right-sized demand).
    type: list
    elements: dict
  nodes:
    description: Node resources (k8s_info), to say how much of each resource the schedulable nodes offer.
    type: list
    elements: dict
  min_pending_s:
    description: Leave out pods marked unschedulable less than this many seconds ago.
    type: float
    default: 0
  shared_memory_gb:
    description: Memory assumed per replica of a pod asking for C(nvidia.com/gpu.shared) (the request says none).
    type: float
    default: 10
"""

EXAMPLES = r"""
- name: Demand plus what is pending
  ansible.builtin.set_fact:
    replan_pending: "{{ pods.resources | gpuops.k8s.gpu_pending_demand(demand=demand, nodes=nodes.resources) }}"
"""

RETURN = r"""
_value:
  description:
    - C(demand) the new demand list, C(changes) (tenant, name, field, before, after, reason), C(pending) (namespace,
      name, resources, item, reason, message, since), C(ignored) (namespace, name, reason), C(resources)
      (per resource pending_pods, requested, offered, why), C(changed).
  type: dict
"""


def gpu_pending_demand(pods, demand=None, nodes=None, min_pending_s=0, shared_memory_gb=10):
    try:
        return pending.pending_demand(pods, demand=demand, nodes=nodes, min_pending_s=min_pending_s,
                                      shared_memory_gb=shared_memory_gb)
    except (GpuOpsError, KeyError, TypeError) as e:
        raise AnsibleFilterError("gpu_pending_demand: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"gpu_pending_demand": gpu_pending_demand}
