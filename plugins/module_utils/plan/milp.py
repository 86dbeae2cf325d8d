# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exact planner (MILP, scipy.optimize.milp / HiGHS) and the LP lower bound.

Formulation, per GPU model ``t`` of the fleet (GPUs of one model are interchangeable, nodes of one shape and
current layout are aggregated into node types):

* ``x[t,L]`` GPUs with MIG layout ``L`` (every maximal catalog-valid, placeable layout over the profiles the
  demand asks for on ``t``, plus the current layouts); ``y[t,q]`` GPUs with time-sliced pattern ``q`` (every
  maximal multiset of (memory, compute) classes that fits one GPU); ``m[t,R]`` GPUs in MPS with ``R`` clients;
  ``e[t]`` whole GPUs;
* ``w[i,t]`` replicas of item ``i`` served on ``t``; per profile / class / client count the replicas are at most
  the slots the chosen GPUs offer; ``u[i]`` unplaced replicas (penalised far above any GPU price, more for a
  higher priority);
* ``z[k,c]`` nodes of type ``k`` serving class ``c`` (mig, ts, mps:R) - one class per node - and the GPUs of each
  class are at most those of its nodes;
* churn: ``kept[t,L]`` <= both ``x[t,L]`` and the GPUs whose current layout is ``L``; the GPUs whose layout
  changes, ``sum(used) - sum(kept) - GPUs without a known layout``, are at most ``disruption_budget`` and cost a
  little in the objective.

The objective is cost per hour (``min_cost``) or GPUs (``min_gpus``). The LP bound drops integrality, node
classes and churn, serves exactly the replicas the plan placed, and replaces time-sliced patterns by the memory
and compute capacity of the GPUs (a relaxation, so the bound stays valid). scipy and numpy are imported lazily.
"""

from __future__ import annotations

from collections import OrderedDict

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import packing
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.demand import WHOLE
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.fleet import Fleet

TS_PATTERN_LIMIT = 1000
# A changed GPU layout costs this share of the dearest GPU's hourly price in the objective: the exact plan changes a
# layout only where that saves at least as much (a re-plan keeps the fleet as it is where it can).
CHURN_WEIGHT = 0.25


def available():
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

    def var(self, name, cost=0.0, lo=0.0, hi=None, integer=True):
        self.names.append(name)
        self.lo.append(lo)
        self.hi.append(float("inf") if hi is None else hi)
        self.cost.append(cost)
        self.integer.append(1 if integer else 0)
        return len(self.names) - 1

    def row(self, coefs, lo=None, hi=None):
        self.rows.append((dict(coefs), -float("inf") if lo is None else lo, float("inf") if hi is None else hi))

    def solve(self, time_limit=None, relax=False):
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
        opts = {"disp": False}
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


def _formulate(nodes, items, options, prices, objective, budget, placed=None, bound=False):
    """Build the model; returns (model, index maps)."""
    mdl = _Model()
    models = OrderedDict()
    for n in nodes:
        for m in n.models:
            models.setdefault(m.key, m)
    gpu_count = dict((k, sum(1 for n in nodes for m in n.models if m.key == k)) for k in models)
    max_price = max([prices.get(k) or 1.0 for k in models] + [1.0])
    penalty = 1000.0 * max_price * 8
    by_model_items = dict((k, [it for it in items if k in options[it.index]]) for k in models)
    used = OrderedDict((k, {}) for k in models)  # per model: {var: gpus per unit} of GPU-using vars
    classes_of = OrderedDict((k, {}) for k in models)  # model -> {class: {var: 1}}
    info = {"x": {}, "y": {}, "m": {}, "e": {}, "w": {}, "z": {}, "u": {}, "ts_truncated": False}

    def gpu_cost(key):
        if objective == "min_gpus":
            return 1.0 + 1e-4 * (prices.get(key) or 0.0)
        return (prices.get(key) or 0.0) + 1e-4

    for key, model in models.items():
        its = by_model_items[key]
        mig_items = [it for it in its if options[it.index][key].mode == opt.MIG]
        ts_items = [it for it in its if options[it.index][key].mode == opt.TIME_SLICING]
        mps_items = [it for it in its if options[it.index][key].mode == opt.MPS]
        ex_items = [it for it in its if options[it.index][key].mode == opt.EXCLUSIVE]
        for it in its:
            info["w"][(it.index, key)] = mdl.var(("w", it.index, key), 0.0, integer=not bound)
        if mig_items:
            profs = sorted(set(options[it.index][key].profile for it in mig_items))
            layouts = packing.enumerate_layouts(model, profs)
            if not bound:
                for n in nodes:
                    for gi, m in enumerate(n.models):
                        lay = n.current[gi]
                        if m.key == key and lay and lay != WHOLE and lay not in layouts:
                            layouts.append(lay)
            for lay in layouts:
                j = mdl.var(("x", key, lay), gpu_cost(key), integer=not bound)
                info["x"][(key, lay)] = j
                used[key][j] = 1
                classes_of[key].setdefault("mig", {})[j] = 1
            for prof in profs:
                coefs = dict((info["w"][(it.index, key)], 1.0) for it in mig_items
                             if options[it.index][key].profile == prof)
                for lay in layouts:
                    cnt = dict(lay).get(prof, 0)
                    if cnt:
                        coefs[info["x"][(key, lay)]] = -float(cnt)
                mdl.row(coefs, hi=0.0)
        if ts_items:
            cap = float(opt.capacity_gb(model))
            if bound:
                j = mdl.var(("y", key, "cap"), gpu_cost(key), integer=False)
                info["y"][(key, "cap")] = j
                used[key][j] = 1
                mem_row = dict((info["w"][(it.index, key)], options[it.index][key].memory_gb) for it in ts_items)
                mem_row[j] = -cap
                mdl.row(mem_row, hi=0.0)
                comp_row = dict((info["w"][(it.index, key)], options[it.index][key].compute) for it in ts_items)
                comp_row[j] = -1.0
                mdl.row(comp_row, hi=0.0)
            else:
                classes = sorted(set((options[it.index][key].memory_gb, options[it.index][key].compute)
                                     for it in ts_items))
                pats, truncated = _ts_patterns(cap, classes)
                info["ts_truncated"] = info["ts_truncated"] or truncated
                if truncated:
                    # every class can still be served: its own full GPU, and the greedy packing of the whole demand
                    need = {}
                    for it in ts_items:
                        cls = (options[it.index][key].memory_gb, options[it.index][key].compute)
                        need[cls] = need.get(cls, 0) + it.replicas
                    extra = [((cls, int(min((cap + 1e-9) // cls[0], (1 + 1e-9) // cls[1]))),) for cls in classes]
                    extra += [pat for pat, dummy in packing.pack_shared(cap, need)]
                    pats = pats + [pat for pat in extra if pat not in set(pats)]
                for pat in pats:
                    j = mdl.var(("y", key, pat), gpu_cost(key))
                    info["y"][(key, pat)] = j
                    used[key][j] = 1
                    classes_of[key].setdefault("ts", {})[j] = 1
                for cls in classes:
                    coefs = dict((info["w"][(it.index, key)], 1.0) for it in ts_items
                                 if (options[it.index][key].memory_gb, options[it.index][key].compute) == cls)
                    for pat in pats:
                        cnt = dict(pat).get(cls, 0)
                        if cnt:
                            coefs[info["y"][(key, pat)]] = -float(cnt)
                    mdl.row(coefs, hi=0.0)
        for r in sorted(set(options[it.index][key].mps_replicas for it in mps_items)):
            j = mdl.var(("m", key, r), gpu_cost(key), integer=not bound)
            info["m"][(key, r)] = j
            used[key][j] = 1
            classes_of[key].setdefault("mps:%d" % r, {})[j] = 1
            coefs = dict((info["w"][(it.index, key)], 1.0) for it in mps_items if options[it.index][key].mps_replicas == r)
            coefs[j] = -float(r)
            mdl.row(coefs, hi=0.0)
        if ex_items:
            j = mdl.var(("e", key), gpu_cost(key), integer=not bound)
            info["e"][key] = j
            used[key][j] = 1
            classes_of[key].setdefault("mig", {})[j] = 1
            coefs = dict((info["w"][(it.index, key)], float(options[it.index][key].gpus)) for it in ex_items)
            coefs[j] = -1.0
            mdl.row(coefs, hi=0.0)
        mdl.row(dict(used[key]), hi=float(gpu_count[key]))
    prios = sorted(set(it.priority for it in items))
    for it in items:
        coefs = dict((info["w"][(it.index, key)], 1.0) for key in options[it.index])
        if placed is not None:
            if coefs:
                mdl.row(coefs, lo=float(placed.get(it.index, 0)), hi=float(placed.get(it.index, 0)))
            continue
        weight = penalty * (1.0 + prios.index(it.priority) / float(len(prios)))
        u = mdl.var(("u", it.index), weight, integer=False, hi=float(it.replicas))
        info["u"][it.index] = u
        coefs[u] = 1.0
        mdl.row(coefs, lo=float(it.replicas), hi=float(it.replicas))
    if bound:
        return mdl, info, models
    # node classes
    all_classes = sorted(set(c for key in models for c in classes_of[key]))
    if len(all_classes) > 1:
        types = OrderedDict()
        for ni, n in enumerate(nodes):
            types.setdefault((tuple(m.key for m in n.models), n.current), []).append(ni)
        for members in types.values():  # a node opened for another class changes: idle nodes first
            members.sort(key=lambda ni: (nodes[ni].busy > 0, ni))
        info["types"] = types
        for tk, members in types.items():
            zs = {}
            for c in all_classes:
                zs[c] = mdl.var(("z", tk, c), 0.0, hi=float(len(members)))
                info["z"][(tk, c)] = zs[c]
            mdl.row(dict((j, 1.0) for j in zs.values()), hi=float(len(members)))
        for key in models:
            for c, vars_c in classes_of[key].items():
                coefs = dict((j, 1.0) for j in vars_c)
                for tk in types:
                    cnt = sum(1 for k in tk[0] if k == key)
                    if cnt:
                        coefs[info["z"][(tk, c)]] = -float(cnt)
                mdl.row(coefs, hi=0.0)
    # churn
    churn = []
    for key, model in models.items():
        cur = {}
        unknown = 0
        for n in nodes:
            for gi, m in enumerate(n.models):
                if m.key != key:
                    continue
                if n.current[gi] is None or not model.profiles:
                    unknown += 1
                else:
                    cur[n.current[gi]] = cur.get(n.current[gi], 0) + 1
        if not cur:
            continue
        kept = {}
        for lay, cnt in cur.items():
            k = mdl.var(("kept", key, lay), 0.0, hi=float(cnt), integer=False)
            kept[lay] = k
            if lay == WHOLE:
                vars_whole = [j for name, j in [(mdl.names[j], j) for j in used[key]] if name[0] != "x"]
                mdl.row(dict([(k, 1.0)] + [(j, -1.0) for j in vars_whole]), hi=0.0)
            elif (key, lay) in info["x"]:
                mdl.row({k: 1.0, info["x"][(key, lay)]: -1.0}, hi=0.0)
            else:
                mdl.row({k: 1.0}, hi=0.0)
        ch = mdl.var(("changed", key), CHURN_WEIGHT * max_price, integer=False)
        coefs = dict((j, -1.0) for j in used[key])
        coefs.update(dict((k, 1.0) for k in kept.values()))
        coefs[ch] = 1.0
        mdl.row(coefs, lo=-float(unknown))
        churn.append(ch)
    if budget is not None and churn:
        mdl.row(dict((j, 1.0) for j in churn), hi=float(budget))
    return mdl, info, models


def lp_bound(nodes, items, options, prices, placed):
    """``(GPUs, cost per hour)``: the LP relaxation's minimum to serve exactly the ``placed`` replicas."""
    out = []
    for objective in ("min_gpus", "min_cost"):
        mdl, info, models = _formulate(nodes, items, options, prices, objective, None, placed=placed, bound=True)
        res = mdl.solve(relax=True)
        if res.x is None:
            raise GpuOpsError("the LP bound has no solution: %s" % res.message)
        if objective == "min_gpus":
            gpus = sum(res.x[j] for j, name in enumerate(mdl.names) if name[0] in ("x", "y", "m", "e"))
            out.append(int(-(-round(gpus, 6) // 1)))
        else:
            cost = sum(res.x[j] * (prices.get(name[1]) or 0.0) for j, name in enumerate(mdl.names)
                       if name[0] in ("x", "y", "m", "e"))
            out.append(cost)
    return out[0], out[1]


def solve(nodes, items, options, prices, objective="min_cost", budget=None, time_limit=60.0):
    """The exact plan: ``(fleet, resid, why, status)``."""
    mdl, info, models = _formulate(nodes, items, options, prices, objective, budget)
    res = mdl.solve(time_limit=time_limit)
    if res.x is None:
        raise GpuOpsError("the exact solver found no solution within time_limit_s=%s (%s); use solver heuristic or a "
                          "longer time_limit_s" % (time_limit, res.message))
    status = "optimal" if res.status == 0 else "time_limit"
    if info["ts_truncated"]:
        status += " (time-slicing patterns truncated at %d)" % TS_PATTERN_LIMIT
    val = [int(round(v)) for v in res.x]
    fleet, resid, why = materialize(val, info, models, nodes, items, options, budget)
    return fleet, resid, why, status


def lp_round(nodes, items, options, prices, objective="min_cost", budget=None):
    """The LP relaxation of the exact formulation, rounded down: ``(fleet, resid, why)``.

    Every pattern, class and replica count of the LP solution is rounded down and placed; what that leaves
    (a few GPUs' worth at most per pattern in use) is for the greedy heuristic to place on the GPUs still free.
    """
    mdl, info, models = _formulate(nodes, items, options, prices, objective, budget)
    res = mdl.solve(relax=True)
    if res.x is None:
        raise GpuOpsError("the LP relaxation has no solution: %s" % res.message)
    val = [int(v + 1e-6) for v in res.x]
    # replicas of an item: at most what the rounded patterns can hold is placed, the rest stays for the heuristic
    return materialize(val, info, models, nodes, items, options, budget)


def materialize(val, info, models, nodes, items, options, budget=None):
    """Uses (GPU plans) from a solution's integer values, placed on the fleet: ``(fleet, resid, why)``."""
    fleet = Fleet(nodes, budget)
    if info.get("types"):
        taken = {}
        for (tk, c), j in sorted(info["z"].items(), key=lambda kv: (kv[0][1] != "mig", kv[0][1])):
            if c == "mig":
                continue  # mig nodes open as their GPUs are placed, where the current layouts match
            members = info["types"][tk]
            start = taken.get(tk, 0)
            for ni in members[start:start + val[j]]:
                fleet.open_node(ni, c)
            taken[tk] = start + val[j]
    resid = dict((it.index, it.replicas) for it in items)
    uses = []
    group = 0
    by_index = dict((it.index, it) for it in items)
    for key, model in models.items():
        queues = {}
        for (i, k), j in info["w"].items():
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
        for (k, lay), j in info["x"].items():
            if k != key:
                continue
            uses.extend(packing.packed_use(key, lay, lambda prof: queues.get(("mig", prof), []), True)
                        for dummy in range(val[j]))
        for (k, pat), j in info["y"].items():
            if k != key:
                continue
            uses.extend(packing.packed_use(key, pat, lambda cls: queues.get(("ts", cls), []), False)
                        for dummy in range(val[j]))
        for (k, r), j in info["m"].items():
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
