# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.dra_steering_rules``: DeviceTaintRules that leave open only the planned MIG placements."""

from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.plugin_utils.filters import DATA_ERRORS, filter_errors, filter_module
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic as gpu_dra_dynamic

DOCUMENTATION = r"""
name: dra_steering_rules
short_description: resource.k8s.io/v1 DeviceTaintRules that steer the scheduler's first fit to planned MIG placements
version_added: "0.2.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - The scheduler takes the first device that fits, in slice order, with no regard to fragmentation. Given a node's
    dynamic slices (M(gpuops.k8s.dra_resource_slices#filter)) and, per GPU, the placements to keep open, returns one
    DeviceTaintRule (C(resource.k8s.io/v1), Kubernetes 1.37) per other device of those GPUs - the whole-GPU device
    included - with the taint C(gpuops.k8s/steering=closed) and effect C(NoSchedule), so first fit lands where the plan
    wants it. NoSchedule keeps running pods; changing the plan changes taints only.
  - GPUs not named in O(open) get no rule. An empty list closes every device of that GPU.
  - Fails, naming the valid placements, on a placement that is no device of that GPU, or on a GPU the slices lack.
options:
  _input:
    description: The node's ResourceSlices (one pool), as M(gpuops.k8s.dra_resource_slices#filter) returns them.
    type: list
    elements: dict
    required: true
  open:
    description:
      - "Per GPU index (a string or a number), the list of placements to keep open, each C({profile, start}): a MIG
        profile and the memory slice it starts at, for example C({'0': [{'profile': '4g.40gb', 'start': 0}]})."
    type: dict
    required: true
  effect:
    description: The taint effect; C(NoExecute) also evicts pods whose claims use a closed device.
    type: str
    choices: [NoSchedule, NoExecute]
    default: NoSchedule
"""

EXAMPLES = r"""
- name: Keep only 4g.40gb@0, 2g.20gb@4 and 1g.10gb@6 open on GPU 0 of the node
  kubernetes.core.k8s:
    state: present
    definition: "{{ item }}"
  loop: >-
    {{ slices | gpuops.k8s.dra_steering_rules({'0': [{'profile': '4g.40gb', 'start': 0},
                                                     {'profile': '2g.20gb', 'start': 4},
                                                     {'profile': '1g.10gb', 'start': 6}]}) }}
"""

RETURN = r"""
_value:
  description: DeviceTaintRule manifests, one per closed device, named C(gpuops-steer-<pool>-<device>).
  type: list
  elements: dict
"""


@filter_errors(DATA_ERRORS)
def dra_steering_rules(slices, open, effect="NoSchedule"):  # noqa: A002 - the option name the issue gives
    return gpu_dra_dynamic.steering_rules(slices, open, effect)


FilterModule = filter_module(dra_steering_rules)
