# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``plan(request)``: decide per item, solve (exact MILP or the heuristic), build every output.

:func:`plan` takes a :class:`~.api.PlanRequest` (``demand.parse_request`` builds one from gpu_plan's parameters)
and returns a :class:`~.api.PlanResult`; the result is built in parts - :func:`summary`, :func:`decisions`,
:func:`unplaced`, the configs and quotas of outputs.py - from one :class:`Solved` (what the solver left).

``solver: auto`` takes the exact MILP (scipy/HiGHS) for fleets of at most :data:`EXACT_MAX_GPUS` GPUs when scipy is
there, else the heuristic; the LP relaxation (scipy) or the covering bound gives ``summary.lower_bound_gpus``.

Pure Python (scipy only inside milp.py, imported lazily), Python 3.9 compatible.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.report import diagram as slice_diagram
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import heuristic, milp, outputs, packing
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import (
    Item, Node, PlanRequest, PlanResult, Prices, fleet_models)
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.fleet import Fleet

# per item index: why each model that cannot serve it cannot
ItemReasons = Dict[int, Dict[str, str]]

EXACT_MAX_GPUS = 256


def build_options(nodes: List[Node], items: List[Item]) -> Tuple[Dict[str, Any], opt.ItemOptions, ItemReasons]:
    """``(models, options, reasons)``: the fleet's models; per item the option on each model that can serve it, and
    why each other one cannot."""
    models = fleet_models(nodes)
    options: opt.ItemOptions = {}
    reasons: ItemReasons = {}
    for it in items:
        options[it.index] = OrderedDict()
        reasons[it.index] = OrderedDict()
        for key, model in models.items():
            o, why = opt.option_for(it, model)
            if o is not None and it.resource and opt.resource_of(o) != it.resource:
                why = "its pods request %s; on %s it would get %s" % (it.resource, key, opt.resource_of(o))
                o = None
            if o is None:
                reasons[it.index][key] = why or ""
            elif o.gpus > 1 and max(sum(1 for m in n.models if m.key == key) for n in nodes) < o.gpus:
                reasons[it.index][key] = "needs %d %s GPUs on one node; the largest node has %d" % (
                    o.gpus, key, max(sum(1 for m in n.models if m.key == key) for n in nodes))
            else:
                options[it.index][key] = o
    return models, options, reasons


def covering_bound(items: List[Item], options: opt.ItemOptions, placed: Dict[int, int]) -> int:
    """GPUs at least: the compute and memory shares of the placed replicas on their cheapest models, per dimension."""
    comp = mem = 0.0
    for it in items:
        n = placed.get(it.index, 0)
        if not n or not options[it.index]:
            continue
        cs, ms = [], []
        for key, o in options[it.index].items():
            model = gpu_catalog.CATALOG[key]
            if o.mode == opt.MIG:
                p = [x for x in model.profiles if x.name == o.profile][0]
                cs.append(p.compute_slices / float(model.compute_slices))
                ms.append(p.memory_slices / float(model.memory_slices))
            elif o.mode == opt.TIME_SLICING:
                cs.append(o.compute)
                ms.append(o.memory_gb / float(opt.capacity_gb(model)))
            elif o.mode == opt.MPS:
                cs.append(o.share)
                ms.append(o.share)
            else:
                cs.append(float(o.gpus))
                ms.append(float(o.gpus))
        comp += n * min(cs)
        mem += n * min(ms)
    return int(-(-round(max(comp, mem), 6) // 1))


def _gpu_facts(fleet: Fleet, ni: int) -> List[Dict[str, Any]]:
    out = []
    node = fleet.nodes[ni]
    layouts = outputs.node_layouts(fleet, ni)
    for gi, model in enumerate(node.models):
        lay = layouts[gi]
        gpu = {"index": gi, "model": model.key, "name": model.variants[0].nvml_name,
               "mig_capable": gpu_catalog.mig_capable(model), "mig_mode_current": bool(lay), "instances": []}
        if lay:
            for k, (prof, start, size) in enumerate(packing.placements(model, lay)):
                gpu["instances"].append({"profile": prof, "placement": {"start": start, "size": size},
                                         "gpu_instance_id": k + 1, "compute_instance_id": 0})
        out.append(gpu)
    return out


def text_diagram(fleet: Fleet, limit: int = 3) -> str:
    """Slice diagrams of one node per distinct (mig config, device-plugin config), at most ``limit`` of them."""
    mig_cfg, names = outputs.mig_outputs(fleet)
    seen: Dict[Tuple[Optional[str], Optional[str]], List[int]] = OrderedDict()
    for ni, node in enumerate(fleet.nodes):
        if not any(fleet.assign.get((ni, gi)) for gi in range(len(node.models))):
            continue
        key = (names.get(ni), fleet.cls[ni])
        seen.setdefault(key, []).append(ni)
    lines = []
    for key in list(seen)[:limit]:
        ni = seen[key][0]
        count = len(seen[key])
        lines.append("%s%s (%s, %s)" % (fleet.nodes[ni].name, " and %d more like it" % (count - 1) if count > 1 else "",
                                        key[0] or "no MIG", outputs.device_plugin_name(fleet, ni)))
        lines.extend("  " + line for line in slice_diagram.render(_gpu_facts(fleet, ni)))
    return "\n".join(lines)


@dataclass
class Solved:
    """What one solve left, and what every part of the result is built from."""

    request: PlanRequest
    models: Dict[str, Any]
    options: opt.ItemOptions
    reasons: ItemReasons
    prices: Prices
    fleet: Fleet
    resid: Dict[int, int]
    why: Dict[int, str]
    solver: str
    status: str
    solve_s: float
    started: float
    by_index: Dict[int, Item] = field(init=False)
    placed: Dict[int, int] = field(init=False)

    def __post_init__(self) -> None:
        self.by_index = dict((it.index, it) for it in self.request.items)
        self.placed = dict((it.index, it.replicas - self.resid[it.index]) for it in self.request.items)

    def price(self, key: str) -> float:
        return self.prices.get(key) or 0.0


@dataclass
class Usage:
    """The GPUs a plan uses: which, how much of each is handed out, per model, per item, and what one GPU per replica
    would need."""

    used: List[Tuple[int, int]] = field(default_factory=list)
    allocation_sum: float = 0.0
    by_model: Dict[str, Dict[str, Any]] = field(default_factory=OrderedDict)
    per_item: Dict[int, Dict[Tuple[str, str, str], int]] = field(default_factory=dict)
    baseline_gpus: int = 0
    baseline_cost: float = 0.0


def plan(request: PlanRequest) -> PlanResult:
    """The plan for ``request``: decide per item, solve, build every output.

    ``solver: auto`` takes the exact MILP for fleets of at most :data:`EXACT_MAX_GPUS` GPUs when scipy is there,
    else the heuristic (after the LP relaxation rounded down when scipy is there and ``lp_rounding``). Raises
    GpuOpsError when ``objective: min_cost`` lacks a price for a model of the fleet, or ``solver: exact`` lacks
    scipy or finds no solution in time.
    """
    t0 = time.time()
    o = request.options
    nodes, items, prices = request.nodes, request.items, request.price_table()
    models, options, reasons = build_options(nodes, items)
    if o.objective == "min_cost":
        missing = sorted(k for k in models if prices.get(k) is None)
        if missing:
            raise GpuOpsError("objective min_cost needs a price for %s; give prices (USD per GPU-hour) or use "
                              "objective min_gpus" % ", ".join(missing), models_without_price=missing)
    total_gpus = sum(len(n.models) for n in nodes)
    solver = o.solver
    if solver == "auto":
        solver = "exact" if milp.available() and total_gpus <= EXACT_MAX_GPUS else "heuristic"
    status = "heuristic"
    t_solve = time.time()
    budget = o.disruption_budget
    if solver == "exact":
        if not milp.available():
            raise GpuOpsError("solver exact needs scipy (>= 1.9, HiGHS) on the controller; install it or use solver "
                              "heuristic")
        fleet, resid, why, status = milp.solve(nodes, items, options, prices, o.objective, budget, o.time_limit_s)
    elif milp.available() and o.lp_rounding:
        # the LP relaxation rounded down, then the greedy rounds for what rounding left
        start = milp.lp_round(nodes, items, options, prices, o.objective, budget)
        fleet, resid, why = heuristic.solve(nodes, items, options, prices, o.objective, budget, start=start)
        status = "lp-rounding"
    else:
        fleet, resid, why = heuristic.solve(nodes, items, options, prices, o.objective, budget)
    solved = Solved(request, models, options, reasons, prices, fleet, resid, why, solver, status,
                    time.time() - t_solve, t0)
    return build_result(solved)


def build_result(s: Solved) -> PlanResult:
    """Every output of a plan from what the solver left."""
    usage = tally(s)
    mig_cfg, names = outputs.mig_outputs(s.fleet)
    node_configs, dp_configs = outputs.node_outputs(s.fleet, names)
    return PlanResult(
        summary=summary(s, usage),
        decisions=decisions(s, usage),
        placements=outputs.placements(s.fleet, s.request.items),
        unplaced=unplaced(s),
        mig_parted_config=mig_cfg,
        node_configs=node_configs,
        device_plugin_configs=dp_configs,
        quotas=outputs.quotas(s.fleet, s.request.items),
        prices=dict((k, s.prices.get(k)) for k in s.models),
        layouts=OrderedDict((node.name, outputs.node_layouts(s.fleet, ni)) for ni, node in enumerate(s.fleet.nodes)),
        planned_gpus=planned_gpus(s.fleet, names),
    )


def tally(s: Solved) -> Usage:
    """The GPUs the plan uses, per model and per item, and the one-GPU-per-replica baseline of what it placed."""
    nodes = s.request.nodes
    u = Usage(by_model=OrderedDict((k, {"gpus": 0, "gpus_used": 0, "cost_per_hour": 0.0, "allocation_sum": 0.0})
                                   for k in s.models),
              per_item=dict((it.index, OrderedDict()) for it in s.request.items))
    for node in nodes:
        for model in node.models:
            u.by_model[model.key]["gpus"] += 1
    for (ni, gi), use in s.fleet.assign.items():
        model = nodes[ni].models[gi]
        if not any(x[2] for x in use["units"]) and use.get("group") is None:
            continue
        u.used.append((ni, gi))
        a = outputs.gpu_allocation(s.fleet, ni, gi, s.by_index)
        u.allocation_sum += a
        bm = u.by_model[model.key]
        bm["gpus_used"] += 1
        bm["allocation_sum"] += a
        bm["cost_per_hour"] += s.price(model.key)
        for i, profile, n in use["units"]:
            if not n:
                continue
            mode = outputs.mode_of_use(use, profile)
            key = (model.key, mode, outputs.resource_for_use(s.fleet, use, profile))
            u.per_item[i][key] = u.per_item[i].get(key, 0) + n
            g = s.by_index[i].gpus_per_replica if use.get("group") is not None else 1
            u.baseline_gpus += n * g
            u.baseline_cost += n * g * s.price(model.key)
    return u


def decisions(s: Solved, usage: Usage) -> List[Dict[str, Any]]:
    """Per item: the model, mode, resource and profile that serve most of its replicas (or would serve it), why,
    and its replicas per (model, mode, resource)."""
    out = []
    for it in s.request.items:
        rows = usage.per_item[it.index]
        choices = s.options[it.index]
        if rows:
            (mkey, mode, res), dummy = max(rows.items(), key=lambda kv: (kv[1], kv[0]))
            o = choices[mkey]
            reason = o.reason
        elif choices:
            mkey, o = min(choices.items(),
                          key=lambda kv: (heuristic.unit_cost(kv[1], s.prices, s.request.options.objective), kv[0]))
            mode, res, reason = o.mode, opt.resource_of(o), o.reason
        else:
            mkey, mode, res, reason, o = None, None, None, "no GPU model of the fleet can serve it", None
        out.append({"tenant": it.tenant, "name": it.name, "kind": it.kind, "isolation": it.isolation,
                    "replicas": it.replicas, "placed": s.placed[it.index], "mode": mode, "resource": res,
                    "model": mkey, "profile": o.profile if o is not None else None, "reason": reason,
                    "by_model": [{"model": k[0], "mode": k[1], "resource": k[2], "replicas": n}
                                 for k, n in rows.items()]})
    return out


def unplaced(s: Solved) -> List[Dict[str, Any]]:
    """The replicas the plan could not place, per item, with the reason."""
    return [{"tenant": it.tenant, "name": it.name, "replicas": s.resid[it.index], "reason": unplaced_reason(s, it)}
            for it in s.request.items if s.resid[it.index] > 0]


def unplaced_reason(s: Solved, it: Item) -> str:
    """Why replicas of ``it`` are left: no model can serve it, the disruption budget, or every GPU taken."""
    if not s.options[it.index]:
        reasons = s.reasons[it.index]
        mem = [r for r in reasons.values() if r.startswith("needs %g GB" % it.memory_gb)]
        if mem and len(mem) == len(reasons):
            largest = max(s.models.values(), key=opt.capacity_gb)
            return "needs %g GB on one device; the largest device in the fleet (%s) has %d GB" % (
                it.memory_gb, largest.key, opt.capacity_gb(largest))
        return "; ".join("%s: %s" % kv for kv in reasons.items())
    if s.why.get(it.index) == "budget":
        return ("disruption_budget %s reached: serving these replicas would reconfigure more GPUs"
                % s.request.options.disruption_budget)
    free = ", ".join("%s %d free" % (k, s.fleet.free_count(k)) for k in s.options[it.index])
    return "not enough GPUs: every GPU that can serve it is taken (%s)" % free


def lower_bound(s: Solved) -> Tuple[int, Optional[float], str]:
    """``(GPUs, cost per hour or None, kind)``: the LP bound (``lp``) when scipy is there, else ``covering``."""
    if s.request.options.bound and milp.available() and any(s.placed.values()):
        try:
            lb, lb_cost = milp.lp_bound(s.request.nodes, s.request.items, s.options, s.prices, s.placed)
            return lb, lb_cost, "lp"
        except GpuOpsError:
            pass
    return covering_bound(s.request.items, s.options, s.placed), None, "covering"


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def summary(s: Solved, usage: Usage) -> Dict[str, Any]:
    """gpu_plan's ``plan.summary``: GPUs and cost used, the bound and gap, churn, replicas, the baseline, timing."""
    nodes = s.request.nodes
    lb, lb_cost, lb_kind = lower_bound(s)
    gpus_total = sum(len(n.models) for n in nodes)
    gpus_used = len(usage.used)
    cost = sum(s.price(nodes[ni].models[gi].key) for ni, gi in usage.used)
    requested = sum(it.replicas for it in s.request.items)
    placed_total = sum(s.placed.values())
    return {
        "gpus_total": gpus_total,
        "gpus_used": gpus_used,
        "gpus_idle": gpus_total - gpus_used,
        "cost_per_hour": round(cost, 4),
        "cost_per_hour_all_gpus": round(sum(s.price(m.key) for n in nodes for m in n.models), 4),
        "lower_bound_gpus": lb,
        "lower_bound_cost_per_hour": None if lb_cost is None else round(lb_cost, 4),
        "lower_bound": lb_kind,
        "gap_pct": round(100.0 * (gpus_used - lb) / lb, 2) if lb else 0.0,
        "reconfigured_gpus": s.fleet.reconfigured,
        "disruption_budget": s.request.options.disruption_budget,
        "allocation_pct": _pct(usage.allocation_sum, gpus_used),
        "replicas_requested": requested,
        "replicas_placed": placed_total,
        "replicas_unplaced": requested - placed_total,
        "one_gpu_per_replica": {"gpus": usage.baseline_gpus, "cost_per_hour": round(usage.baseline_cost, 4)},
        "gpus_saved_pct": _pct(usage.baseline_gpus - gpus_used, usage.baseline_gpus),
        "cost_saved_pct": _pct(usage.baseline_cost - cost, usage.baseline_cost),
        "by_model": dict((k, {"gpus": v["gpus"], "gpus_used": v["gpus_used"],
                              "cost_per_hour": round(v["cost_per_hour"], 4),
                              "allocation_pct": _pct(v["allocation_sum"], v["gpus_used"])})
                         for k, v in usage.by_model.items()),
        "objective": s.request.options.objective,
        "solver": s.solver,
        "status": s.status,
        "solve_seconds": round(s.solve_s, 4),
        "total_seconds": round(time.time() - s.started, 4),
        "slice_diagram": text_diagram(s.fleet),
    }


def planned_gpus(fleet: Fleet, names: Dict[int, Optional[str]], limit: int = 12) -> Dict[str, List[Dict[str, Any]]]:
    """Instance facts of one node per distinct (mig config, device-plugin config) in use, at most ``limit``: what
    the report draws."""
    first: Dict[Tuple[Optional[str], Optional[str]], int] = OrderedDict()
    for ni, node in enumerate(fleet.nodes):
        if any(fleet.assign.get((ni, gi)) for gi in range(len(node.models))):
            first.setdefault((names.get(ni), outputs.device_plugin_name(fleet, ni)), ni)
    return OrderedDict((fleet.nodes[ni].name, _gpu_facts(fleet, ni)) for ni in list(first.values())[:limit])
