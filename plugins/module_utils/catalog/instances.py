# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG instances a GPU holds now, read from gpu facts (the ``gpus`` shape of gpu_info).

Split from ``mig.plan`` so that what only reads a layout (the slice diagrams of gpu_info, reports)
does not load the planner. Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Dict, List

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog

# An existing GPU instance: GI profile name, placement (memory slices), NVML GI id, the compute
# slices of its compute instances (sorted, largest first; () when it has none) and whether
# processes run on it.
Instance = namedtuple("Instance", ["profile", "start", "size", "gpu_instance_id", "compute_instances", "busy"])


def instances_from_gpu(gpu: Dict[str, Any]) -> List[Instance]:
    """Group a gpu facts dict's MIG device rows (one per compute instance) into Instances.

    Rows carry ``profile`` (``3g.40gb`` or ``1c.3g.40gb``), optionally ``gpu_instance_profile``,
    ``placement`` {start, size}, ``gpu_instance_id``, ``compute_slices``, ``has_compute_instance`` (false for a GPU instance
    without compute instance, as gpu_state reports it) and ``busy``. Processes listed in
    ``gpu['processes']`` with a ``gpu_instance_id`` mark that instance busy too.
    """
    busy_ids = set(p.get("gpu_instance_id") for p in gpu.get("processes") or [] if p.get("gpu_instance_id") is not None)
    groups = {}
    order = []
    for n, row in enumerate(gpu.get("instances") or []):
        gid = row.get("gpu_instance_id")
        c, gi = gpu_catalog.parse_profile(row["profile"])
        gi = row.get("gpu_instance_profile") or gi
        key = gid if gid is not None else ("planned", n)
        if row.get("planned") and gid is None:
            # predicted rows of one new GI share placement: group them by it
            key = ("planned", gi, (row.get("placement") or {}).get("start"))
        if key not in groups:
            placement = row.get("placement") or {}
            groups[key] = {"profile": gi, "start": placement.get("start"), "size": placement.get("size"),
                           "cis": [], "busy": gid is not None and gid in busy_ids, "gid": gid}
            order.append(key)
        grp = groups[key]
        grp["busy"] = grp["busy"] or bool(row.get("busy"))
        if not row_is_mig_device(row):
            continue  # a GPU instance without compute instance
        slices = row.get("compute_slices")
        grp["cis"].append(slices or (c if c is not None else gi_slices(gi)))
    out = []
    for key in order:
        g = groups[key]
        out.append(Instance(g["profile"], g["start"], g["size"], g["gid"], tuple(sorted(g["cis"], reverse=True)),
                            g["busy"]))
    return out


def row_is_mig_device(row: Dict[str, Any]) -> bool:
    """False for the row gpu_state reports for a GPU instance without compute instance."""
    return row.get("has_compute_instance") is not False and row.get("compute_slices") != 0


def gi_slices(gi_name: str) -> int:
    return int(gi_name.split("g.", 1)[0])
