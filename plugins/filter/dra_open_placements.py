# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.dra_open_placements``: per dra-dynamic node, the MIG placements a re-plan keeps open."""

from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.plugin_utils.filters import DATA_ERRORS, filter_errors, filter_module
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import steer as gpu_steer

DOCUMENTATION = r"""
name: dra_open_placements
short_description: The MIG placements to keep open per GPU of dra-dynamic nodes, from claims in use and pending pods
version_added: "0.2.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - The planner side of steering (docs/dra.md, re-plan without a drain). Every placement a ResourceClaim holds stays
    open. The pending pods that wait for MIG devices through DRA (a claim whose DeviceClass selects one profile, or
    the extended resource C(nvidia.com/mig-<profile>) a class serves; the scheduler's message says it cannot
    allocate them) get placements chosen fragmentation-aware, largest pods first, each profile where the counters
    still fit and (1) the GPU is fullest after it, (2) the most devices of that GPU stay allocatable, (3) lowest
    node, GPU, start. A pod that fits nowhere is in C(unplaced) with the reason.
  - The result's C(nodes[node].open) is what M(gpuops.k8s.dra_steering_rules#filter) takes for that node's slices.
  - Fails, naming it, on a claim holding a device its node's slices do not publish.
options:
  _input:
    description: ResourceSlices (kubernetes.core.k8s_info); those of driver C(gpu.nvidia.com) count.
    type: list
    elements: dict
    required: true
  claims:
    description: ResourceClaims of every namespace (their C(status.allocation) is what is in use).
    type: list
    elements: dict
  pods:
    description: Pods; the pending ones are the demand.
    type: list
    elements: dict
  nodes:
    description: Names of the dra-dynamic nodes to plan (default every pool of the slices).
    type: list
    elements: str
  k8s_nodes:
    description: Node resources; their labels are matched against the pending pods' nodeSelector (without them a
      pod with a nodeSelector matches no node).
    type: list
    elements: dict
  classes:
    description: DeviceClasses, to know which profile a claim's class selects (else the name C(mig-<profile>.nvidia.com)).
    type: list
    elements: dict
  close_idle:
    description: GPUs with nothing in use and nothing planned get an empty list (closed) instead of being left out (open).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Placements to keep open on the dra-dynamic nodes
  ansible.builtin.set_fact:
    steer: >-
      {{ slices.resources | gpuops.k8s.dra_open_placements(claims=claims.resources, pods=pods.resources,
         nodes=['gpu-node-1'], k8s_nodes=nodes.resources, classes=classes.resources) }}
# steer.nodes['gpu-node-1'].open == {'0': [{'profile': '4g.40gb', 'start': 0}, ...], '1': [{'profile': '3g.40gb', 'start': 4}]}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    nodes:
      description: Per node C({open, in_use, placed, gpus}); C(open) maps a GPU index (string) to C([{profile, start}]);
        C(in_use) the claims' devices, C(placed) the pending pods' new placements.
      type: dict
    unplaced:
      description: Pending pods that fit no node, C({pod, profiles, reason}).
      type: list
    ignored:
      description: Pending pods asking for MIG that are not waiting for their devices, C({pod, reason}).
      type: list
    skipped:
      description: Nodes named with no slices of the driver, C({node, reason}).
      type: list
    summary:
      description: Lines for the log (per node what is in use, placed and open per GPU; unplaced and skipped).
      type: list
"""


@filter_errors(DATA_ERRORS)
def dra_open_placements(slices, claims=None, pods=None, nodes=None, k8s_nodes=None, classes=None, close_idle=False):
    return gpu_steer.open_placements(slices, claims, pods, nodes, k8s_nodes, classes, close_idle)


FilterModule = filter_module(dra_open_placements)
