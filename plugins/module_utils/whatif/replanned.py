# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``sharing: replanned``: MIG layouts re-planned by the collection's planner while the trace is replayed
with departures (departures.py).

* The cluster starts from ``plan`` (a gpu_plan result) when given, else from ``mig_config``, else with MIG
  disabled everywhere (today's whole GPUs). GPUs that cannot do MIG are shaped like ``mig_shape``, as for
  ``mig`` and ``planned``. A pod asks for the smallest profile of the shape that holds its share (every
  usable profile counts as present, since any of them may appear after a re-plan).
* A re-plan runs every ``replan_every_h`` hours, and when pods are pending, at most once per
  ``replan_min_interval_h`` (the debounce; a pending pod that meets the debounce is looked at again when it
  ends).
* Demand of a re-plan, per unit kind (MIG profile or whole GPU): the pods pending now plus the pods that
  arrived in the last ``replan_every_h`` hours (a forecast: the next window brings as many), less the free
  units and the units being installed. Pods are grouped by the GPU models they accept (``gpu_spec``; none:
  every model); only a positive deficit calls the planner. The planner is asked for the demand less only the
  units *outside* the GPUs it is given: the free units of those GPUs are in their ``current`` layouts, which the
  planner keeps where the demand fills them (subtracting them as well would count them twice: 9 slices wanted,
  2 of them free on an offered GPU, would plan 7).
* The reduced problem: one typed call of ``plan.solver.plan`` (a ``plan.api.PlanRequest``: ``solver: heuristic``,
  ``objective: min_gpus``, no LP bound; the new layouts read from ``PlanResult.layouts``) per deficit group, on
  the *empty* GPUs of one GPU model only (the group's model with the most of
  them; at most ``max(8, 2 x the GPUs the deficit needs, the budget left)`` of them, those whose layouts hold
  the most surplus units first), each with its current layout (``current``: the planner's churn rule keeps
  what the demand fills), ``disruption_budget`` the budget left. Busy GPUs are never in the problem, so a
  running pod is never evicted; at most ``replan_budget`` GPUs change per re-plan.
* A GPU whose layout changes is unavailable (no units, counted as held) for ``reconfigure_s`` seconds, then
  offers its new units and the pending pods are retried.

Pure Python over the engine's numpy arrays; controller side only.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.where import Where
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import api as plan_api
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import solver
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import departures
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig

try:
    import numpy as np
except ImportError:  # pragma: no cover - engine.need_numpy reports it
    np = None  # type: ignore[assignment]

WHOLE = whatif_mig.WHOLE
DEFAULT_BUDGET = "5%"


def budget_gpus(value: Any, total_gpus: int) -> int:
    """``replan_budget`` -> GPUs per re-plan: an integer >= 0, or ``"N%"`` of the cluster's GPUs (0 < N <= 100,
    rounded down, at least 1)."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value >= 0 and value == int(value):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("%"):
            try:
                pct = float(text[:-1])
            except ValueError:
                pct = None
            if pct is not None and 0 < pct <= 100 and math.isfinite(pct):
                return max(1, int(total_gpus * pct / 100.0))
        elif text.isdigit():
            return int(text)
    raise GpuOpsError("replan_budget must be a number of GPUs >= 0 (e.g. 300) or a percentage of the cluster's GPUs "
                      "in (0, 100] (e.g. '5%%'), not %r" % (value,), valid="integer >= 0 or 'N%' with 0 < N <= 100")


def usable_kinds(table: whatif_mig.UnitTable, shape: gpu_catalog.GpuModel) -> List[int]:
    """Unit kinds (registered in ``table``) of every profile the planner hands out on ``shape``, whole GPU first."""
    out = [WHOLE]
    for p in opt.usable_profiles(shape):
        k = table.kind(shape, p)
        if k not in out:
            out.append(k)
    return out


def layout_of(units: List[int], table: whatif_mig.UnitTable) -> Union[None, str, Dict[str, int]]:
    """A GPU's unit list -> the planner's ``current`` (``all-disabled``, ``{profile: count}``)."""
    if not units:
        return None
    if units == [WHOLE]:
        return "all-disabled"
    if WHOLE in units:
        return None
    out: Dict[str, int] = {}
    for u in units:
        out[table.kinds[u].profile] = out.get(table.kinds[u].profile, 0) + 1
    return out


class Replanner(object):
    """Re-plans for one DepartureReplay on a SliceReplay ``engine``. ``shapes``: per model index of the
    cluster, the catalog model whose MIG geometry it has."""

    def __init__(self, engine: Any, cluster: Any, table: whatif_mig.UnitTable, shapes: List[gpu_catalog.GpuModel],
                 every_h: float = 6.0, min_interval_h: float = 0.5, budget: int = 1, reconfigure_s: float = 120.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self.cluster = cluster
        self.table = table
        self.shapes = shapes
        self.every_s = float(every_h) * 3600.0
        self.min_s = float(min_interval_h) * 3600.0
        self.budget = int(budget)
        self.reconfigure_s = float(reconfigure_s)
        self.clock = clock
        self.kinds = [usable_kinds(table, s) for s in shapes]
        self.last: Optional[float] = None
        self.recent: Deque[Tuple[float, int]] = deque()
        self.inflight: Dict[int, Tuple[int, int, List[int]]] = {}
        self.next_id = 0
        self.replans = 0
        self.planner_calls = 0
        self.planner_seconds = 0.0
        self.log: List[Tuple[float, int]] = []  # (seconds, GPUs whose layout changed)
        self.dr: Any = None
        self._kind_cache: Dict[Tuple[int, int], int] = {}
        self._unit_cache: Dict[Any, Any] = {}

    # ------------------------------------------------------------------ hooks of DepartureReplay
    def attach(self, dr: Any) -> None:
        self.dr = dr

    def note_arrival(self, t: float, k: int) -> None:
        if self.engine.arrivals[k][2]:
            self.recent.append((t, k))

    def next_allowed(self, t: float) -> float:
        return t if self.last is None else max(t, self.last + self.min_s)

    def wanted(self, t: float, tick: bool, pending: Any) -> bool:
        if tick:
            return True
        return pending and (self.last is None or t >= self.last + self.min_s)

    def finish(self, cid: int) -> None:
        node, gi, units = self.inflight.pop(cid)
        self.engine.set_gpu_units(node, gi, units)

    # ------------------------------------------------------------------ demand
    def _kind(self, m, milli):
        key = (m, milli)
        q = self._kind_cache.get(key)
        if q is None:
            q = whatif_mig.request_kind(self.table, sorted(self.kinds[m]), milli)
            self._kind_cache[key] = q
        return q

    def _accepted(self, spec):
        if not spec:
            return tuple(range(len(self.cluster.models)))
        return tuple(i for i, m in enumerate(self.cluster.models) if m in spec)

    def _demand(self, t):
        """Per group of accepted models: ``{kinds: {q: units}, multi: {n: pods}}`` (pending + window)."""
        while self.recent and self.recent[0][0] <= t - self.every_s:
            self.recent.popleft()
        groups = OrderedDict()
        ks = list(self.dr.pending) + [k for dummy, k in self.recent]
        for k in ks:
            cpu, mem, num, milli, dummy_req, spec = self.engine.arrivals[k]
            if not num:
                continue
            acc = self._accepted(spec)
            if not acc:
                continue
            g = groups.setdefault(acc, {"kinds": {}, "multi": {}})
            q = self._kind(acc[0], milli)
            g["kinds"][q] = g["kinds"].get(q, 0) + num
            if num > 1 and k in self.dr.pending:
                g["multi"][num] = g["multi"].get(num, 0) + 1
        return groups

    # ------------------------------------------------------------------ one re-plan
    def replan(self, t: float) -> bool:
        """Re-plan at ``t``; returns True when a GPU got new units at once (``reconfigure_s`` 0)."""
        self.replans += 1
        self.last = t
        e, c = self.engine, self.cluster
        budget_left = self.budget
        groups = self._demand(t)
        if not groups or budget_left <= 0:
            return False
        model_of_node = c.model_idx
        free_by_model = np.zeros((len(c.models), len(self.table.kinds)), dtype=np.int64)
        for m in range(len(c.models)):
            rows = model_of_node == m
            if rows.any():
                free_by_model[m] = e.nf[rows].sum(axis=0)
        for node, gi, units in self.inflight.values():
            for u in units:
                free_by_model[model_of_node[node], u] += 1
        empty = self._open_mask()
        changed_now = False
        order = sorted(groups.items(), key=lambda kv: -sum(kv[1]["kinds"].values()))
        for acc, g in order:
            if budget_left <= 0:
                break
            free = free_by_model[list(acc)].sum(axis=0)
            deficit = dict((q, n - int(free[q])) for q, n in g["kinds"].items() if n - int(free[q]) > 0)
            if not deficit:
                continue
            per_model = [(int(empty[model_of_node == m].sum()), -m) for m in acc]
            best = max(per_model)
            if best[0] == 0:
                continue
            m = -best[1]
            changes = self._plan_model(m, deficit, g["multi"], empty, free, g["kinds"], budget_left)
            gone = dict(((node, gi), self.engine.gpu_units(node, gi)) for node, gi, dummy in changes)
            applied, now = self._apply(t, changes, budget_left, empty)
            changed_now = changed_now or now
            budget_left -= len(applied)
            for node, gi, units in applied:  # the old units leave the free count, the new ones (being installed) join
                for u in gone[(node, gi)]:
                    free_by_model[m, u] -= 1
                for u in units:
                    free_by_model[m, u] += 1
        spent = self.budget - budget_left
        if spent:
            self.log.append((t, spent))
        return changed_now

    def _open_mask(self):
        """GPUs a re-plan may change: the empty ones (replan_node.py: whole nodes)."""
        c = self.cluster
        return (~self.engine.used) & (np.arange(c.g)[None, :] < c.ngpu[:, None])

    def _apply(self, t, changes, budget_left, empty):
        """Apply the planner's ``changes`` (at most ``budget_left``, never on a busy GPU); returns the changes
        applied and whether a GPU got new units at once."""
        applied = []
        now = False
        for node, gi, units in changes:
            if len(applied) >= budget_left:
                break
            if not self.engine.gpu_empty(node, gi):
                continue  # never reconfigure a busy GPU
            now = self._start(t, node, gi, units) or now
            empty[node, gi] = False
            applied.append((node, gi, units))
        return applied, now

    def _start(self, t, node, gi, units):
        """Reconfigure one empty GPU: unavailable for ``reconfigure_s``; True when its units are there at once."""
        self.dr.reconfigured += 1
        if self.reconfigure_s > 0:
            self.engine.set_gpu_units(node, gi, None)
            cid = self.next_id
            self.next_id += 1
            self.inflight[cid] = (node, gi, units)
            self.dr.push(t + self.reconfigure_s, departures.CFG, cid)
            return False
        self.engine.set_gpu_units(node, gi, units)
        return True

    def _candidates(self, m, empty, free, need, want):
        """Empty GPUs of model ``m``, those whose units are most in surplus first, at most ``want``."""
        rows, gis = np.nonzero(empty & (self.cluster.model_idx == m)[:, None])
        if len(rows) == 0:
            return []
        surplus = np.array([1.0 if int(free[q]) > need.get(q, 0) else 0.0 for q in range(len(self.table.kinds))])
        size = np.array([k.size_milli for k in self.table.kinds])
        fc = self.engine.fc[rows, gis, :].astype(np.float64)
        tot = (fc * size).sum(axis=1)
        score = np.where(tot > 0, (fc * size * surplus).sum(axis=1) / np.maximum(tot, 1e-9), 1.0)
        order = np.lexsort((gis, rows, -score))[:want]
        return [(int(rows[i]), int(gis[i])) for i in order]

    def _items(self, m: int, deficit: Dict[int, int], multi: Dict[int, int]) -> List[plan_api.Item]:
        """The planner's demand for a deficit of model ``m``: multi-GPU and whole-GPU replicas, then one item per
        MIG profile (all strict, tenant ``whatif``)."""
        shape = self.shapes[m]
        rows: List[Tuple[str, int, float, Optional[float], str, int]] = []
        whole = deficit.get(WHOLE, 0)
        cap = float(opt.capacity_gb(shape))
        for n, count in sorted(multi.items()):
            take = min(count, whole // n)
            if take > 0:
                rows.append(("whole-%d" % n, take, cap, None, "training", n))
                whole -= take * n
        if whole > 0:
            rows.append(("whole-1", whole, cap, None, "training", 1))
        for q, d in sorted(deficit.items()):
            if q == WHOLE:
                continue
            k = self.table.kinds[q]
            prof = [p for p in shape.profiles if p.name == k.profile][0]
            rows.append(("mig-%s" % k.profile.replace(".", "-"), d, float(opt.profile_gb(prof)),
                         float(k.compute_frac), "inference", 1))
        return [plan_api.Item(i, "whatif", name, int(replicas), memory, compute, kind, "strict",
                              gpus_per_replica=int(gpr))
                for i, (name, replicas, memory, compute, kind, gpr) in enumerate(rows)]

    def _plan_model(self, m, deficit, multi, empty, free, need, budget_left):
        """``[(node, gpu, new units)]`` from one planner call on model ``m``'s empty GPUs."""
        shape = self.shapes[m]
        need_gpus = sum(d * (1.0 if q == WHOLE else self.table.kinds[q].compute_frac) for q, d in deficit.items())
        want = max(8, 2 * int(math.ceil(need_gpus)), budget_left)
        cands = self._candidates(m, empty, free, need, want)
        if not cands:
            return []
        # The demand less the units outside the problem: the candidates' own free units are in their layouts.
        inside = np.zeros(len(self.table.kinds), dtype=np.int64)
        for node, gi in cands:
            for u in self.engine.gpu_units(node, gi):
                inside[u] += 1
        outside = free - inside
        ask = dict((q, n - int(outside[q])) for q, n in need.items() if n - int(outside[q]) > 0)
        by_node = OrderedDict()
        for node, gi in cands:
            by_node.setdefault(node, []).append(gi)
        nodes = []
        index = {}
        for node, gis in by_node.items():
            name = self.cluster.names[node]
            index[name] = (node, gis)
            current = [layout_of(self.engine.gpu_units(node, gi), self.table) for gi in gis]
            nodes.append(plan_api.Node(name, (shape,) * len(gis), {},
                                       tuple(None if c is None else plan_demand.layout_key(
                                           None if c == "all-disabled" else c) for c in current)))
        items = self._items(m, ask, multi)
        if not items:
            return []
        request = plan_api.PlanRequest(nodes, items, plan_api.PlanOptions(
            objective="min_gpus", solver="heuristic", disruption_budget=budget_left, bound=False, lp_rounding=False))
        t0 = self.clock()
        try:
            result = solver.plan(request)
        except GpuOpsError as err:
            raise GpuOpsError("replanned: the planner refused the re-plan of %s GPUs: %s" % (self.cluster.models[m], err.msg),
                              **err.details) from err
        finally:
            self.planner_calls += 1
            self.planner_seconds += self.clock() - t0
        return self._changes(result, index, shape)

    def _changes(self, result: plan_api.PlanResult, index: Dict[str, Tuple[int, List[int]]],
                 shape: gpu_catalog.GpuModel) -> List[Tuple[int, int, List[int]]]:
        """``[(node, gpu, new units)]``: the GPUs whose layout in the plan (``result.layouts``) differs from now."""
        where = Where("replan", path="replan")
        out = []
        for name, layouts in result.layouts.items():
            node, gis = index[name]
            for i, gi in enumerate(gis):
                lay = layouts[i]
                if lay is None:
                    continue
                mig = None if lay == plan_api.WHOLE else dict(lay)
                units = whatif_mig.units_of_gpu(mig, shape, self.table, where, self._unit_cache)
                if sorted(units) != sorted(self.engine.gpu_units(node, gi)):
                    out.append((node, gi, list(units)))
        return out
