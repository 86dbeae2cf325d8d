# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.mig_resources_check``: does a node advertise what its new MIG layout gives?"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.rollout import resources_check

DOCUMENTATION = r"""
name: mig_resources_check
short_description: Whether a node advertises the resources its MIG layout gives under its device plugin config
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Computes the C(nvidia.com/*) resources the NVIDIA device plugin advertises for the GPUs of a MIG layout (the
    C(gpus) of a M(gpuops.k8s.mig_partition) result) under the node's device plugin config, and compares them with
    the node's allocatable.
  - The node's config is the one its C(nvidia.com/device-plugin.config) label names, else the default
    (C(DEFAULT_CONFIG) of the plugin's DaemonSet), as the plugin's config-manager picks it. Its C(migStrategy)
    (C(single) advertises MIG devices as C(nvidia.com/gpu)) and time-slicing or MPS replicas (each device of a
    resource the config lists advertised that resource's C(replicas) times, as C(<resource>.shared) with
    C(renameByDefault); a resource it does not list is not shared) apply.
  - Without a device plugin deployed by gpuops.k8s.device_plugin (O(plugin) null), or when neither names a
    config, the mixed strategy without sharing (what M(gpuops.k8s.mig_partition) reports as C(resources)).
  - Met when every expected resource has exactly the expected count and no other device plugin resource
    (C(nvidia.com/gpu), C(nvidia.com/gpu.shared), C(nvidia.com/mig-*)) is left with a non-zero count.
options:
  _input:
    description:
      - The Node object, or the RV(kubernetes.core.k8s_info#module:resources) list of a lookup by name (its first
        item; an empty list is no node).
    type: raw
    required: true
  gpus:
    description: The C(gpus) of the M(gpuops.k8s.mig_partition) result (or of M(gpuops.k8s.gpu_info)).
    type: list
    elements: dict
    required: true
  plugin:
    description:
      - The device plugin deployed by gpuops.k8s.device_plugin - C(default) (the DaemonSet's C(DEFAULT_CONFIG))
        and C(configs) (name to config, the values of its C(<device_plugin_name>-configs) ConfigMap) - or null when
        it is not deployed.
    type: dict
"""

EXAMPLES = r"""
- name: Wait until the node advertises the new resources
  kubernetes.core.k8s_info:
    kind: Node
    name: "{{ inventory_hostname }}"
  register: seen
  until: (seen.resources | gpuops.k8s.mig_resources_check(mig_result.gpus, plugin)).met
  retries: 60
  delay: 2
  vars:
    plugin:
      default: default
      configs:
        default: {version: v1, flags: {migStrategy: none}}
        shared: {version: v1, flags: {migStrategy: none},
                 sharing: {timeSlicing: {renameByDefault: true, resources: [{name: nvidia.com/gpu, replicas: 4}]}}}

- name: Say why not
  ansible.builtin.debug:
    msg: "{{ (seen.resources | gpuops.k8s.mig_resources_check(mig_result.gpus, plugin)).message }}"
"""

RETURN = r"""
_value:
  description: The comparison.
  type: dict
  contains:
    met:
      description: The node advertises exactly the expected resources and nothing stale.
      type: bool
    expected:
      description: The C(nvidia.com/*) resources the layout gives under the node's config (counts as strings).
      type: dict
      sample: {"nvidia.com/gpu.shared": "8"}
    advertised:
      description: The device plugin resources in the node's allocatable.
      type: dict
      sample: {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"}
    stale:
      description: Advertised resources with a non-zero count the layout does not give.
      type: dict
    config:
      description: The device plugin config the node runs, null without one.
      type: str
    mig_strategy:
      description: Its C(migStrategy) (C(mixed) without a config).
      type: str
    sharing:
      description: Its sharing (C(strategy), C(replicas), C(resources) - the replicas of each resource it shares, C(rename_by_default)), null without.
      type: dict
    message:
      description: Empty when met, else what was expected and what the node advertises.
      type: str
"""


def mig_resources_check(node, gpus, plugin=None):
    try:
        return resources_check(node, gpus, plugin)
    except (GpuOpsError, KeyError, TypeError, ValueError) as e:
        raise AnsibleFilterError("mig_resources_check: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"mig_resources_check": mig_resources_check}
