# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the filters that publish one node's GPUs as DRA ResourceSlices (dra_resource_slice,
dra_resource_slices): the gpu_info facts, the node (and pool) name, the pool generation."""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  _input:
    description: The result of M(gpuops.k8s.gpu_info) (its C(gpus), C(driver_version), C(cuda_driver_version)).
    type: dict
    required: true
  node:
    description: The Kubernetes node name (also the pool name).
    type: str
    required: true
  generation:
    description: The pool generation; raise it when the devices change so the scheduler drops older slices.
    type: int
    default: 1
"""
