# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.gpu_replan_rollout``: which changed nodes of a plan can be drained now."""

from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.plugin_utils.filters import SHAPE_ERRORS, filter_errors, filter_module
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import replan

DOCUMENTATION = r"""
name: gpu_replan_rollout
short_description: The nodes of a gpuops.k8s.gpu_plan result whose layout changes and that can be drained now
version_added: "0.1.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - For each node whose MIG layout the plan changes, looks at the pods on it. A node with a pod no controller owns,
    or with pods of a PodDisruptionBudget that allows fewer disruptions than the drain would make, is left for the
    next round with the reason; the others can roll. DaemonSet pods and finished pods do not count.
options:
  _input:
    description: The gpu_plan result, or its C(plan).
    type: dict
    required: true
  pods:
    description: Pod resources (k8s_info), at least those on the changed nodes.
    type: list
    elements: dict
    required: true
  pdbs:
    description: PodDisruptionBudget resources (k8s_info, policy/v1) with their status.
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: The nodes that roll this round
  ansible.builtin.set_fact:
    guard: "{{ plan | gpuops.k8s.gpu_replan_rollout(pods.resources, pdbs.resources) }}"
"""

RETURN = r"""
_value:
  description: C(roll) (nodes), C(deferred) (node, mig_config, reason), C(changed) (node -> mig_config).
  type: dict
"""


@filter_errors(SHAPE_ERRORS)
def gpu_replan_rollout(plan, pods, pdbs=None):
    return replan.rollout_guard(plan, pods, pdbs)


FilterModule = filter_module(gpu_replan_rollout)
