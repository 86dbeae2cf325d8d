# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes GPU nodes as inventory hosts (pure logic of the ``gpuops.k8s.gpu_nodes`` inventory plugin).

A Node object (as a dict) becomes a host name, host vars (GPU product, count, memory, MIG config and
state, sharing strategy, GPU capacity and allocatable) and the groups it belongs to.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import is_plugin_resource

GPU_PREFIX = "nvidia.com/"


def safe_group(name: str) -> str:
    """An inventory group name from a label value: lower case, [a-z0-9_] only."""
    return re.sub(r"[^a-z0-9_]+", "_", str(name).lower()).strip("_") or "unknown"


def _int(value):
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _gpu_resources(resources):
    out = {}
    for name, value in (resources or {}).items():
        if is_plugin_resource(name):
            count = _int(value)
            out[name] = count if count is not None else value
    return out


def _address(node):
    addresses = ((node.get("status") or {}).get("addresses")) or []
    for kind in ("InternalIP", "ExternalIP", "Hostname"):
        for entry in addresses:
            if entry.get("type") == kind and entry.get("address"):
                return entry["address"]
    return None


def node_host(node: Dict[str, Any], prefix: str = "") -> Tuple[str, Dict[str, Any], List[str]]:
    """``(name, hostvars, groups)`` of one GPU node."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    name = meta["name"]
    product = labels.get("nvidia.com/gpu.product")
    mig_config = labels.get("nvidia.com/mig.config")
    strategy = labels.get("nvidia.com/gpu.sharing-strategy") or "none"
    mig_strategy = labels.get("nvidia.com/mig.strategy")
    hostvars = {
        "gpuops_k8s_node_name": name,
        "gpu_product": product,
        "gpu_count": _int(labels.get("nvidia.com/gpu.count")),
        "gpu_memory_mib": _int(labels.get("nvidia.com/gpu.memory")),
        "gpu_family": labels.get("nvidia.com/gpu.family"),
        "mig_capable": labels.get("nvidia.com/mig.capable") == "true",
        "mig_strategy": mig_strategy,
        "mig_config": mig_config,
        "mig_config_state": labels.get("nvidia.com/mig.config.state"),
        "gpu_sharing_strategy": strategy,
        "gpu_replicas": _int(labels.get("nvidia.com/gpu.replicas")),
        "gpu_capacity": _gpu_resources(status.get("capacity")),
        "gpu_allocatable": _gpu_resources(status.get("allocatable")),
        "node_unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
        "node_address": _address(node),
        "node_labels": labels,
    }
    groups = [prefix + "gpu_nodes"]
    if product:
        groups.append(prefix + "gpu_product_" + safe_group(product))
    if mig_config:
        groups.append(prefix + "mig_config_" + safe_group(mig_config))
    if mig_strategy:
        groups.append(prefix + "mig_strategy_" + safe_group(mig_strategy))
    groups.append(prefix + "sharing_" + safe_group(strategy))
    if hostvars["node_unschedulable"]:
        groups.append(prefix + "cordoned")
    return name, hostvars, groups
