# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU models that appear in GPU cluster traces but not in the collection's catalog.

The Alibaba 2023 trace names its GPUs P100, T4, V100M16, V100M32, A10 and G1, G2, G3 (undisclosed
internal models). None of them can do MIG. Memory sizes are the FGD artefact's table
(hkust-adsl/kubernetes-scheduler-simulator @ 8f3d641, ``pkg/type/open-gpu-share/utils/const.go``
``MapGpuTypeMemoryMiB``). The collection has no price for these models: cost figures of a trace
replay need ``prices`` (USD per GPU-hour per model), otherwise they are reported as unknown.

``catalog`` names the catalog model a trace name stands for, when there is one.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog

TRACE_MODELS = {
    "P4": {"name": "Tesla P4", "memory_mib": 7611},
    "2080": {"name": "GeForce RTX 2080 Ti", "memory_mib": 11019},
    "1080": {"name": "GeForce GTX 1080 Ti", "memory_mib": 11178},
    "M40": {"name": "Tesla M40", "memory_mib": 11448},
    "T4": {"name": "Tesla T4", "memory_mib": 15109},
    "V100M16": {"name": "Tesla V100 SXM2 16GB", "memory_mib": 16160},
    "P100": {"name": "Tesla P100 PCIe 16GB", "memory_mib": 16280},
    "A10": {"name": "NVIDIA A10", "memory_mib": 22731},
    "3090": {"name": "GeForce RTX 3090", "memory_mib": 24268},
    "V100M32": {"name": "Tesla V100 32GB", "memory_mib": 32510},
    "A100": {"name": "NVIDIA A100 80GB", "memory_mib": 81251, "catalog": "a100_80gb"},
    "G1": {"name": "undisclosed (G1)", "memory_mib": 10000},
    "G2": {"name": "undisclosed (G2)", "memory_mib": 20000},
    "G3": {"name": "undisclosed (G3)", "memory_mib": 30000},
}


def catalog_model(name: str) -> Optional[gpu_catalog.GpuModel]:
    """The catalog GpuModel a model name means (catalog key, NVML name, or a trace alias), or None."""
    if name in gpu_catalog.CATALOG:
        return gpu_catalog.CATALOG[name]
    alias = TRACE_MODELS.get(name, {}).get("catalog")
    if alias:
        return gpu_catalog.CATALOG[alias]
    return gpu_catalog.lookup_model(name)


def price_of(name: str, overrides: Optional[Mapping[str, Any]] = None) -> Optional[float]:
    """USD per GPU-hour of ``name``: ``overrides`` first, then the catalog; None when unknown."""
    overrides = overrides or {}
    if name in overrides:
        return float(overrides[name])
    model = catalog_model(name)
    if model is not None:
        if model.key in overrides:
            return float(overrides[model.key])
        return model.price_per_hour
    return None
