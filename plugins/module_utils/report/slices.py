# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rows of :func:`svg.slice_diagram` from GPU facts (the ``gpus`` shape of gpu_info).

A report that holds layouts rather than live facts (a plan) can build the same dicts: per GPU
``{index, model, name, mig_capable, mig_mode_current, instances: [{profile, placement: {start, size}}]}``.
Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances


def gpu_row(gpu: Dict[str, Any], host: Any = None, shares: Optional[List[str]] = None) -> Dict[str, Any]:
    """One diagram row for one GPU.

    ``shares``: for a GPU without MIG, the labels of what shares it (time-slicing or MPS replicas,
    e.g. ``["chat x3", "embed"]``); default one block ``full GPU``.
    """
    model = gpu_catalog.lookup_model(gpu.get("model"), gpu.get("name")) or gpu_catalog.lookup_model(gpu.get("name"))
    model_label = model.key if model is not None else (gpu.get("model") or gpu.get("name") or "unknown")
    label = "%sGPU%s %s" % ((host + " ") if host else "", gpu.get("index"), model_label)
    if gpu.get("lost"):
        return {"label": label, "slots": 0, "blocks": [{"label": "GPU lost", "kind": "broken"}]}
    if not (gpu.get("mig_capable") and gpu.get("mig_mode_current")):
        blocks = [{"label": s, "kind": s} for s in shares] if shares else [{"label": "full GPU", "kind": "full GPU"}]
        note = "MIG disabled" if gpu.get("mig_capable") else "no MIG"
        return {"label": label, "slots": 0, "blocks": blocks, "note": note}
    slots = model.memory_slices if model is not None and model.memory_slices else 8
    blocks = []
    used = 0
    for inst in mig_instances.instances_from_gpu(gpu):
        if inst.start is None or inst.size is None:
            continue
        if not inst.compute_instances:
            blocks.append({"start": inst.start, "size": inst.size, "label": inst.profile + " no CI", "kind": "broken"})
            continue
        used += mig_instances.gi_slices(inst.profile)
        blocks.append({"start": inst.start, "size": inst.size, "label": inst.profile + ("*" if inst.busy else ""),
                       "kind": inst.profile})
    total = model.compute_slices if model is not None else "?"
    return {"label": label, "slots": slots, "blocks": blocks, "note": "%d/%s compute" % (used, total)}


def host_rows(hosts: List[Tuple[str, Any]]) -> List[Dict[str, Any]]:
    """Rows for several hosts: ``hosts`` is ``[(host name, [gpu facts])]``; a heading row per host."""
    rows = []
    for host, gpus in hosts:
        rows.append({"separator": host})
        for gpu in gpus:
            rows.append(gpu_row(gpu))
    return rows
