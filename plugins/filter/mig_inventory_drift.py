# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.mig_inventory_drift``: why the inventory's MIG config must not be applied to a node."""

from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.rollout import inventory_drift

DOCUMENTATION = r"""
name: mig_inventory_drift
short_description: Why a host play must not apply the inventory's MIG config to a node
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - C(gpu_nodes.yml) applies a host's C(gpuops_mig_config) without draining its node. This filter compares the
    inventory's config with the node's C(nvidia.com/mig.config) and C(nvidia.com/mig.config.state) labels, which
    C(mig_reconfigure.yml) (and the GPU Operator's MIG manager) set.
  - Returns an empty string when the config may be applied (no label, or the label names the same config and no
    rollout is pending), else a message that names both configs and what to run instead.
options:
  _input:
    description: The Node object (as M(kubernetes.core.k8s_info) returns it), or null / empty when there is none.
    type: dict
    required: true
  inventory_config:
    description: The MIG config the inventory asks for.
    type: str
    required: true
  host:
    description: The inventory host name, used in the suggested command.
    type: str
"""

EXAMPLES = r"""
- name: Refuse to undo a rollout
  ansible.builtin.fail:
    msg: "{{ node.resources[0] | gpuops.k8s.mig_inventory_drift(gpuops_mig_config, inventory_hostname) }}"
  when: node.resources | length > 0 and (node.resources[0] | gpuops.k8s.mig_inventory_drift(gpuops_mig_config)) | length > 0
# or once, through a task variable:
- name: Refuse to undo a rollout
  ansible.builtin.fail:
    msg: "{{ drift }}"
  when: drift | length > 0
  vars:
    drift: "{{ node.resources | first | default({}) | gpuops.k8s.mig_inventory_drift(gpuops_mig_config, inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: Empty when the inventory's config may be applied, else why not and what to do instead.
  type: str
"""


def mig_inventory_drift(node, inventory_config, host=None):
    return inventory_drift(node, inventory_config, host)


class FilterModule(object):
    def filters(self):
        return {"mig_inventory_drift": mig_inventory_drift}
