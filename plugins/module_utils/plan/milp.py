# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exact planner (MILP, scipy.optimize.milp / HiGHS) and the LP lower bound.

Formulation (:class:`Formulation`; docs/planning.md uses the same names), per GPU model ``t`` of the fleet (GPUs of
one model are interchangeable, nodes of one shape and current layout are aggregated into node types):

* GPU families: ``mig_gpus[t,L]`` GPUs with MIG layout ``L`` (every maximal catalog-valid, placeable layout over the
  profiles the demand asks for on ``t``, plus the current layouts); ``shared_gpus[t,q]`` GPUs time-sliced with
  pattern ``q`` (every maximal multiset of (memory, compute) classes that fits one GPU); ``mps_gpus[t,R]`` GPUs in
  MPS with ``R`` clients; ``whole_gpus[t]`` whole GPUs; at most the fleet's GPUs of ``t`` in all (``_formulate``);
* ``served[i,t]`` replicas of item ``i`` served on ``t``; per profile / class / client count they are at most the
  slots the chosen GPUs offer (``_mig_slots``, ``_shared_slots``, ``_mps_slots``, ``_whole_slots``);
  ``unplaced[i]`` the replicas left (``_demand_rows``: weighted ``UNPLACED_PENALTY`` x the dearest price x
  ``MAX_GPUS_PER_REPLICA``, more for a higher priority);
* ``node_class[k,c]`` nodes of type ``k`` serving class ``c`` (mig, ts, mps:R) - one class per node - and the GPUs of
  each class are at most those of its nodes (``_node_class_rows``);
* churn (``_churn_rows``): ``kept[t,L]`` <= both ``mig_gpus[t,L]`` and the GPUs whose current layout is ``L``;
  ``changed[t]``, the GPUs whose layout changes (``sum(used) - sum(kept) - GPUs without a known layout``), are at
  most ``disruption_budget`` and cost ``CHURN_WEIGHT`` of the dearest GPU-hour each.

The objective is cost per hour (``min_cost``) or GPUs (``min_gpus``), each GPU plus a ``TIE_BREAK``. The LP bound
drops integrality, node classes and churn, serves exactly the replicas the plan placed, and replaces time-sliced
patterns by ``shared_gpus[t,"cap"]``, the memory and compute capacity of the GPUs (a relaxation, so the bound stays
valid). scipy and numpy are imported lazily.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import packing
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.fleet import Fleet
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import WHOLE, Item, Layout, Node, Prices, fleet_models
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.fleet import Placed

TS_PATTERN_LIMIT = 1000
# A changed GPU layout costs this share of the dearest GPU's hourly price in the objective: the exact plan changes a
# layout only where that saves at least as much (a re-plan keeps the fleet as it is where it can).
CHURN_WEIGHT = 0.25


def available() -> bool:
    try:
        from scipy.optimize import milp  # noqa: F401  pylint: disable=unused-import
    except ImportError:
        return False
    return True


class _Model(object):
    """A growing LP/MILP: variables with bounds, integrality and cost; rows as {var: coef}."""

    def __init__(self):
        self.names = []
        self.lo, self.hi, self.cost, self.integer = [], [], [], []
        self.rows = []

    def var(self, name: Any, cost: float = 0.0, lo: float = 0.0, hi: Optional[float] = None,
            integer: bool = True) -> int:
        self.names.append(name)
        self.lo.append(lo)
        self.hi.append(float("inf") if hi is None else hi)
        self.cost.append(cost)
        self.integer.append(1 if integer else 0)
        return len(self.names) - 1

    def row(self, coefs: Mapping[int, float], lo: Optional[float] = None, hi: Optional[float] = None) -> None:
        self.rows.append((dict(coefs), -float("inf") if lo is None else lo, float("inf") if hi is None else hi))

    def solve(self, time_limit: Optional[float] = None, relax: bool = False) -> Any:
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_matrix
        r, c, v = [], [], []
        lo, hi = [], []
        for k, (coefs, a, b) in enumerate(self.rows):
            for j, val in coefs.items():
                r.append(k)
                c.append(j)
                v.append(val)
            lo.append(a)
            hi.append(b)
        n = len(self.names)
        cons = []
        if self.rows:
            mat = coo_matrix((v, (r, c)), shape=(len(self.rows), n)).tocsr()
            cons = [LinearConstraint(mat, np.array(lo), np.array(hi))]
        integrality = np.zeros(n) if relax else np.array(self.integer)
        opts: Dict[str, Any] = {"disp": False}
        if time_limit:
            opts["time_limit"] = float(time_limit)
        res = milp(np.array(self.cost), constraints=cons, integrality=integrality,
                   bounds=Bounds(np.array(self.lo), np.array(self.hi)), options=opts)
        return res


def _ts_patterns(cap, classes, limit=TS_PATTERN_LIMIT, max_visits=50000):
    """Maximal multisets of (memory, compute) classes on one GPU; ``(patterns, truncated)``."""
    classes = sorted(classes, key=lambda c: (-c[0], -c[1]))
    out = []
    visits = [0]

    def rec(k, pattern, mem, comp):
        visits[0] += 1
        if len(out) >= limit or visits[0] > max_visits:
            return
        if k == len(classes):
            if pattern and all(mem + c[0] > cap + 1e-9 or comp + c[1] > 1 + 1e-9 for c in classes):
                out.append(tuple(sorted(pattern.items())))
            return
        cls = classes[k]
        most = int(min((cap - mem + 1e-9) // cls[0], (1 - comp + 1e-9) // cls[1]))
        for n in range(most, -1, -1):
            if n:
                pattern[cls] = n
            elif cls in pattern:
                del pattern[cls]
            rec(k + 1, pattern, mem + n * cls[0], comp + n * cls[1])
        pattern.pop(cls, None)

    rec(0, {}, 0.0, 0.0)
    return out, len(out) >= limit or visits[0] > max_visits


# -- the objective's weights ---------------------------------------------------------------------------------
# An unplaced replica costs UNPLACED_PENALTY times the dearest GPU-hour times MAX_GPUS_PER_REPLICA (one replica takes
# at most a whole 8-GPU node): placing any replica is always worth more than every GPU it needs, so the plan
# leaves replicas unplaced only when no GPU can take them. A higher priority multiplies it by up to 2.
UNPLACED_PENALTY = 1000.0
MAX_GPUS_PER_REPLICA = 8
# A tie-break, far below any price difference: with min_gpus, of two plans with as many GPUs the cheaper wins; with
# min_cost, of two plans that cost the same (free GPUs, price 0 included) the one with fewer GPUs wins.
TIE_BREAK = 1e-4


class Formulation(object):
    """The MILP (or its LP relaxation) and its variable families, each a dict of variable indices:

    * ``mig_gpus[t, L]`` GPUs of model ``t`` with MIG layout ``L``;
    * ``shared_gpus[t, q]`` GPUs of ``t`` time-sliced with pattern ``q`` (``q == "cap"`` in the bound: the memory
      and compute capacity of the GPUs);
    * ``mps_gpus[t, R]`` GPUs of ``t`` in MPS with ``R`` clients;
    * ``whole_gpus[t]`` whole GPUs of ``t`` (exclusive, multi-GPU replicas);
    * ``served[i, t]`` replicas of item ``i`` served on ``t``;
    * ``unplaced[i]`` replicas of item ``i`` left unplaced;
    * ``node_class[k, c]`` nodes of node type ``k`` serving class ``c`` (``mig``, ``ts``, ``mps:R``);
    * ``kept[t, L]`` GPUs of ``t`` that keep their current layout ``L``; ``changed[t]`` GPUs of ``t`` whose layout
      changes.

    ``gpu_vars[t]``: every GPU-counting variable of ``t`` (the four GPU families); ``class_vars[t][c]``: those of
    class ``c``; ``node_types``: node type -> node indices (idle nodes first), when node classes are modelled.
    """

    def __init__(self, nodes: List[Node], items: List[Item], options: opt.ItemOptions, prices: Prices, objective: str,
                 bound: bool) -> None:
        self.mdl = _Model()
        self.nodes, self.items, self.options, self.prices = nodes, items, options, prices
        self.objective = objective
        self.bound = bound
        self.models = fleet_models(nodes)
        self.max_price = max([prices.get(k) or 1.0 for k in self.models] + [1.0])
        self.mig_gpus: Dict[Tuple[str, Layout], int] = {}
        self.shared_gpus: Dict[Tuple[str, Any], int] = {}
        self.mps_gpus: Dict[Tuple[str, int], int] = {}
        self.whole_gpus: Dict[str, int] = {}
        self.served: Dict[Tuple[int, str], int] = {}
        self.unplaced: Dict[int, int] = {}
        self.node_class: Dict[Tuple[Any, str], int] = {}
        self.kept: Dict[Tuple[str, Layout], int] = {}
        self.changed: Dict[str, int] = {}
        self.gpu_vars = OrderedDict((k, {}) for k in self.models)
        self.class_vars = OrderedDict((k, {}) for k in self.models)
        self.node_types = None
        self.ts_truncated = False

    def gpu_cost(self, key: str) -> float:
        """A GPU's weight in the objective: its price (min_cost) or 1 (min_gpus), plus the tie-break."""
        if self.objective == "min_gpus":
            return 1.0 + TIE_BREAK * (self.prices.get(key) or 0.0)
        return (self.prices.get(key) or 0.0) + TIE_BREAK

    def gpu_var(self, family: str, index: Any, key: str, cls: Optional[str], integer: bool = True) -> int:
        """A new GPU-counting variable of ``family`` (one of the four GPU dicts) for model ``key`` in class ``cls``
        (None: no node class, the bound's capacity variable)."""
        j = self.mdl.var((family, index), self.gpu_cost(key), integer=integer)
        getattr(self, family)[index] = j
        self.gpu_vars[key][j] = 1
        if cls is not None:
            self.class_vars[key].setdefault(cls, {})[j] = 1
        return j

    def option(self, it: Item, key: str) -> opt.Option:
        return self.options[it.index][key]

    def gpu_indices(self) -> List[int]:
        """Every GPU-counting variable, in index order."""
        return sorted(j for key in self.gpu_vars for j in self.gpu_vars[key])


def _formulate(nodes, items, options, prices, objective, budget, placed=None, bound=False):
    """The model (``bound``: the LP bound's relaxation for exactly the ``placed`` replicas) as a Formulation."""
    f = Formulation(nodes, items, options, prices, objective, bound)
    for key, model in f.models.items():
        its = [it for it in items if key in options[it.index]]
        for it in its:
            f.served[(it.index, key)] = f.mdl.var(("served", it.index, key), 0.0, integer=not bound)
        by_mode = dict((mode, [it for it in its if f.option(it, key).mode == mode]) for mode in opt.MODES)
        if by_mode[opt.MIG]:
            _mig_slots(f, key, model, by_mode[opt.MIG])
        if by_mode[opt.TIME_SLICING]:
            if bound:
                _shared_capacity(f, key, model, by_mode[opt.TIME_SLICING])
            else:
                _shared_slots(f, key, model, by_mode[opt.TIME_SLICING])
        _mps_slots(f, key, by_mode[opt.MPS])
        if by_mode[opt.EXCLUSIVE]:
            _whole_slots(f, key, by_mode[opt.EXCLUSIVE])
        f.mdl.row(dict(f.gpu_vars[key]), hi=float(sum(1 for n in nodes for m in n.models if m.key == key)))
    _demand_rows(f, placed)
    if bound:
        return f
    _node_class_rows(f)
    _churn_rows(f, budget)
    return f


def _mig_slots(f, key, model, mig_items):
    """``mig_gpus[t, L]`` over every maximal layout of the profiles asked (and the current layouts); per profile the
    replicas served are at most the instances the layouts offer."""
    profs = sorted(set(f.option(it, key).profile for it in mig_items))
    layouts = packing.enumerate_layouts(model, profs)
    if not f.bound:
        for n in f.nodes:
            for gi, m in enumerate(n.models):
                lay = n.current[gi]
                if m.key == key and lay and lay != WHOLE and lay not in layouts:
                    layouts.append(lay)
    for lay in layouts:
        f.gpu_var("mig_gpus", (key, lay), key, "mig", integer=not f.bound)
    for prof in profs:
        coefs = dict((f.served[(it.index, key)], 1.0) for it in mig_items if f.option(it, key).profile == prof)
        for lay in layouts:
            cnt = dict(lay).get(prof, 0)
            if cnt:
                coefs[f.mig_gpus[(key, lay)]] = -float(cnt)
        f.mdl.row(coefs, hi=0.0)


def _shared_capacity(f, key, model, ts_items):
    """The bound's ``shared_gpus[t, "cap"]``: time-sliced replicas' memory and compute within the GPUs' capacity."""
    cap = float(opt.capacity_gb(model))
    j = f.gpu_var("shared_gpus", (key, "cap"), key, None, integer=False)
    mem_row = dict((f.served[(it.index, key)], f.option(it, key).memory_gb) for it in ts_items)
    mem_row[j] = -cap
    f.mdl.row(mem_row, hi=0.0)
    comp_row = dict((f.served[(it.index, key)], f.option(it, key).compute) for it in ts_items)
    comp_row[j] = -1.0
    f.mdl.row(comp_row, hi=0.0)


def _shared_patterns(key, model, ts_items, options):
    """``(classes, patterns, truncated)`` of the time-sliced items of ``key``."""
    cap = float(opt.capacity_gb(model))
    classes = sorted(set((options[it.index][key].memory_gb, options[it.index][key].compute) for it in ts_items))
    pats, truncated = _ts_patterns(cap, classes)
    if truncated:
        # every class can still be served: its own full GPU, and the greedy packing of the whole demand
        need = {}
        for it in ts_items:
            cls = (options[it.index][key].memory_gb, options[it.index][key].compute)
            need[cls] = need.get(cls, 0) + it.replicas
        extra = [((cls, int(min((cap + 1e-9) // cls[0], (1 + 1e-9) // cls[1]))),) for cls in classes]
        extra += [pat for pat, dummy in packing.pack_shared(cap, need)]
        pats = pats + [pat for pat in extra if pat not in set(pats)]
    return classes, pats, truncated


def _shared_slots(f, key, model, ts_items):
    """``shared_gpus[t, q]`` per time-sliced pattern; per (memory, compute) class the replicas served are at most
    the places the patterns offer."""
    classes, pats, truncated = _shared_patterns(key, model, ts_items, f.options)
    f.ts_truncated = f.ts_truncated or truncated
    for pat in pats:
        f.gpu_var("shared_gpus", (key, pat), key, "ts")
    for cls in classes:
        coefs = dict((f.served[(it.index, key)], 1.0) for it in ts_items
                     if (f.option(it, key).memory_gb, f.option(it, key).compute) == cls)
        for pat in pats:
            cnt = dict(pat).get(cls, 0)
            if cnt:
                coefs[f.shared_gpus[(key, pat)]] = -float(cnt)
        f.mdl.row(coefs, hi=0.0)


def _mps_slots(f, key, mps_items):
    """``mps_gpus[t, R]`` per client count; the replicas served with ``R`` clients are at most ``R`` per GPU."""
    for r in sorted(set(f.option(it, key).mps_replicas for it in mps_items)):
        j = f.gpu_var("mps_gpus", (key, r), key, "mps:%d" % r, integer=not f.bound)
        coefs = dict((f.served[(it.index, key)], 1.0) for it in mps_items if f.option(it, key).mps_replicas == r)
        coefs[j] = -float(r)
        f.mdl.row(coefs, hi=0.0)


def _whole_slots(f, key, ex_items):
    """``whole_gpus[t]``: the GPUs of the replicas served whole (``gpus_per_replica`` each)."""
    j = f.gpu_var("whole_gpus", key, key, "mig", integer=not f.bound)
    coefs = dict((f.served[(it.index, key)], float(f.option(it, key).gpus)) for it in ex_items)
    coefs[j] = -1.0
    f.mdl.row(coefs, hi=0.0)


def _demand_rows(f, placed):
    """Every replica is served or ``unplaced[i]`` (weighted by UNPLACED_PENALTY and the priority); the bound serves
    exactly the ``placed`` replicas."""
    penalty = UNPLACED_PENALTY * f.max_price * MAX_GPUS_PER_REPLICA
    prios = sorted(set(it.priority for it in f.items))
    for it in f.items:
        coefs = dict((f.served[(it.index, key)], 1.0) for key in f.options[it.index])
        if placed is not None:
            if coefs:
                f.mdl.row(coefs, lo=float(placed.get(it.index, 0)), hi=float(placed.get(it.index, 0)))
            continue
        weight = penalty * (1.0 + prios.index(it.priority) / float(len(prios)))
        u = f.mdl.var(("unplaced", it.index), weight, integer=False, hi=float(it.replicas))
        f.unplaced[it.index] = u
        coefs[u] = 1.0
        f.mdl.row(coefs, lo=float(it.replicas), hi=float(it.replicas))


def _node_class_rows(f):
    """One class per node: ``node_class[k, c]`` nodes of type ``k`` (same GPUs, same current layouts) serve class
    ``c``, and the GPUs of each class are at most those of its nodes."""
    all_classes = sorted(set(c for key in f.models for c in f.class_vars[key]))
    if len(all_classes) <= 1:
        return
    types = OrderedDict()
    for ni, n in enumerate(f.nodes):
        types.setdefault((tuple(m.key for m in n.models), n.current), []).append(ni)
    for members in types.values():  # a node opened for another class changes: idle nodes first
        members.sort(key=lambda ni: (f.nodes[ni].busy > 0, ni))
    f.node_types = types
    for tk, members in types.items():
        zs = {}
        for c in all_classes:
            zs[c] = f.mdl.var(("node_class", tk, c), 0.0, hi=float(len(members)))
            f.node_class[(tk, c)] = zs[c]
        f.mdl.row(dict((j, 1.0) for j in zs.values()), hi=float(len(members)))
    for key in f.models:
        for c, vars_c in f.class_vars[key].items():
            coefs = dict((j, 1.0) for j in vars_c)
            for tk in types:
                cnt = sum(1 for k in tk[0] if k == key)
                if cnt:
                    coefs[f.node_class[(tk, c)]] = -float(cnt)
            f.mdl.row(coefs, hi=0.0)


def _current_layouts(f, key, model):
    """``({layout: GPUs of model key with it now}, GPUs of key without a known layout)``."""
    cur = {}
    unknown = 0
    for n in f.nodes:
        for gi, m in enumerate(n.models):
            if m.key != key:
                continue
            if n.current[gi] is None or not model.profiles:
                unknown += 1
            else:
                cur[n.current[gi]] = cur.get(n.current[gi], 0) + 1
    return cur, unknown


def _churn_rows(f, budget):
    """``kept[t, L]`` <= both the GPUs with layout ``L`` in the plan and those with it now; ``changed[t]`` >= the GPUs
    used less those kept less those of unknown layout, weighted CHURN_WEIGHT of the dearest GPU-hour; the changed
    GPUs of every model at most ``disruption_budget``."""
    for key, model in f.models.items():
        cur, unknown = _current_layouts(f, key, model)
        if not cur:
            continue
        kept = {}
        for lay, cnt in cur.items():
            k = f.mdl.var(("kept", key, lay), 0.0, hi=float(cnt), integer=False)
            kept[lay] = f.kept[(key, lay)] = k
            if lay == WHOLE:
                not_mig = [j for j in f.gpu_vars[key] if f.mdl.names[j][0] != "mig_gpus"]
                f.mdl.row(dict([(k, 1.0)] + [(j, -1.0) for j in not_mig]), hi=0.0)
            elif (key, lay) in f.mig_gpus:
                f.mdl.row({k: 1.0, f.mig_gpus[(key, lay)]: -1.0}, hi=0.0)
            else:
                f.mdl.row({k: 1.0}, hi=0.0)
        ch = f.mdl.var(("changed", key), CHURN_WEIGHT * f.max_price, integer=False)
        f.changed[key] = ch
        coefs = dict((j, -1.0) for j in f.gpu_vars[key])
        coefs.update(dict((k, 1.0) for k in kept.values()))
        coefs[ch] = 1.0
        f.mdl.row(coefs, lo=-float(unknown))
    if budget is not None and f.changed:
        f.mdl.row(dict((j, 1.0) for j in f.changed.values()), hi=float(budget))


def lp_bound(nodes: List[Node], items: List[Item], options: opt.ItemOptions, prices: Prices,
             placed: Dict[int, int]) -> Tuple[int, float]:
    """``(GPUs, cost per hour)``: the LP relaxation's minimum to serve exactly the ``placed`` replicas."""
    out = []
    for objective in ("min_gpus", "min_cost"):
        f = _formulate(nodes, items, options, prices, objective, None, placed=placed, bound=True)
        res = f.mdl.solve(relax=True)
        if res.x is None:
            raise GpuOpsError("the LP bound has no solution: %s" % res.message)
        model_of = dict((j, key) for key in f.gpu_vars for j in f.gpu_vars[key])
        if objective == "min_gpus":
            gpus = sum(res.x[j] for j in f.gpu_indices())
            out.append(int(-(-round(gpus, 6) // 1)))
        else:
            out.append(sum(res.x[j] * (prices.get(model_of[j]) or 0.0) for j in f.gpu_indices()))
    return out[0], out[1]


def solve(nodes: List[Node], items: List[Item], options: opt.ItemOptions, prices: Prices, objective: str = "min_cost",
          budget: Optional[int] = None, time_limit: float = 60.0) -> Tuple[Fleet, Dict[int, int], Dict[int, str], str]:
    """The exact plan: ``(fleet, resid, why, status)``."""
    f = _formulate(nodes, items, options, prices, objective, budget)
    res = f.mdl.solve(time_limit=time_limit)
    if res.x is None:
        raise GpuOpsError("the exact solver found no solution within time_limit_s=%s (%s); use solver heuristic or a "
                          "longer time_limit_s" % (time_limit, res.message))
    status = "optimal" if res.status == 0 else "time_limit"
    if f.ts_truncated:
        status += " (time-slicing patterns truncated at %d)" % TS_PATTERN_LIMIT
    val = [int(round(v)) for v in res.x]
    fleet, resid, why = materialize(val, f, budget)
    return fleet, resid, why, status


def lp_round(nodes: List[Node], items: List[Item], options: opt.ItemOptions, prices: Prices, objective: str = "min_cost",
             budget: Optional[int] = None) -> Placed:
    """The LP relaxation of the exact formulation, rounded down: ``(fleet, resid, why)``.

    Every pattern, class and replica count of the LP solution is rounded down and placed; what that leaves
    (a few GPUs' worth at most per pattern in use) is for the greedy heuristic to place on the GPUs still free.
    """
    f = _formulate(nodes, items, options, prices, objective, budget)
    res = f.mdl.solve(relax=True)
    if res.x is None:
        raise GpuOpsError("the LP relaxation has no solution: %s" % res.message)
    val = [int(v + 1e-6) for v in res.x]
    # replicas of an item: at most what the rounded patterns can hold is placed, the rest stays for the heuristic
    return materialize(val, f, budget)


def materialize(val: List[int], f: Formulation, budget: Optional[int] = None) -> Placed:
    """Uses (GPU plans) from a solution's integer values ``val`` of formulation ``f``, placed on the fleet:
    ``(fleet, resid, why)``."""
    nodes, items, options = f.nodes, f.items, f.options
    fleet = Fleet(nodes, budget)
    if f.node_types:
        taken = {}
        for (tk, c), j in sorted(f.node_class.items(), key=lambda kv: (kv[0][1] != "mig", kv[0][1])):
            if c == "mig":
                continue  # mig nodes open as their GPUs are placed, where the current layouts match
            members = f.node_types[tk]
            start = taken.get(tk, 0)
            for ni in members[start:start + val[j]]:
                fleet.open_node(ni, c)
            taken[tk] = start + val[j]
    resid = dict((it.index, it.replicas) for it in items)
    uses: List[Dict[str, Any]] = []
    group = 0
    by_index = dict((it.index, it) for it in items)
    for key in f.models:
        queues: Dict[Tuple[str, Any], List[List[int]]] = {}
        for (i, k), j in f.served.items():
            if k != key or not val[j]:
                continue
            o = options[i][key]
            if o.mode == opt.MIG:
                qk = ("mig", o.profile)
            elif o.mode == opt.TIME_SLICING:
                qk = ("ts", (o.memory_gb, o.compute))
            elif o.mode == opt.MPS:
                qk = ("mps", o.mps_replicas)
            else:
                qk = ("e", None)
            queues.setdefault(qk, []).append([i, val[j]])
        for qk in queues:
            queues[qk].sort()
        for (k, lay), j in f.mig_gpus.items():
            if k != key:
                continue
            uses.extend(packing.packed_use(key, lay, lambda prof: queues.get(("mig", prof), []), True)
                        for dummy in range(val[j]))
        for (k, pat), j in f.shared_gpus.items():
            if k != key:
                continue
            uses.extend(packing.packed_use(key, pat, lambda cls: queues.get(("ts", cls), []), False)
                        for dummy in range(val[j]))
        for (k, r), j in f.mps_gpus.items():
            if k != key:
                continue
            for dummy in range(val[j]):
                uses.append({"model": key, "cls": "mps:%d" % r, "layout": WHOLE,
                             "units": packing.take(queues.get(("mps", r), []), r, None), "group": None})
        for i, n in queues.get(("e", None), []):
            g = by_index[i].gpus_per_replica
            for dummy in range(n):
                if g > 1:
                    for part in range(g):
                        uses.append({"model": key, "cls": "mig", "layout": WHOLE, "units": [[i, None, 0 if part else 1]],
                                     "group": group})
                    group += 1
                else:
                    uses.append({"model": key, "cls": "mig", "layout": WHOLE, "units": [[i, None, 1]], "group": None})
    uses = [u for u in uses if any(x[2] for x in u["units"]) or u.get("group") is not None]
    for use in uses:
        for i, dummy, n in use["units"]:
            resid[i] -= n
    why = {}
    for use in fleet.place(uses):
        for i, dummy, n in use["units"]:
            resid[i] += n
            why[i] = use.get("why", "gpus")
    return fleet, resid, why
