# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet being planned: which node serves which sharing class, which GPU gets which layout and units.

A node serves one class, as the device plugin's per-node config allows: ``mig`` (mixed strategy: MIG layouts and
whole GPUs), ``ts`` (time-slicing) or ``mps:<replicas>``. A *use* is one GPU's plan:
``{"model", "cls", "layout", "units": [[item index, profile or None, replicas]], "group"}`` (``group`` ties the GPUs
of one multi-GPU replica to one node). :meth:`Fleet.place` puts uses on nodes - first on open nodes of the same
class, then on new nodes chosen best-fit (the largest node the uses fill, else the smallest that holds them) - and
on GPUs whose current layout is the same first, so that a re-plan keeps what it can. A GPU whose layout changes
from a known current one counts against the disruption budget; a use that would exceed it is not placed.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.demand import WHOLE
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import Node


# One GPU's plan: {model, cls, layout, units: [[item index, profile or None, replicas]], group}
Use = Dict[str, Any]


def _mig_current(layout):
    return layout is not None and layout != WHOLE


class Fleet(object):
    def __init__(self, nodes: Sequence[Node], budget: Optional[int] = None) -> None:
        self.nodes = nodes
        self.budget = budget
        self.reconfigured = 0
        self.cls: List[Optional[str]] = [None] * len(nodes)
        self.free: List[Dict[str, List[int]]] = []
        self.assign: Dict[Tuple[int, int], Use] = {}
        self.open: Dict[str, List[int]] = {}
        self.buckets: Dict[str, Dict[int, List[Tuple[int, bool, int]]]] = {}
        for ni, node in enumerate(nodes):
            free: Dict[str, List[int]] = OrderedDict()
            for gi, model in enumerate(node.models):
                free.setdefault(model.key, []).append(gi)
            self.free.append(free)
        for ni, node in enumerate(nodes):
            cost = self.mig_disable_cost(ni)
            for key, gpus in self.free[ni].items():
                # idle nodes first: on equal cost a new layout goes where no GPU pod runs
                self.buckets.setdefault(key, {}).setdefault(len(gpus), []).append((cost, node.busy > 0, ni))
        for key in self.buckets:
            for count in self.buckets[key]:
                self.buckets[key][count].sort()

    def mig_disable_cost(self, ni: int) -> int:
        node = self.nodes[ni]
        return sum(1 for gi, m in enumerate(node.models)
                   if gpu_catalog.mig_capable(m) and _mig_current(node.current[gi]) and (ni, gi) not in self.assign)

    def budget_left(self) -> Optional[int]:
        return None if self.budget is None else self.budget - self.reconfigured

    def free_count(self, key: str, unopened_only: bool = False) -> int:
        return sum(len(f.get(key, ())) for ni, f in enumerate(self.free) if not unopened_only or self.cls[ni] is None)

    def open_node(self, ni: int, cls: str) -> None:
        self.cls[ni] = cls
        self.open.setdefault(cls, []).append(ni)
        if cls != "mig":
            node = self.nodes[ni]
            for gi, m in enumerate(node.models):
                if gpu_catalog.mig_capable(m) and _mig_current(node.current[gi]):
                    self.reconfigured += 1

    def _pick_gpu(self, ni, use, allow_change=True):
        """Index of a free GPU of the use's model on node ``ni``: same current layout first; None if the budget (or
        ``allow_change`` false) forbids a change."""
        node = self.nodes[ni]
        gpus = self.free[ni].get(use["model"])
        if not gpus:
            return None
        target = use["layout"]
        best = None
        for pos, gi in enumerate(gpus):
            cur = node.current[gi]
            if self.cls[ni] != "mig" or cur is None or cur == target:
                best = pos
                break
            if best is None and allow_change:
                best = pos
        if best is None:
            return None
        gi = gpus[best]
        cur = node.current[gi]
        change = self.cls[ni] == "mig" and cur is not None and cur != target
        if change:
            left = self.budget_left()
            if left is not None and left <= 0:
                return None
            self.reconfigured += 1
        del gpus[best]
        return gi

    def put(self, ni: int, gi: int, use: Use) -> None:
        use["node"], use["gpu"] = ni, gi
        self.assign[(ni, gi)] = use

    def pin(self, ni: int, gi: int, use: Use) -> None:
        """Keep a GPU's current layout for ``use`` (the keep phase); the node becomes a ``mig`` node."""
        if self.cls[ni] is None:
            self.open_node(ni, "mig")
        self.free[ni][use["model"]].remove(gi)
        self.put(ni, gi, use)

    def _new_node(self, key, cls, want):
        """An unopened node with free GPUs of ``key`` (best fit for ``want`` GPUs) that the budget allows, or None."""
        buckets = self.buckets.get(key) or {}
        left = self.budget_left()
        fits = []
        for count in sorted(buckets):
            lst = buckets[count]
            while lst and self.cls[lst[0][2]] is not None:
                lst.pop(0)
            for pos, (cost, dummy_busy, ni) in enumerate(lst):
                if self.cls[ni] is not None:
                    continue
                if cls != "mig" and left is not None and self.mig_disable_cost(ni) > left:
                    continue
                fits.append((count, ni))
                break
        if not fits:
            return None
        smaller = [f for f in fits if f[0] <= want]
        return max(smaller)[1] if smaller else min(fits)[1]

    def place(self, uses: List[Use]) -> List[Use]:
        """Put ``uses`` on nodes; returns the uses that found no GPU (with ``why``: ``gpus`` or ``budget``)."""
        overflow = []
        groups: Dict[Any, List[Use]] = OrderedDict()
        singles: Dict[Any, List[Use]] = OrderedDict()
        for use in uses:
            if use.get("group") is not None:
                groups.setdefault(use["group"], []).append(use)
            else:
                singles.setdefault((use["cls"], use["model"]), []).append(use)
        for members in groups.values():
            key, need = members[0]["model"], len(members)
            cands = [ni for ni in self.open.get("mig", []) if len(self.free[ni].get(key, ())) >= need]
            ni = min(cands, key=lambda n: (len(self.free[n][key]), n)) if cands else None
            if ni is None:
                ni = self._new_node_min(key, need)
                if ni is not None:
                    self.open_node(ni, "mig")
            if ni is None:
                for use in members:
                    use["why"] = "gpus"
                overflow.extend(members)
                continue
            placed = []
            for use in members:
                before = self.reconfigured
                gi = self._pick_gpu(ni, use)
                if gi is None:
                    break
                placed.append((gi, self.reconfigured - before))
                self.put(ni, gi, use)
            if len(placed) < len(members):
                for (gi, changed), use in zip(placed, members):
                    del self.assign[(ni, gi)]
                    self.free[ni][key].append(gi)
                    self.free[ni][key].sort()
                    self.reconfigured -= changed
                for use in members:
                    use["why"] = "budget"
                overflow.extend(members)
        self._match_current(singles)
        order = sorted(singles, key=lambda k: (k[0] != "mig", k[0], k[1]))
        for cls, key in order:
            todo = singles[(cls, key)]
            pos = 0
            for ni in list(self.open.get(cls, [])):
                pos = self._fill(ni, key, todo, pos, allow_change=False)
            while pos < len(todo):
                ni = self._new_node(key, cls, len(todo) - pos)
                if ni is None:
                    break
                self.open_node(ni, cls)
                pos = self._fill(ni, key, todo, pos)
                if self.free[ni].get(key) and pos < len(todo):
                    break  # the budget stopped us
            for ni in list(self.open.get(cls, [])):
                pos = self._fill(ni, key, todo, pos)
            for use in todo[pos:]:
                left = self.budget_left()
                use["why"] = "budget" if left is not None and left <= 0 else "gpus"
                overflow.append(use)
        return overflow

    def _fill(self, ni, key, todo, pos, allow_change=True):
        """Put ``todo[pos:]`` on node ``ni`` while it has room of ``key`` and a GPU takes them; the new ``pos``."""
        while pos < len(todo) and self.free[ni].get(key):
            gi = self._pick_gpu(ni, todo[pos], allow_change=allow_change)
            if gi is None:
                break
            self.put(ni, gi, todo[pos])
            pos += 1
        return pos

    def _match_current(self, singles):
        """MIG uses go first to free GPUs whose current layout is the same (no change), on any mig-able node."""
        index = {}
        for ni, node in enumerate(self.nodes):
            if self.cls[ni] not in (None, "mig"):
                continue
            for key, gpus in self.free[ni].items():
                for gi in gpus:
                    cur = node.current[gi]
                    if cur is not None and node.models[gi].profiles:
                        index.setdefault((key, cur), []).append((ni, gi))
        for spots in index.values():  # busy nodes keep their layouts first
            spots.sort(key=lambda s: (-self.nodes[s[0]].busy, s[0], s[1]))
        for (cls, key), todo in singles.items():
            if cls != "mig":
                continue
            rest = []
            for use in todo:
                spots = index.get((key, use["layout"]))
                while spots and self.cls[spots[0][0]] not in (None, "mig"):
                    spots.pop(0)
                if not spots:
                    rest.append(use)
                    continue
                ni, gi = spots.pop(0)
                if self.cls[ni] is None:
                    self.open_node(ni, "mig")
                self.free[ni][key].remove(gi)
                self.put(ni, gi, use)
            todo[:] = rest

    def _new_node_min(self, key, need):
        best = None
        for count in sorted(self.buckets.get(key) or {}):
            if count < need:
                continue
            for cost, dummy_busy, ni in self.buckets[key][count]:
                if self.cls[ni] is None:
                    best = ni
                    break
            if best is not None:
                break
        return best


# What a solver leaves: the placed fleet, the replicas left per item, why they are left (``gpus`` or ``budget``)
Placed = Tuple[Fleet, Dict[int, int], Dict[int, str]]
