# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.gpu_plan_nodes``: gpu_plan's node list from gpu_info facts or gpu_nodes host vars, in one line."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand

DOCUMENTATION = r"""
name: gpu_plan_nodes
short_description: The node list of gpuops.k8s.gpu_plan from gpu_info facts or gpu_nodes inventory host vars
version_added: "0.1.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - From a mapping host -> gpu_info result (or its C(gpus) list), the GPUs per node and each GPU's current MIG layout;
    a node whose MIG-capable GPUs all run without MIG gets C(all-disabled), the name its C(nvidia.com/mig.config)
    label would carry, so that a plan keeping it so does not count it as changed.
  - From host vars of the C(gpuops.k8s.gpu_nodes) inventory plugin (a list, or a mapping host -> host vars), the GPU
    product and count per node and the C(nvidia.com/mig.config) label as the current layout.
  - Hosts without GPUs are left out.
options:
  _input:
    description: A mapping host -> gpu_info result, a list of host vars, or a mapping host -> host vars.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: From the inventory plugin's host vars
  ansible.builtin.set_fact:
    plan_nodes: "{{ groups['gpu_nodes'] | map('extract', hostvars) | list | gpuops.k8s.gpu_plan_nodes }}"
- name: From gpu_info facts registered on every GPU host (as gpu)
  ansible.builtin.set_fact:
    plan_nodes: "{{ dict(groups['gpu_hosts'] | zip(groups['gpu_hosts'] | map('extract', hostvars, 'gpu'))) | gpuops.k8s.gpu_plan_nodes }}"
"""

RETURN = r"""
_value:
  description: The node list (name, gpus with model and count, current).
  type: list
  elements: dict
"""


def _is_hostvars(value):
    return isinstance(value, Mapping) and ("gpu_product" in value or "gpuops_k8s_node_name" in value)


def gpu_plan_nodes(value):
    try:
        if isinstance(value, list):
            hv = {}
            for i, item in enumerate(value):
                if not isinstance(item, Mapping):  # hostvars arrive as a Mapping, not a dict (ansible-core 2.19)
                    raise GpuOpsError("gpu_plan_nodes: item %d is not a mapping of host vars" % i)
                item = dict(item)
                hv[item.get("inventory_hostname") or item.get("gpuops_k8s_node_name") or str(i)] = item
            return plan_demand.nodes_from_hostvars(hv)
        if isinstance(value, Mapping):
            if value and all(_is_hostvars(v) for v in value.values()):
                return plan_demand.nodes_from_hostvars(dict((k, dict(v)) for k, v in value.items()))
            return plan_demand.nodes_from_facts(value)
        raise GpuOpsError("gpu_plan_nodes needs a mapping host -> gpu_info result, or gpu_nodes host vars "
                          "(a list or a mapping), got %s" % type(value).__name__)
    except GpuOpsError as e:
        raise AnsibleFilterError(str(e))


class FilterModule(object):
    def filters(self):
        return {"gpu_plan_nodes": gpu_plan_nodes}
