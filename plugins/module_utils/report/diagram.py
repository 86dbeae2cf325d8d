# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slice diagrams: a one-line text picture per GPU of its memory slices and the MIG instances on them.

::

    GPU0 h100_80gb  [3g.40gb                    |2g.20gb          |1g.10gb |   ·    ]  6/7 compute
    GPU1 h100_80gb  [1g.10gb*|1g.10gb |1g.10gb |1g.10gb |1g.10gb |1g.10gb |1g.10gb |   ·    ]  7/7 compute
    GPU2 l40s_48gb  [ full GPU (MIG not supported) ]

Each memory slice is a cell of ``width`` characters; an instance spans its placement's cells
(``start``/``size`` in memory slices); ``·`` is a free slice; ``*`` marks an instance with processes;
compute instances inside a GI are shown as ``3x1c``; ``!`` starts a GPU instance without a compute
instance (no MIG device: e.g. left by a failure between two NVML calls), and the line ends with how
many there are. Pure function of gpu facts (the ``gpus`` shape
of gpu_info), Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances

FREE = u"\u00b7"
DEFAULT_WIDTH = 8


def _memory_slices(gpu, instances):
    model = gpu_catalog.lookup_model(gpu.get("model"), gpu.get("name")) or gpu_catalog.lookup_model(gpu.get("name"))
    if model is not None and model.memory_slices:
        return model.memory_slices
    ends = [i.start + i.size for i in instances if i.start is not None and i.size]
    return max(ends + [8])


def _compute_slices(gpu):
    model = gpu_catalog.lookup_model(gpu.get("model")) or gpu_catalog.lookup_model(gpu.get("name"))
    return model.compute_slices if model is not None else None


def _ci_label(inst):
    cis = inst.compute_instances
    g = mig_instances.gi_slices(inst.profile)
    if not cis:
        return " no CI"
    if len(cis) == 1 and cis[0] == g:
        return ""
    if len(set(cis)) == 1:
        return " %dx%dc" % (len(cis), cis[0])
    return " " + "+".join("%dc" % c for c in cis)


def _cell(text, span_chars):
    if len(text) > span_chars:
        return text[:span_chars]
    return text + " " * (span_chars - len(text))


def _free_cell(width):
    left = (width - 1) // 2
    return " " * left + FREE + " " * (width - left - 1)


def gpu_label(gpu: Dict[str, Any]) -> str:
    return "GPU%s %s" % (gpu.get("index"), gpu.get("model") or gpu.get("name") or "unknown")


def render_gpu(gpu: Dict[str, Any], width: int = DEFAULT_WIDTH, label_width: Optional[int] = None) -> str:
    """One line for one GPU (gpu facts dict)."""
    label = gpu_label(gpu)
    if label_width:
        label = label.ljust(label_width)
    if gpu.get("lost"):
        return "%s [ GPU lost ]" % label
    if not gpu.get("mig_capable"):
        return "%s [ full GPU (MIG not supported) ]" % label
    pending = gpu.get("mig_mode_pending")
    if not gpu.get("mig_mode_current"):
        note = " (MIG enable pending reset)" if pending else " (MIG disabled)"
        return "%s [ full GPU%s ]" % (label, note)
    instances = sorted(mig_instances.instances_from_gpu(gpu), key=lambda i: (i.start is None, i.start))
    slices = _memory_slices(gpu, instances)
    cells = []
    pos = 0
    used_compute = 0
    no_ci = 0
    for inst in instances:
        if inst.start is None or inst.size is None:
            continue
        while pos < inst.start:
            cells.append(_free_cell(width))
            pos += 1
        span = inst.size * width + (inst.size - 1)
        text = inst.profile + ("*" if inst.busy else "") + _ci_label(inst)
        if not inst.compute_instances:
            no_ci += 1
            text = "!" + text
        cells.append(_cell(text, span))
        pos = inst.start + inst.size
        used_compute += mig_instances.gi_slices(inst.profile)
    while pos < slices:
        cells.append(_free_cell(width))
        pos += 1
    total = _compute_slices(gpu)
    tail = "  %d/%s compute" % (used_compute, total if total else "?")
    if pending is False:
        tail += "  (MIG disable pending reset)"
    if no_ci:
        tail += "  %d GPU instance%s without compute instance" % (no_ci, "" if no_ci == 1 else "s")
    return "%s [%s]%s" % (label, "|".join(cells), tail)


def render(gpus: List[Dict[str, Any]], width: int = DEFAULT_WIDTH, host: Optional[str] = None) -> List[str]:
    """Lines for every GPU of a host (optionally preceded by the host name)."""
    label_width = max([len(gpu_label(g)) for g in gpus] or [0])
    lines = []
    if host:
        lines.append("%s:" % host)
    for gpu in gpus:
        lines.append(("  " if host else "") + render_gpu(gpu, width, label_width))
    return lines
