# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU extended-resource names: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` and ``nvidia.com/mig-<profile>[.shared]``
for every profile of the GPU catalog.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, List

import re

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import closest, fmt
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_SUFFIX = ".shared"
MIG_PREFIX = "nvidia.com/mig-"


def mig_profiles() -> List[str]:
    """Every MIG GPU-instance profile of the catalog, label-safe (``1g.10gb``, ``1g.10gb.me``)."""
    names = set()
    for model in gpu_catalog.CATALOG.values():
        for profile in model.profiles:
            names.add(gpu_catalog.label_safe(profile.name))
    return sorted(names, key=_profile_sort_key)


def _profile_sort_key(name):
    m = re.match(r"^(\d+)g\.(\d+)gb(.*)$", name)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else (99, 0, name)


def mig_resources() -> List[str]:
    """``nvidia.com/mig-<profile>`` for every catalog profile (the mixed-strategy resource names)."""
    return ["nvidia.com/mig-%s" % p for p in mig_profiles()]


def gpu_resources() -> List[str]:
    """All GPU extended-resource names the stack knows: full GPUs, shared GPUs and MIG slices."""
    base = [GPU_RESOURCE] + mig_resources()
    return base + [r + SHARED_SUFFIX for r in base]


def check_gpu_resource(name: Any, where: str = "resource") -> str:
    """Validate an ``nvidia.com/...`` resource name against the catalog; returns it unchanged."""
    text = str(name)
    base = text[:-len(SHARED_SUFFIX)] if text.endswith(SHARED_SUFFIX) else text
    if base == GPU_RESOURCE or base in mig_resources():
        return text
    if base.startswith("nvidia.com/mig-"):
        profile = base[len("nvidia.com/mig-"):]
        hint = ""
        if "+" in profile:
            hint = " (resource names use '.' where the profile has '+': nvidia.com/mig-%s)" % profile.replace("+", ".")
        raise GpuOpsError(
            "%s: unknown MIG resource %r%s%s; valid MIG resources (from the GPU catalog): %s"
            % (where, text, hint, closest(base, mig_resources()), fmt(mig_resources())),
            valid_resources=mig_resources(),
        )
    raise GpuOpsError(
        "%s: unknown GPU resource %r%s; valid: nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<profile>[.shared] "
        "with <profile> one of %s" % (where, text, closest(text, gpu_resources()), fmt(mig_profiles())),
        valid_resources=gpu_resources(),
    )


def is_gpu_resource_key(key: Any) -> bool:
    """Whether a quota or request key names an NVIDIA resource."""
    return "nvidia.com/" in str(key)


def is_plugin_resource(name: Any) -> bool:
    """True for an extended resource the NVIDIA device plugin advertises: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared``,
    ``nvidia.com/mig-<profile>[.shared]``."""
    text = str(name)
    return text == GPU_RESOURCE or text.startswith(GPU_RESOURCE + ".") or text.startswith(MIG_PREFIX)
