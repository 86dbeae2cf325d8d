# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Packing units onto GPUs of one model, in bulk: one layout is built first-fit decreasing, then repeated.

* :func:`valid_layout` - a MIG layout (profile -> count) is valid when counts are within each profile's
  max instances, compute and memory slices fit and mig_plan finds placements for every instance;
* :func:`enumerate_layouts` - every maximal valid layout over some profiles (for the exact solver);
* :func:`pack_mig` - profile counts -> ``[(layout, gpus)]``: the next GPU takes the largest profiles first, as
  many as fit, then smaller ones; the same layout is repeated while the counts last (so 10,000 GPUs cost a few
  dozen layout builds, not 10,000);
* :func:`pack_shared` - time-sliced replicas by (memory, compute) class -> ``[(pattern, gpus)]`` the same way;
  replicas on one GPU fit its memory and their compute adds up to at most one GPU;
* :func:`take` - the replicas a packed GPU gets, popped from a queue of demand items; :func:`packed_use` - one
  packed GPU's use (MIG layout or time-sliced pattern) with its replicas (heuristic and exact solver).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.demand import WHOLE
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import Layout

EPS = 1e-9
_VALID: Dict[Tuple[str, Layout], bool] = {}
_PLACED: Dict[Tuple[str, Layout], List[Tuple[str, int, int]]] = {}


SharedClass = Tuple[float, float]  # a time-sliced replica: (memory GB, compute share)
SharedPattern = Tuple[Tuple[SharedClass, int], ...]  # replicas per class on one time-sliced GPU


def _targets(model, layout):
    pmap = mig_plan.profile_map(model.profiles)
    if not all(name in pmap for name, _count in layout):
        # a node's current layout may hold compute-instance profiles (1c.3g.40gb: 3 is one 3g.40gb GI with three
        # compute instances): mig_plan packs them into GIs as mig-parted does
        return mig_plan.targets_from_mig_devices(dict(layout), model.profiles, model.key), pmap
    out = []
    for name, count in layout:
        p = pmap[name]
        out.extend([mig_plan.Target(p.name, (p.compute_slices,))] * count)
    return out, pmap


def valid_layout(model: gpu_catalog.GpuModel, layout: Layout) -> bool:
    """``layout``: a sorted tuple of (profile, count)."""
    key = (model.key, layout)
    if key in _VALID:
        return _VALID[key]
    pmap = mig_plan.profile_map(model.profiles)
    if not all(name in pmap for name, _count in layout):
        try:
            mig_plan.validate_targets(_targets(model, layout)[0], model.profiles, model.memory_slices,
                                      model.compute_slices, model.key)
            ok = True
        except GpuOpsError:
            ok = False
        _VALID[key] = ok
        return ok
    ok = True
    used_c = used_m = 0
    for name, count in layout:
        p = pmap[name]
        if count > p.max_instances:
            ok = False
        used_c += p.compute_slices * count
        used_m += p.memory_slices * count
    if ok and (used_c > model.compute_slices or used_m > model.memory_slices):
        ok = False
    if ok:
        targets, pmap = _targets(model, layout)
        ok = mig_plan.place(targets, pmap, model.memory_slices) is not None
    _VALID[key] = ok
    return ok


def placements(model: gpu_catalog.GpuModel, layout: Layout) -> List[Tuple[str, int, int]]:
    """``[(profile, start, size)]`` for every instance of a valid layout (mig_plan's placement search)."""
    key = (model.key, layout)
    if key not in _PLACED:
        targets, pmap = _targets(model, layout)
        starts = mig_plan.best_place(targets, pmap, model.memory_slices) if targets else []
        _PLACED[key] = [(t.profile, s, pmap[t.profile].memory_slices) for t, s in zip(targets, starts or [])]
    return _PLACED[key]


def _add(layout, name, n=1):
    d = dict(layout)
    d[name] = d.get(name, 0) + n
    return tuple(sorted(d.items()))


def enumerate_layouts(model: gpu_catalog.GpuModel, names: Sequence[str], limit: int = 5000) -> List[Layout]:
    """Every maximal valid layout using only the profiles ``names`` (plus the empty layout when none fits)."""
    names = sorted(set(names))
    out: List[Layout] = []
    seen = set()

    def rec(layout, start):
        if len(out) >= limit:
            return
        grew = False
        for i in range(start, len(names)):
            nxt = _add(layout, names[i])
            if valid_layout(model, nxt):
                grew = True
                rec(nxt, i)
        if not grew:
            # maximal among extensions by later names: check all names
            if not any(valid_layout(model, _add(layout, n)) for n in names) and layout not in seen:
                seen.add(layout)
                out.append(layout)

    rec((), 0)
    return out


def pack_mig(model: gpu_catalog.GpuModel, need: Mapping[str, int]) -> List[Tuple[Layout, int]]:
    """``need``: profile -> count. Returns ``[(layout, gpus)]`` covering every count."""
    pmap = mig_plan.profile_map(model.profiles)
    need = dict((k, v) for k, v in need.items() if v > 0)
    order = sorted(need, key=lambda n: (-pmap[n].memory_slices, -pmap[n].compute_slices, n))
    out = []
    while need:
        layout: Layout = ()
        for name in order:
            while need.get(name, 0) - dict(layout).get(name, 0) > 0:
                nxt = _add(layout, name)
                if not valid_layout(model, nxt):
                    break
                layout = nxt
        if not layout:
            raise ValueError("profile %s cannot be placed on %s" % (order[0], model.key))
        k = min(need[name] // count for name, count in layout)
        out.append((layout, k))
        for name, count in layout:
            need[name] -= count * k
            if not need[name]:
                del need[name]
        order = [n for n in order if n in need]
    return out


def pack_shared(cap_gb: float, classes: Mapping[SharedClass, int]) -> List[Tuple[SharedPattern, int]]:
    """``classes``: (memory_gb, compute) -> replicas. Returns ``[(pattern, gpus)]``; pattern a sorted tuple."""
    need = dict((k, v) for k, v in classes.items() if v > 0)
    order = sorted(need, key=lambda c: (-c[0], -c[1]))
    out = []
    while need:
        free_m, free_c = float(cap_gb), 1.0
        pattern = {}
        for cls in order:
            mem, comp = cls
            n = min(need[cls], int(math.floor((free_m + EPS) / mem)), int(math.floor((free_c + EPS) / comp)))
            if n > 0:
                pattern[cls] = n
                free_m -= n * mem
                free_c -= n * comp
        if not pattern:
            raise ValueError("a replica of %g GB does not fit in %g GB" % (order[0][0], cap_gb))
        k = min(need[cls] // n for cls, n in pattern.items())
        out.append((tuple(sorted(pattern.items())), k))
        for cls, n in pattern.items():
            need[cls] -= n * k
            if not need[cls]:
                del need[cls]
        order = [c for c in order if c in need]
    return out


def take(queue: List[List[int]], count: int, profile: Any) -> List[List[Any]]:
    """Pop ``count`` replicas from ``queue`` (``[[item, remaining], ...]``), item by item: ``[[item, profile, n]]``,
    one entry per item."""
    out: List[List[Any]] = []
    while count > 0 and queue:
        head = queue[0]
        n = min(count, head[1])
        if out and out[-1][0] == head[0]:
            out[-1][2] += n
        else:
            out.append([head[0], profile, n])
        head[1] -= n
        count -= n
        if head[1] == 0:
            queue.pop(0)
    return out


def packed_use(model_key: str, layout: Sequence[Tuple[Any, int]], queue_of: Callable[[Any], List[List[int]]],
               mig: bool) -> Dict[str, Any]:
    """The use of one GPU packed with ``layout`` (``[(MIG profile or time-sliced class, count)]``): its replicas
    taken from ``queue_of(profile or class)``. A MIG layout names each unit's profile; a time-sliced pattern
    shares the whole GPU."""
    units = []
    for key, count in layout:
        units.extend(take(queue_of(key), count, key if mig else None))
    return {"model": model_key, "cls": "mig" if mig else "ts", "layout": layout if mig else WHOLE, "units": units,
            "group": None}
