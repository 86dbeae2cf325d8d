# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Static MIG layouts sized by concurrent demand, for the replay with departures: ``sharing: planned`` without
a ``plan`` and ``sharing: hindsight``.

* **Classes.** A GPU pod's class is what it asks for on a GPU shaped like ``mig_shape`` (mig.py's rule):
  the smallest MIG profile that holds its share, or ``n`` whole GPUs.
* **Concurrent demand.** For each class, the number of pods of that class that exist at each instant of the
  replay's window (from the first arrival to the trace's end), from the replayed arrival sequence's own
  ``creation_time`` and ``deletion_time`` - what the workload asks for, whether or not the cluster can hold
  it. Its *time-weighted* percentile q is the smallest count that the class's demand is at or under for at
  least q % of the window.
* **planned** (no ``plan`` given): one typed call of the collection's planner (``plan.solver.plan`` on a
  ``plan.api.PlanRequest``: heuristic solver, ``objective: min_gpus``; the layouts read from
  ``PlanResult.layouts``) with, per class, the ``planned_percentile`` (default 95) of its
  concurrent demand as replicas (a MIG class: an inference item of the profile's memory and compute, strict
  isolation; ``n`` whole GPUs: a training item of ``n`` GPUs per replica), on the replay's GPU nodes (each
  shaped like ``mig_shape`` unless its own model can do MIG). GPUs the plan does not use keep MIG disabled
  (whole GPUs). The demand is in-sample: the percentile is taken over the window that is then replayed.
* **hindsight**: the same with each class's *peak* (percentile 100) - the layout a planner would choose
  knowing the whole window's demand in advance, sized so that no class ever runs short as long as the
  cluster holds the peaks. It is hindsight because no operator knows the peak before the window; it is the
  strongest *static* layout this planner makes for the window, not a proven optimum over all layouts.

Pure Python; controller side only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple, TypeVar

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.where import Where
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import api as plan_api
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import solver
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig

if TYPE_CHECKING:
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.data import Node

MILLI = 1000
WHOLE = whatif_mig.WHOLE

# A GPU pod's class: ("whole", GPUs per pod) or ("mig", unit kind index).
PodClass = Tuple[str, int]
K = TypeVar("K", bound=Hashable)


def pod_class(pod: Any, shape: gpu_catalog.GpuModel, table: whatif_mig.UnitTable,
              kinds: Sequence[int]) -> Optional[PodClass]:
    """``("whole", n)``, ``("mig", kind index)`` or None (a CPU pod)."""
    if not pod.num_gpu:
        return None
    if pod.num_gpu > 1 or pod.gpu_milli >= MILLI:
        return ("whole", pod.num_gpu)
    q = whatif_mig.request_kind(table, kinds, pod.gpu_milli)
    return ("whole", 1) if q == WHOLE else ("mig", q)


def concurrent_segments(seq: Sequence[Any], end: float, classify: Callable[[Any], Optional[K]]
                        ) -> Dict[K, Dict[int, float]]:
    """Per class: ``{count: seconds}`` of the window [first creation, ``end``] at that concurrent count."""
    if not seq:
        return {}
    start = min(float(p.creation_time) for p in seq)
    events: Dict[K, List[Tuple[float, int]]] = {}
    for p in seq:
        c = classify(p)
        if c is None:
            continue
        a = float(p.creation_time)
        b = end if p.deletion_time is None else min(float(p.deletion_time), end)
        if b <= a:
            continue
        ev = events.setdefault(c, [])
        ev.append((a, 1))
        ev.append((b, -1))
    out: Dict[K, Dict[int, float]] = {}
    for c, ev in events.items():
        ev.sort()
        seg: Dict[int, float] = {}
        count, last = 0, start
        for t, d in ev:
            if t > last:
                seg[count] = seg.get(count, 0.0) + (t - last)
                last = t
            count += d
        if end > last:
            seg[count] = seg.get(count, 0.0) + (end - last)
        out[c] = seg
    return out


def time_percentile(seg: Dict[int, float], q: float) -> int:
    """Smallest count whose cumulative share of the time is at least ``q`` % (``seg``: {count: seconds})."""
    total = sum(seg.values())
    if total <= 0:
        return 0
    acc = 0.0
    for count in sorted(seg):
        acc += seg[count]
        if acc >= total * q / 100.0 - 1e-9:
            return count
    return max(seg)


def demand_items(counts: Dict[PodClass, int], shape: gpu_catalog.GpuModel, table: whatif_mig.UnitTable
                 ) -> List[Dict[str, Any]]:
    """gpu_plan demand items for ``{class: replicas}``."""
    items: List[Dict[str, Any]] = []
    for c in sorted(counts, key=lambda x: (x[0], x[1])):
        n = int(counts[c])
        if n <= 0:
            continue
        if c[0] == "whole":
            item: Dict[str, Any] = {"tenant": "whatif", "name": "whole-%d" % c[1], "replicas": n,
                                    "memory_gb": opt.capacity_gb(shape), "kind": "training", "isolation": "strict"}
            if c[1] > 1:
                item["gpus_per_replica"] = c[1]
            items.append(item)
        else:
            k = table.kinds[c[1]]
            prof = [pr for pr in shape.profiles if pr.name == k.profile][0]
            items.append({"tenant": "whatif", "name": "mig-%s" % k.profile.replace(".", "-"), "replicas": n,
                          "memory_gb": opt.profile_gb(prof), "compute": k.compute_frac, "kind": "inference",
                          "isolation": "strict"})
    return items


def class_demand(seq: Sequence[Any], end: float, q: float, mig_shape: str
                 ) -> Tuple[Dict[PodClass, int], whatif_mig.UnitTable, gpu_catalog.GpuModel]:
    """``({class: replicas}, table, shape)``: the ``q``-th time-weighted percentile of each class's demand."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned

    shape = whatif_mig.shape_of(None, mig_shape)
    table = whatif_mig.UnitTable()
    kinds = sorted(replanned.usable_kinds(table, shape))
    segs = concurrent_segments(seq, end, lambda p: pod_class(p, shape, table, kinds))
    return dict((c, time_percentile(s, q)) for c, s in segs.items()), table, shape


def _plan(nodes: Sequence[Node], items: List[Dict[str, Any]], mig_shape: str) -> plan_api.PlanResult:
    """One typed planner call (``plan.api.PlanRequest``: heuristic, min_gpus, no LP bound) on the GPU nodes, each
    GPU shaped like ``mig_shape`` unless its own model can do MIG."""
    typed_nodes = [plan_api.Node(n.name, (whatif_mig.shape_of(n.model, mig_shape),) * n.gpus) for n in nodes if n.gpus]
    typed_items = [plan_api.Item(i, it["tenant"], it["name"], int(it["replicas"]), float(it["memory_gb"]),
                                 None if it.get("compute") is None else float(it["compute"]), it["kind"],
                                 it["isolation"], gpus_per_replica=int(it.get("gpus_per_replica", 1)))
                   for i, it in enumerate(items)]
    request = plan_api.PlanRequest(typed_nodes, typed_items, plan_api.PlanOptions(
        objective="min_gpus", solver="heuristic", bound=False, lp_rounding=False))
    return solver.plan(request)


def _result_layouts(nodes: Sequence[Node], result: plan_api.PlanResult, mig_shape: str,
                    table: Optional[whatif_mig.UnitTable]) -> Tuple[whatif_mig.UnitTable, whatif_mig.Layouts]:
    """``(table, per-node unit lists)`` from ``result.layouts``; a GPU the plan leaves alone (layout None) and a
    node the plan does not name keep a whole GPU."""
    table = table or whatif_mig.UnitTable()
    if not any(lay is not None for lays in result.layouts.values() for lay in lays):
        return whatif_mig.exclusive_layouts(nodes, table)
    where = Where("plan", path="plan.layouts")
    cache: Dict[Any, List[int]] = {}

    def gpu_units(n: Node) -> Optional[List[List[int]]]:
        lays = result.layouts.get(n.name)
        if lays is None or all(lay is None for lay in lays):
            return None
        shape = whatif_mig.shape_of(n.model, mig_shape)
        return [whatif_mig.units_of_gpu(None if lay is None or lay == plan_api.WHOLE else dict(lay), shape, table,
                                        where, cache) for lay in lays]

    return table, whatif_mig._node_layouts(nodes, gpu_units)


def plan_layouts(nodes: Sequence[Node], seq: Sequence[Any], end: float, q: float, mig_shape: str,
                 table: Optional[whatif_mig.UnitTable] = None
                 ) -> Tuple[whatif_mig.UnitTable, whatif_mig.Layouts, Dict[str, Any]]:
    """``(table, layouts, plan)`` for ``planned`` (``q`` = planned_percentile) and ``hindsight`` (``q`` = 100)."""
    counts, dummy_t, shape = class_demand(seq, end, q, mig_shape)
    items = demand_items(counts, shape, dummy_t)
    if not items:
        table, layouts = whatif_mig.exclusive_layouts(nodes, table)
    else:
        try:
            result = _plan(nodes, items, mig_shape)
        except GpuOpsError as err:
            raise GpuOpsError("planned by concurrent demand: the planner refused the demand %s: %s"
                              % (dict((str(c), n) for c, n in counts.items()), err.msg)) from err
        table, layouts = _result_layouts(nodes, result, mig_shape, table)
    names = dict((c, "whole-%d" % c[1] if c[0] == "whole" else dummy_t.kinds[c[1]].profile) for c in counts)
    return table, layouts, {"percentile": q, "demand": dict((names[c], n) for c, n in counts.items())}
