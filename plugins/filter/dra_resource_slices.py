# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.dra_resource_slices``: the ResourceSlices NVIDIA's DRA driver publishes for a node."""

from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.plugin_utils.filters import DATA_ERRORS, filter_errors, filter_module
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic as gpu_dra_dynamic

DOCUMENTATION = r"""
name: dra_resource_slices
short_description: The resource.k8s.io/v1 ResourceSlices of one node, static or dynamic MIG, from its gpu_info facts
version_added: "0.2.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - With O(dynamic=true), what NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu, feature gate
    C(DynamicMIG)) publishes as partitionable devices (KEP-4815) - for the kwok nodes of the simulated lab and for
    checking a real node against the catalog.
  - One pool per node (driver C(gpu.nvidia.com), pool = node name). The first slice holds only
    C(spec.sharedCounters) - one counter set C(gpu-<minor>-counter-set) per MIG-capable GPU, with C(multiprocessors),
    C(copy-engines), C(decoders), C(encoders), C(jpeg-engines), C(ofa-engines), C(memory) and
    C(memory-slice-<i>) - then one device slice per GPU, devices sorted by name (the scheduler's first-fit order).
  - The whole GPU C(gpu-<minor>) consumes every counter of its set (not published on Ampere, where MIG mode stays
    on); every profile x placement of the catalog is a MIG device
    C(gpu-<minor>-mig-<profile without dots>-<GI profile id>-<placement start>) consuming its capacities and its
    memory slices. A GPU without MIG is a single C(gpu-<minor>) device with no counter set.
  - With O(dynamic=false), the static mode of M(gpuops.k8s.dra_resource_slice#filter) as a one-item list.
  - Fails, naming what is valid, on a node with no MIG-capable GPU, a GPU model the catalog does not know, or an
    Ampere GPU with MIG mode off (turn it on first with M(gpuops.k8s.mig_mode)).
extends_documentation_fragment:
  - gpuops.k8s.dra_node
options:
  dynamic:
    description: Publish every MIG profile x placement with counters (dynamic MIG) rather than the existing instances.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Publish a simulated host's GPUs as dynamic MIG devices on its kwok node
  kubernetes.core.k8s:
    state: present
    definition: "{{ item }}"
  loop: "{{ gpu_facts | gpuops.k8s.dra_resource_slices(node=inventory_hostname, dynamic=true) }}"
"""

RETURN = r"""
_value:
  description: ResourceSlice manifests, the counter slice(s) first.
  type: list
  elements: dict
"""


@filter_errors(DATA_ERRORS)
def dra_resource_slices(host, node, dynamic=True, generation=1):
    if not dynamic:
        return [gpu_dra.resource_slice(node, host, generation)]
    return gpu_dra_dynamic.resource_slices(node, host, generation)


FilterModule = filter_module(dra_resource_slices)
