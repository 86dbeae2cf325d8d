# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.gpu_replan_nodes``: gpu_plan's node list for a re-plan (live layouts, busy nodes marked)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.plugin_utils.filters import SHAPE_ERRORS, filter_errors, filter_module
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import pending, replan

DOCUMENTATION = r"""
name: gpu_replan_nodes
short_description: gpuops.k8s.gpu_plan's node list for a re-plan - live MIG layouts, busy nodes marked
version_added: "0.1.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Sets each node's C(current) from the live C(nvidia.com/mig.config) label of its Node (the inventory may be older
    than the last rollout) and C(busy) from the running GPU pods per node, so that on equal cost the planner keeps
    busy nodes' layouts and changes idle nodes first.
  - A node with neither the label nor a C(current) is taken at C(all-disabled) (no plan has split its GPUs), so that
    a plan that splits them counts them against the disruption budget.
options:
  _input:
    description: gpu_plan's node list (e.g. from the gpuops.k8s.gpu_plan_nodes filter).
    type: list
    elements: dict
    required: true
  k8s_nodes:
    description: Node resources (kubernetes.core.k8s_info).
    type: list
    elements: dict
  busy:
    description: Running GPU pods per node (gpu_pending_demand's C(busy_nodes)); or give O(pods).
    type: dict
  pods:
    description:
      - Pod resources (kubernetes.core.k8s_info); the running pods that hold an NVIDIA resource are counted per node
        as C(busy) (the rule of gpu_pending_demand's C(busy_nodes)). Mutually exclusive with O(busy).
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: Nodes for the re-plan
  ansible.builtin.set_fact:
    replan_nodes: "{{ plan_nodes | gpuops.k8s.gpu_replan_nodes(k8s_nodes.resources, replan_pending.busy_nodes) }}"

- name: Nodes for the re-plan, busy from the running pods of every namespace
  ansible.builtin.set_fact:
    replan_nodes: "{{ plan_nodes | gpuops.k8s.gpu_replan_nodes(k8s_nodes.resources, pods=running_pods.resources) }}"
"""

RETURN = r"""
_value:
  description: The node list, C(current) from the live label where the Node has one, C(busy) the running GPU pods.
  type: list
  elements: dict
"""


def busy_nodes(pods):
    """Running GPU pods per node name (pods on no node are not counted)."""
    busy = {}
    for r in pending.running_gpu_pods(pods):
        if r["node"]:
            busy[r["node"]] = busy.get(r["node"], 0) + 1
    return busy


@filter_errors(SHAPE_ERRORS)
def gpu_replan_nodes(nodes, k8s_nodes=None, busy=None, pods=None):
    if busy is not None and pods is not None:
        raise AnsibleFilterError("gpu_replan_nodes: give busy or pods, not both")
    if pods is not None:
        busy = busy_nodes(pods)
    return replan.planner_nodes(nodes, k8s_nodes, busy)


FilterModule = filter_module(gpu_replan_nodes)
