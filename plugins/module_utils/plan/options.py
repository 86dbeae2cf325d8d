# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which slice or sharing mode can serve one demand item on one GPU model (the decision tree).

* a replica needs ``memory_gb`` on one device: a model with less memory cannot serve it (the reason names both);
* ``gpus_per_replica`` > 1: whole GPUs, all on one node (``exclusive``);
* ``isolation: strict``: a MIG instance on MIG-capable models (the smallest profile with the memory and compute),
  else a whole GPU; never time-slicing or MPS;
* ``kind: training`` (shared): MPS (each client gets 1/replicas of the GPU's memory and compute, as the device
  plugin enforces) when at least two replicas fit, else a whole GPU;
* ``kind: inference`` / ``dev`` (shared): MIG on MIG-capable models, time-slicing on the others (replicas on one
  GPU must fit its memory, and their compute shares add up to at most 1); never MIG on models without it;
* a replica that needs the whole GPU gets ``exclusive`` (``nvidia.com/gpu``).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import math
import re
from collections import namedtuple
from typing import Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import Item

MIG = "mig"
TIME_SLICING = "time-slicing"
MPS = "mps"
EXCLUSIVE = "exclusive"
MODES = (MIG, TIME_SLICING, MPS, EXCLUSIVE)
MPS_MAX_REPLICAS = 16
EPS = 1e-9

# How one replica of an item is served on one model. ``share`` is the fraction of a GPU it takes (the packing
# estimate used to choose models and for the bounds); ``mps_replicas`` the MPS clients per GPU it allows.
Option = namedtuple("Option", ["mode", "model", "profile", "memory_gb", "compute", "gpus", "share", "mps_replicas",
                               "reason"])
# per item index: the option on each model (catalog key) that can serve it
ItemOptions = Dict[int, Dict[str, Option]]


def capacity_gb(model: gpu_catalog.GpuModel) -> int:
    """Memory of one device in GB as the model is sold (A100 80GB -> 80, L40S -> 48, H200 -> 141)."""
    m = re.search(r"_(\d+)gb$", model.key)
    if m:
        return int(m.group(1))
    return int(round(model.total_memory_mib / 1024.0))


def profile_gb(profile: gpu_catalog.GiProfile) -> int:
    m = re.match(r"^\d+g\.(\d+)gb", profile.name)
    if m is None:
        raise ValueError("MIG profile %s names no memory size" % profile.name)
    return int(m.group(1))


def usable_profiles(model: gpu_catalog.GpuModel) -> List[gpu_catalog.GiProfile]:
    """MIG profiles the planner hands out: every GI profile without media-extension attributes."""
    return [p for p in model.profiles if "+" not in p.name and "-" not in p.name]


def smallest_profile(model: gpu_catalog.GpuModel, memory_gb: float,
                     compute: Optional[float] = None) -> Optional[gpu_catalog.GiProfile]:
    best = None
    for p in usable_profiles(model):
        if profile_gb(p) + EPS < memory_gb:
            continue
        if compute is not None and p.compute_slices / float(model.compute_slices) + EPS < compute:
            continue
        key = (p.memory_slices, p.compute_slices, p.name)
        if best is None or key < best[0]:
            best = (key, p)
    return best[1] if best else None


def mig_share(model: gpu_catalog.GpuModel, profile: gpu_catalog.GiProfile) -> float:
    return max(profile.compute_slices / float(model.compute_slices), profile.memory_slices / float(model.memory_slices))


def _exclusive(item, model, reason):
    return Option(EXCLUSIVE, model.key, None, item.memory_gb, 1.0, item.gpus_per_replica,
                  float(item.gpus_per_replica), 0, reason)


def option_for(item: Item, model: gpu_catalog.GpuModel) -> Tuple[Optional[Option], Optional[str]]:
    """``(Option, None)`` or ``(None, reason)`` for ``item`` on ``model``."""
    cap = capacity_gb(model)
    if item.memory_gb > cap + EPS:
        return None, "needs %g GB on one device; %s has %d GB" % (item.memory_gb, model.key, cap)
    if item.gpus_per_replica > 1:
        return _exclusive(item, model, "%d GPUs per replica: whole GPUs on one node" % item.gpus_per_replica), None
    mig = gpu_catalog.mig_capable(model)
    if item.isolation == "strict":
        if mig:
            p = smallest_profile(model, item.memory_gb, item.compute)
            if p is not None and p.compute_slices < model.compute_slices:
                return Option(MIG, model.key, p.name, item.memory_gb, p.compute_slices / float(model.compute_slices),
                              1, mig_share(model, p), 0,
                              "strict isolation: MIG %s, the smallest profile with %g GB%s"
                              % (p.name, item.memory_gb, _compute_text(item))), None
            return _exclusive(item, model, "strict isolation, needs the whole GPU"), None
        return _exclusive(item, model, "strict isolation on %s (no MIG): a whole GPU" % model.key), None
    compute = item.compute if item.compute is not None else item.memory_gb / float(cap)
    if item.kind == "training":
        per = min(cap / float(item.memory_gb), 1.0 / compute)
        replicas = int(math.floor(per + EPS))
        replicas = min(replicas, MPS_MAX_REPLICAS)
        if replicas >= 2:
            return Option(MPS, model.key, None, item.memory_gb, compute, 1, 1.0 / replicas, replicas,
                          "training, shared: MPS, up to %d clients per GPU (each %g GB, %.0f %% compute)"
                          % (replicas, cap / float(replicas), 100.0 / replicas)), None
        return _exclusive(item, model, "training that needs the whole GPU"), None
    if mig:
        p = smallest_profile(model, item.memory_gb, item.compute)
        if p is not None and p.compute_slices < model.compute_slices:
            return Option(MIG, model.key, p.name, item.memory_gb, p.compute_slices / float(model.compute_slices), 1,
                          mig_share(model, p), 0,
                          "%s, shared on a MIG-capable GPU: MIG %s, the smallest profile with %g GB%s"
                          % (item.kind, p.name, item.memory_gb, _compute_text(item))), None
        return _exclusive(item, model, "%s that needs the whole GPU" % item.kind), None
    if compute < 1.0 - EPS and item.memory_gb < cap - EPS:
        return Option(TIME_SLICING, model.key, None, item.memory_gb, compute, 1, max(item.memory_gb / float(cap), compute),
                      0, "%s, shared on %s (no MIG): time-slicing, replicas packed by memory (%g GB of %d)"
                      % (item.kind, model.key, item.memory_gb, cap)), None
    return _exclusive(item, model, "%s that needs the whole GPU" % item.kind), None


def _compute_text(item):
    return " and %.0f %% compute" % (item.compute * 100) if item.compute is not None else ""


def resource_of(option: Option) -> str:
    if option.mode == MIG:
        return gpu_catalog.resource_name(option.profile)
    if option.mode in (TIME_SLICING, MPS):
        return "nvidia.com/gpu.shared"
    return "nvidia.com/gpu"
