# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Curves of a replay, as the FGD artefact records and merges them.

After every arrival the engine records the cumulative requested GPU milli ("arrived"), the GPU
milli bound to pods ("allocated") and the fragmented GPU milli. Discretisation (artefact
``experiments/analysis/merge_alloc_discrete.py``, ``merge_frag_discrete.py``,
``merge_frag_ratio_discrete.py``):

* ``arrived_pct`` of an event = round(100 * arrived / capacity) (Python's round: half to even);
* for each integer x from 0 to the largest: the mean over the events whose ``arrived_pct`` is x of
  ``allocated_pct = round(100 * allocated / capacity, 2)``; when no event has exactly x, the mean
  over the events within x - 1 .. x + 1; when none, x is left out;
* ``frag_pct`` = 100 * mean fragmented milli / capacity (rounded to 2 decimals);
  ``frag_ratio_pct`` = mean of 100 * fragmented / idle milli.

Extra series of ours: ``served_pct`` (requested GPU milli of the pods placed; below
``allocated_pct`` when a sharing mode binds more than a pod asks for, e.g. exclusive GPUs).

Requires numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.engine import Events


def _round_half_even(values, digits=0):
    return np.round(values, digits)  # numpy rounds half to even, as Python's round does


def curve(events: Events, capacity_milli: float, upto: Optional[int] = None) -> List[Dict[str, Any]]:
    """The discrete curve: ``[{arrived_pct, allocated_pct, frag_pct, frag_ratio_pct, served_pct}]``."""
    if capacity_milli <= 0 or len(events.arrived) == 0:
        return []
    cap = float(capacity_milli)
    arr = _round_half_even(events.arrived / cap * 100.0).astype(np.int64)
    alloc = _round_half_even(events.allocated / cap * 100.0, 2)
    served = _round_half_even(events.served / cap * 100.0, 2)
    frag = events.frag
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(events.idle > 0, 100.0 * events.frag / np.where(events.idle > 0, events.idle, 1.0), 0.0)
    top = int(arr.max()) if upto is None else int(upto)
    out = []
    # events are in arrival order, arrived_pct is non-decreasing: slice by searchsorted
    for x in range(0, top + 1):
        lo = np.searchsorted(arr, x, side="left")
        hi = np.searchsorted(arr, x, side="right")
        if hi <= lo:
            lo = np.searchsorted(arr, x - 1, side="left")
            hi = np.searchsorted(arr, x + 1, side="right")
            if hi <= lo:
                continue
        out.append({
            "arrived_pct": x,
            "allocated_pct": round(float(alloc[lo:hi].mean()), 2),
            "frag_pct": round(100.0 * float(frag[lo:hi].mean()) / cap, 2),
            "frag_ratio_pct": round(float(ratio[lo:hi].mean()), 2),
            "served_pct": round(float(served[lo:hi].mean()), 2),
        })
    return out


def at(curve_points: Sequence[Mapping[str, Any]], x: int, key: str = "allocated_pct") -> Optional[float]:
    """The value of ``key`` at arrived_pct ``x`` (None when the curve does not reach it)."""
    for p in curve_points:
        if p["arrived_pct"] == x:
            return p[key]
    return None


def index_at(events: Events, capacity_milli: float, pct: float) -> int:
    """Index of the last event whose arrived workload is at most ``pct`` % (rounded as the curve)."""
    arr = _round_half_even(events.arrived / float(capacity_milli) * 100.0).astype(np.int64)
    i = int(np.searchsorted(arr, pct, side="right")) - 1
    return i
