# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.dra_resource_slice``: the ResourceSlice the NVIDIA DRA driver would publish for a node."""

from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.plugin_utils.filters import DATA_ERRORS, filter_errors, filter_module
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra

DOCUMENTATION = r"""
name: dra_resource_slice
short_description: A resource.k8s.io/v1 ResourceSlice for one node from its gpuops.k8s.gpu_info facts
version_added: "0.1.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - What the NVIDIA DRA driver (driver C(gpu.nvidia.com), one pool per node) publishes - for the kwok nodes of the
    simulated lab, which have no kubelet plugin.
  - A GPU without MIG mode is one device C(gpu-<index>); a GPU in MIG mode publishes its MIG devices
    C(gpu-<index>-mig-<gi>-<ci>) (the parent is then not allocatable). Attributes C(type) (gpu, mig), C(uuid),
    C(productName), C(brand), C(architecture), C(index), C(driverVersion), C(cudaDriverVersion), and C(profile),
    C(parentUUID), C(parentIndex) on MIG devices; capacity C(memory).
extends_documentation_fragment:
  - gpuops.k8s.dra_node
"""

EXAMPLES = r"""
- name: Publish the simulated host's GPUs as DRA devices on its kwok node
  kubernetes.core.k8s:
    state: present
    definition: "{{ gpu_facts | gpuops.k8s.dra_resource_slice(inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: A ResourceSlice manifest.
  type: dict
"""


@filter_errors(DATA_ERRORS)
def dra_resource_slice(host, node, generation=1):
    return gpu_dra.resource_slice(node, host, generation)


FilterModule = filter_module(dra_resource_slice)
