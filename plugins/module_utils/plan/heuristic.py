# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fast planner: keep what serves, choose models by cost per replica, pack in bulk, place on nodes.

1. *Keep* (churn): GPUs whose current MIG layout the demand fills completely keep it (in bulk per layout), then
   GPUs it fills at least half (by compute slices) - so a re-plan after a small demand change reconfigures few GPUs.
2. *Choose models*: items by priority, then largest share first; each takes the model with the lowest cost per
   replica (price x share of a GPU; share alone under ``min_gpus``) while that model has GPUs left.
3. *Pack* per model: MIG profile counts into catalog-valid, placeable layouts (packing.pack_mig), time-sliced
   replicas by memory and compute (packing.pack_shared), MPS replicas per client count, whole GPUs.
4. *Place* the GPUs on nodes (fleet.Fleet.place). What finds no GPU goes back to step 2 with the models that are
   full left out (up to four rounds); what still does not fit is unplaced, with the reason.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import packing
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import WHOLE, fleet_models
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.fleet import Fleet
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import Item, Node, Prices
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.fleet import Placed, Use

ROUNDS = 4
KEEP_FILL = 0.5


def unit_cost(option: opt.Option, prices: Prices, objective: str) -> Tuple[float, float]:
    price = prices.get(option.model)
    if objective == "min_gpus" or price is None:
        return (option.share, price if price is not None else 0.0)
    return (price * option.share, option.share)


def uses_for(model: gpu_catalog.GpuModel, mode_units: Mapping[str, List[Tuple[int, opt.Option, int]]],
             group_start: int = 0) -> Tuple[List[Use], int]:
    """GPU uses for ``{mode key: [(item index, option, replicas)]}`` of one model. Returns (uses, next group id)."""
    uses = []
    group = group_start
    mig_need: Dict[str, int] = OrderedDict()
    mig_queue: Dict[str, List[List[int]]] = {}
    ts_need: Dict[Tuple[float, float], int] = OrderedDict()
    ts_queue: Dict[Tuple[float, float], List[List[int]]] = {}
    mps_queue: Dict[int, List[List[int]]] = OrderedDict()
    for mode_key in mode_units:
        for i, option, n in mode_units[mode_key]:
            if n <= 0:
                continue
            if option.mode == opt.MIG:
                mig_need[option.profile] = mig_need.get(option.profile, 0) + n
                mig_queue.setdefault(option.profile, []).append([i, n])
            elif option.mode == opt.TIME_SLICING:
                cls = (option.memory_gb, option.compute)
                ts_need[cls] = ts_need.get(cls, 0) + n
                ts_queue.setdefault(cls, []).append([i, n])
            elif option.mode == opt.MPS:
                mps_queue.setdefault(option.mps_replicas, []).append([i, n])
            else:
                for dummy in range(n):
                    if option.gpus > 1:
                        for part in range(option.gpus):
                            uses.append({"model": model.key, "cls": "mig", "layout": WHOLE,
                                         "units": [[i, None, 0 if part else 1]], "group": group})
                        group += 1
                    else:
                        uses.append({"model": model.key, "cls": "mig", "layout": WHOLE, "units": [[i, None, 1]],
                                     "group": None})
    if mig_need:
        for layout, k in packing.pack_mig(model, mig_need):
            uses.extend(packing.packed_use(model.key, layout, lambda prof: mig_queue[prof], True) for dummy in range(k))
    if ts_need:
        cap = opt.capacity_gb(model)
        for pattern, k in packing.pack_shared(cap, ts_need):
            uses.extend(packing.packed_use(model.key, pattern, lambda cls: ts_queue[cls], False) for dummy in range(k))
    for r in sorted(mps_queue, reverse=True):
        queue = mps_queue[r]
        while queue:
            units = packing.take(queue, r, None)
            uses.append({"model": model.key, "cls": "mps:%d" % r, "layout": WHOLE, "units": units, "group": None})
    return uses, group


def keep_current(fleet: Fleet, items: List[Item], options: opt.ItemOptions, resid: Dict[int, int],
                 fill_min: float = KEEP_FILL) -> None:
    """The keep phase: pin GPUs whose current MIG layout the demand fills (at least ``fill_min`` of it after the
    GPUs it fills completely)."""
    groups: Dict[Any, List[Tuple[int, int]]] = OrderedDict()
    for ni, node in enumerate(fleet.nodes):
        for gi, model in enumerate(node.models):
            lay = node.current[gi]
            if lay is None or lay == WHOLE or not lay or not model.profiles or (ni, gi) in fleet.assign:
                continue
            if fleet.cls[ni] not in (None, "mig"):
                continue
            groups.setdefault((model.key, lay), []).append((ni, gi))
    for gpus in groups.values():  # busy nodes keep their layouts first
        gpus.sort(key=lambda s: (-fleet.nodes[s[0]].busy, s[0], s[1]))
    models = fleet_models(fleet.nodes)
    order = sorted(groups, key=lambda g: (-len(groups[g]), g))
    by_prof: Dict[Tuple[str, str], List[int]] = {}
    for it in sorted(items, key=lambda x: (-x.priority, x.index)):
        for key, o in options[it.index].items():
            if o.mode == opt.MIG:
                by_prof.setdefault((key, o.profile), []).append(it.index)

    def avail(key, prof):
        return sum(resid[i] for i in by_prof.get((key, prof), ()))

    def draw(key, layout):
        units = []
        for prof, count in layout:
            left = count
            for i in by_prof.get((key, prof), ()):
                if left <= 0:
                    break
                n = min(left, resid[i])
                if n:
                    resid[i] -= n
                    units.append([i, prof, n])
                    left -= n
        return units

    for g in order:
        key, layout = g
        model = models[key]
        gpus = groups[g]
        k = len(gpus)
        for prof, count in layout:
            k = min(k, avail(key, prof) // count)
        for ni, gi in gpus[:k]:
            fleet.pin(ni, gi, {"model": key, "cls": "mig", "layout": layout, "units": draw(key, layout), "group": None})
        pmap = dict((p.name, p) for p in model.profiles)
        total_c = sum(pmap[p].compute_slices * c for p, c in layout)
        for ni, gi in gpus[k:]:
            if fleet.cls[ni] not in (None, "mig"):
                continue
            fill = sum(pmap[p].compute_slices * min(c, avail(key, p)) for p, c in layout)
            if not total_c or not fill or fill < fill_min * total_c:
                break
            fleet.pin(ni, gi, {"model": key, "cls": "mig", "layout": layout, "units": draw(key, layout), "group": None})


def solve(nodes: List[Node], items: List[Item], options: opt.ItemOptions, prices: Prices, objective: str = "min_cost",
          budget: Optional[int] = None, keep: bool = True, start: Optional[Placed] = None) -> Placed:
    """Returns ``(fleet, resid, overflow_reasons)``: the placed fleet, replicas left per item, why they are left.

    ``start``: ``(fleet, resid, why)`` already placed (the rounded LP); the greedy rounds place what it left.
    """
    if start is not None:
        fleet, resid, why = start
        why = dict(why)
    else:
        fleet = Fleet(nodes, budget)
        resid = dict((it.index, it.replicas) for it in items)
        why = {}
        if keep:
            keep_current(fleet, items, options, resid)
    full = set()
    group = 0
    models = fleet_models(nodes)
    for dummy_round in range(ROUNDS):
        if not any(resid[it.index] and options[it.index] for it in items):
            break
        capacity = dict((key, float(fleet.free_count(key, unopened_only=key in full))) for key in models)
        alloc: Dict[str, Dict[str, List[Tuple[int, opt.Option, int]]]] = OrderedDict()
        order = sorted(items, key=lambda x: (-x.priority, -max([o.share for o in options[x.index].values()] or [0]),
                                             x.index))
        for it in order:
            r = resid[it.index]
            if not r:
                continue
            cands = sorted(options[it.index].items(), key=lambda kv: (unit_cost(kv[1], prices, objective), kv[0]))
            for key, o in cands:
                if r <= 0:
                    break
                take = min(r, int((capacity.get(key, 0.0) + 1e-9) // o.share))
                if take <= 0:
                    continue
                capacity[key] -= take * o.share
                alloc.setdefault(key, OrderedDict()).setdefault(o.mode, []).append((it.index, o, take))
                resid[it.index] -= take
                r -= take
        if not alloc:
            break
        uses = []
        for key in alloc:
            more, group = uses_for(models[key], alloc[key], group)
            uses.extend(more)
        overflow = fleet.place(uses)
        for use in overflow:
            full.add(use["model"])
            for i, dummy_prof, n in use["units"]:
                resid[i] += n
                why[i] = use.get("why", "gpus")
    if fleet.budget is not None and any(resid[it.index] for it in items):
        # the budget stopped new layouts: serve what the current layouts can, however little of them it fills
        before = dict(resid)
        keep_current(fleet, items, options, resid, fill_min=0.0)
        for i in resid:
            if resid[i] < before[i] and not resid[i]:
                why.pop(i, None)
    return fleet, resid, why
