# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``sharing: replanned`` with ``replan_scope: node``: MIG layouts changed a node at a time, as mig-parted (the
GPU operator's mig-manager) applies them, beside replanned.py's per-GPU mode (``replan_scope: gpu``, what DRA
dynamic MIG allows: one empty GPU changes while the node's other GPUs run pods).

* A re-plan hands the planner *whole nodes*: every GPU of the chosen nodes that is not being reconfigured or
  drained, busy or not, each with its installed layout as ``current``, and as demand the deficit plus the
  units the running pods of those GPUs hold (so that the planner's churn rule keeps what runs). The nodes
  are taken in the order of their GPUs in replanned.py's surplus ranking.
* The GPUs of a node whose layout changes are reconfigured together (one mig-parted apply per node); a node
  whose changes do not fit in the budget left is skipped. mig-parted cannot change a GPU that runs a
  process, and mig-manager does not evict pods, so the GPUs that change are drained first
  (``replan_drain``):

  * ``requeue``: the pods on those GPUs are evicted at once and go back to the pending queue, keeping their
    ``deletion_time`` (as preemption victims do); the GPUs are reconfigured at once;
  * ``wait``: those GPUs are cordoned (their free units are withheld, so no new pod lands on them) and the
    change waits until the last pod on them has left (NVIDIA's procedure: cordon, wait for the GPU jobs to
    finish, apply); then they are reconfigured.

  A reconfigured GPU is unavailable for ``reconfigure_s``, as in per-GPU mode. Reported: ``drain_evictions``
  (pods evicted by requeue) and ``drain_wait_s`` (seconds from the decision to the start of the change,
  summed over the nodes that waited).

Pure Python over the engine's numpy arrays; controller side only.
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import api as plan_api
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned

try:
    import numpy as np
except ImportError:  # pragma: no cover - engine.need_numpy reports it
    np = None  # type: ignore[assignment]

# A node's change: (node, gpu, new units).
Change = Tuple[int, int, List[int]]


class _LayoutView(object):
    """The engine as the planner problem sees it in node scope: ``gpu_units`` is a GPU's installed layout."""

    def __init__(self, engine: Any) -> None:
        self._e = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._e, name)

    def gpu_units(self, node: int, gi: int) -> List[int]:
        """The units installed on one GPU, free or in use (``[]`` while it is being reconfigured)."""
        e = self._e
        if e.reconf[node, gi]:
            return []
        return sorted(e.installed.get((node, gi), e.layouts0[node][gi]))


class NodeReplanner(replanned.Replanner):
    """Re-plans a node at a time; ``drain``: ``requeue`` or ``wait``."""

    def __init__(self, engine: Any, cluster: Any, table: whatif_mig.UnitTable, shapes: List[gpu_catalog.GpuModel],
                 every_h: float = 6.0, min_interval_h: float = 0.5, budget: int = 1, reconfigure_s: float = 120.0,
                 drain: str = "requeue") -> None:
        replanned.Replanner.__init__(self, engine, cluster, table, shapes, every_h, min_interval_h, budget, reconfigure_s)
        self.engine = _LayoutView(engine)
        self.drain = drain
        self.waiting: Dict[int, Tuple[float, Dict[int, List[int]]]] = {}  # node -> (decided at, {gpu: units})
        self.draining = np.zeros((cluster.n, cluster.g), dtype=bool)
        self.drain_evictions = 0
        self.drain_wait_s = 0.0
        self._cands: List[Tuple[int, int]] = []

    # ------------------------------------------------------------------ the problem
    def _open_mask(self) -> Any:
        c = self.cluster
        e = self.engine._e
        return (np.arange(c.g)[None, :] < c.ngpu[:, None]) & ~e.reconf & ~self.draining

    def _candidates(self, m: int, empty: Any, free: Any, need: Any, want: int) -> List[Tuple[int, int]]:
        gpus = replanned.Replanner._candidates(self, m, empty, free, need, max(want, 1) * 8)
        out: List[Tuple[int, int]] = []
        seen: Set[int] = set()
        for node, dummy_gi in gpus:
            if node in seen:
                continue
            seen.add(node)
            out.extend((node, int(gi)) for gi in np.flatnonzero(empty[node]))
            if len(out) >= want:
                break
        self._cands = out
        return out

    def _items(self, m: int, deficit: Dict[int, int], multi: Dict[int, int]) -> List[plan_api.Item]:
        held = dict(deficit)
        cands = set(self._cands)
        for k, (node, gpus, dummy_got) in self.dr.where.items():
            q, per_unit = gpus
            if q is None:
                continue
            for gi in per_unit:
                if (node, gi) in cands:
                    held[q] = held.get(q, 0) + 1
        return replanned.Replanner._items(self, m, held, multi)

    # ------------------------------------------------------------------ applying a node's changes
    def _apply(self, t: float, changes: List[Change], budget_left: int, empty: Any) -> Tuple[List[Change], bool]:
        by_node: Dict[int, Dict[int, List[int]]] = {}
        for node, gi, units in changes:
            by_node.setdefault(node, {})[gi] = units
        applied: List[Change] = []
        now = False
        for node, gis in by_node.items():
            if len(applied) + len(gis) > budget_left:
                continue
            applied.extend((node, gi, units) for gi, units in gis.items())
            for gi in gis:
                empty[node, gi] = False
            busy = [gi for gi in gis if not self.engine._e.gpu_empty(node, gi)]
            if busy and self.drain == "requeue":
                self._evict(node, gis, t)
                busy = []
            if busy:
                self.waiting[node] = (t, gis)
                for gi in gis:
                    self.draining[node, gi] = True
                self._withhold(node, gis)
                continue
            for gi, units in gis.items():
                now = self._start(t, node, gi, units) or now
        return applied, now

    def _evict(self, node: int, gis: Dict[int, List[int]], t: float) -> None:
        dr = self.dr
        victims = [k for k, (n, gpus, dummy) in dr.where.items()
                   if n == node and gpus[0] is not None and any(gi in gis for gi in gpus[1])]
        for k in victims:
            dr.evict(k, t)
            self.drain_evictions += 1
        dr.flush()

    def _withhold(self, node: int, gis: Dict[int, List[int]]) -> None:
        """Cordon GPUs: their free units are taken away (a pod leaving gives its units back: see :meth:`left`)."""
        e = self.engine._e
        for gi in gis:
            counts = e.fc[node, gi].copy()
            if counts.any():
                e.fc[node, gi] = 0
                e.nf[node] -= counts
        e.version[node] += 1
        e.frag.update(node, e.nf[node], e.total_left[node], e.cpu_left[node])

    # ------------------------------------------------------------------ hook of DepartureReplay
    def left(self, node: int, t: float) -> None:
        """A pod left ``node``: a node waiting for its GPUs starts its change once they are all empty."""
        entry = self.waiting.get(node)
        if entry is None:
            return
        since, gis = entry
        self._withhold(node, gis)
        e = self.engine._e
        if any(not e.gpu_empty(node, gi) for gi in gis):
            return
        del self.waiting[node]
        self.drain_wait_s += t - since
        for gi, units in gis.items():
            self.draining[node, gi] = False
            self._start(t, node, gi, units)
