# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``plan(params)``: validate, decide per item, solve (exact MILP or the heuristic), build every output.

``solver: auto`` takes the exact MILP (scipy/HiGHS) for fleets of at most :data:`EXACT_MAX_GPUS` GPUs when scipy is
there, else the heuristic; the LP relaxation (scipy) or the covering bound gives ``summary.lower_bound_gpus``.

Pure Python (scipy only inside milp.py, imported lazily), Python 3.9 compatible.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from ansible_collections.gpuops.k8s.plugins.module_utils.report import diagram as slice_diagram
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import heuristic, milp, outputs, packing
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt

EXACT_MAX_GPUS = 256
DEFAULTS = {"nodes": None, "demand": None, "objective": "min_cost", "prices": None, "disruption_budget": None,
            "solver": "auto", "time_limit_s": 60.0, "current_configs": None, "bound": True,
            "lp_rounding": True}


def build_options(nodes, items):
    models = OrderedDict()
    for n in nodes:
        for m in n.models:
            models.setdefault(m.key, m)
    options = {}
    reasons = {}
    for it in items:
        options[it.index] = OrderedDict()
        reasons[it.index] = OrderedDict()
        for key, model in models.items():
            o, why = opt.option_for(it, model)
            if o is not None and it.resource and opt.resource_of(o) != it.resource:
                o, why = None, "its pods request %s; on %s it would get %s" % (it.resource, key, opt.resource_of(o))
            if o is None:
                reasons[it.index][key] = why
            elif o.gpus > 1 and max(sum(1 for m in n.models if m.key == key) for n in nodes) < o.gpus:
                reasons[it.index][key] = "needs %d %s GPUs on one node; the largest node has %d" % (
                    o.gpus, key, max(sum(1 for m in n.models if m.key == key) for n in nodes))
            else:
                options[it.index][key] = o
    return models, options, reasons


def covering_bound(items, options, placed):
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


def _unplaced_reason(it, options, reasons, why, fleet, models, budget):
    if not options[it.index]:
        mem = [r for r in reasons[it.index].values() if r.startswith("needs %g GB" % it.memory_gb)]
        if mem and len(mem) == len(reasons[it.index]):
            largest = max(models.values(), key=opt.capacity_gb)
            return "needs %g GB on one device; the largest device in the fleet (%s) has %d GB" % (
                it.memory_gb, largest.key, opt.capacity_gb(largest))
        return "; ".join("%s: %s" % kv for kv in reasons[it.index].items())
    if why.get(it.index) == "budget":
        return "disruption_budget %s reached: serving these replicas would reconfigure more GPUs" % budget
    free = ", ".join("%s %d free" % (k, fleet.free_count(k)) for k in options[it.index])
    return "not enough GPUs: every GPU that can serve it is taken (%s)" % free


def _gpu_facts(fleet, ni):
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


def text_diagram(fleet, limit=3):
    """Slice diagrams of one node per distinct (mig config, device-plugin config), at most ``limit`` of them."""
    mig_cfg, names = outputs.mig_outputs(fleet)
    seen = OrderedDict()
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


def plan(params):
    t0 = time.time()
    p = dict(DEFAULTS)
    p.update(dict((k, v) for k, v in (params or {}).items() if v is not None))
    plan_demand.check_params(p)
    nodes = plan_demand.parse_nodes(p["nodes"], p.get("current_configs"))
    items = plan_demand.parse_demand(p["demand"])
    prices = plan_demand.parse_prices(p.get("prices"), nodes)
    objective = p["objective"]
    budget = p["disruption_budget"]
    models, options, reasons = build_options(nodes, items)
    if objective == "min_cost":
        missing = sorted(k for k in models if prices.get(k) is None)
        if missing:
            raise GpuOpsError("objective min_cost needs a price for %s; give prices (USD per GPU-hour) or use "
                              "objective min_gpus" % ", ".join(missing), models_without_price=missing)
    total_gpus = sum(len(n.models) for n in nodes)
    solver = p["solver"]
    if solver == "auto":
        solver = "exact" if milp.available() and total_gpus <= EXACT_MAX_GPUS else "heuristic"
    status = "heuristic"
    t_solve = time.time()
    if solver == "exact":
        if not milp.available():
            raise GpuOpsError("solver exact needs scipy (>= 1.9, HiGHS) on the controller; install it or use solver "
                              "heuristic")
        fleet, resid, why, status = milp.solve(nodes, items, options, prices, objective, budget,
                                               float(p["time_limit_s"]))
    elif milp.available() and p.get("lp_rounding", True):
        # the LP relaxation rounded down, then the greedy rounds for what rounding left
        start = milp.lp_round(nodes, items, options, prices, objective, budget)
        fleet, resid, why = heuristic.solve(nodes, items, options, prices, objective, budget, start=start)
        status = "lp-rounding"
    else:
        fleet, resid, why = heuristic.solve(nodes, items, options, prices, objective, budget)
    solve_s = time.time() - t_solve
    return build_result(p, nodes, items, models, options, reasons, prices, fleet, resid, why, solver, status,
                        solve_s, t0)


def build_result(p, nodes, items, models, options, reasons, prices, fleet, resid, why, solver, status, solve_s, t0):
    by_index = dict((it.index, it) for it in items)
    placed = dict((it.index, it.replicas - resid[it.index]) for it in items)
    per_item = dict((it.index, OrderedDict()) for it in items)
    used = []
    alloc_sum = 0.0
    by_model = OrderedDict((k, {"gpus": 0, "gpus_used": 0, "cost_per_hour": 0.0, "allocation_sum": 0.0})
                           for k in models)
    baseline_gpus = 0
    baseline_cost = 0.0
    for ni, node in enumerate(nodes):
        for gi, model in enumerate(node.models):
            by_model[model.key]["gpus"] += 1
    for (ni, gi), use in fleet.assign.items():
        model = nodes[ni].models[gi]
        if not any(u[2] for u in use["units"]) and use.get("group") is None:
            continue
        used.append((ni, gi))
        a = outputs.gpu_allocation(fleet, ni, gi, by_index)
        alloc_sum += a
        bm = by_model[model.key]
        bm["gpus_used"] += 1
        bm["allocation_sum"] += a
        bm["cost_per_hour"] += prices.get(model.key) or 0.0
        for i, profile, n in use["units"]:
            if not n:
                continue
            mode = outputs.mode_of_use(use, profile)
            key = (model.key, mode, outputs.resource_for_use(fleet, use, profile))
            per_item[i][key] = per_item[i].get(key, 0) + n
            g = by_index[i].gpus_per_replica if use.get("group") is not None else 1
            baseline_gpus += n * g
            baseline_cost += n * g * (prices.get(model.key) or 0.0)
    gpus_used = len(used)
    cost = sum(prices.get(nodes[ni].models[gi].key) or 0.0 for ni, gi in used)
    decisions = []
    unplaced = []
    for it in items:
        rows = per_item[it.index]
        if rows:
            (mkey, mode, res), dummy = max(rows.items(), key=lambda kv: (kv[1], kv[0]))
            o = options[it.index][mkey]
            reason = o.reason
        elif options[it.index]:
            mkey, o = min(options[it.index].items(),
                          key=lambda kv: (heuristic.unit_cost(kv[1], prices, p["objective"]), kv[0]))
            mode, res, reason = o.mode, opt.resource_of(o), o.reason
        else:
            mkey, mode, res, reason, o = None, None, None, "no GPU model of the fleet can serve it", None
        dec = {"tenant": it.tenant, "name": it.name, "kind": it.kind, "isolation": it.isolation,
               "replicas": it.replicas, "placed": placed[it.index], "mode": mode, "resource": res, "model": mkey,
               "profile": o.profile if o is not None else None, "reason": reason,
               "by_model": [{"model": k[0], "mode": k[1], "resource": k[2], "replicas": n} for k, n in rows.items()]}
        decisions.append(dec)
        if resid[it.index] > 0:
            unplaced.append({"tenant": it.tenant, "name": it.name, "replicas": resid[it.index],
                             "reason": _unplaced_reason(it, options, reasons, why, fleet, models, p["disruption_budget"])})
    lb = None
    lb_cost = None
    lb_kind = "covering"
    if p.get("bound", True) and milp.available() and any(placed.values()):
        try:
            lb, lb_cost = milp.lp_bound(nodes, items, options, prices, placed)
            lb_kind = "lp"
        except GpuOpsError:
            lb = None
    if lb is None:
        lb = covering_bound(items, options, placed)
    mig_cfg, names = outputs.mig_outputs(fleet)
    node_configs, dp_configs = outputs.node_outputs(fleet, names)
    requested = sum(it.replicas for it in items)
    placed_total = sum(placed.values())
    summary = {
        "gpus_total": sum(len(n.models) for n in nodes),
        "gpus_used": gpus_used,
        "gpus_idle": sum(len(n.models) for n in nodes) - gpus_used,
        "cost_per_hour": round(cost, 4),
        "cost_per_hour_all_gpus": round(sum(prices.get(m.key) or 0.0 for n in nodes for m in n.models), 4),
        "lower_bound_gpus": lb,
        "lower_bound_cost_per_hour": None if lb_cost is None else round(lb_cost, 4),
        "lower_bound": lb_kind,
        "gap_pct": round(100.0 * (gpus_used - lb) / lb, 2) if lb else 0.0,
        "reconfigured_gpus": fleet.reconfigured,
        "disruption_budget": p["disruption_budget"],
        "allocation_pct": round(100.0 * alloc_sum / gpus_used, 2) if gpus_used else 0.0,
        "replicas_requested": requested,
        "replicas_placed": placed_total,
        "replicas_unplaced": requested - placed_total,
        "one_gpu_per_replica": {"gpus": baseline_gpus, "cost_per_hour": round(baseline_cost, 4)},
        "gpus_saved_pct": round(100.0 * (baseline_gpus - gpus_used) / baseline_gpus, 2) if baseline_gpus else 0.0,
        "cost_saved_pct": round(100.0 * (baseline_cost - cost) / baseline_cost, 2) if baseline_cost else 0.0,
        "by_model": dict((k, {"gpus": v["gpus"], "gpus_used": v["gpus_used"], "cost_per_hour": round(v["cost_per_hour"], 4),
                              "allocation_pct": round(100.0 * v["allocation_sum"] / v["gpus_used"], 2)
                              if v["gpus_used"] else 0.0}) for k, v in by_model.items()),
        "objective": p["objective"],
        "solver": solver,
        "status": status,
        "solve_seconds": round(solve_s, 4),
        "total_seconds": round(time.time() - t0, 4),
        "slice_diagram": text_diagram(fleet),
    }
    diagram_nodes = OrderedDict()
    for ni, node in enumerate(nodes):
        if any(fleet.assign.get((ni, gi)) for gi in range(len(node.models))):
            diagram_nodes.setdefault((names.get(ni), outputs.device_plugin_name(fleet, ni)), ni)
    return {
        "_planned_gpus": dict((nodes[ni].name, _gpu_facts(fleet, ni)) for ni in list(diagram_nodes.values())[:12]),
        "summary": summary,
        "decisions": decisions,
        "placements": outputs.placements(fleet, items, packing),
        "unplaced": unplaced,
        "mig_parted_config": mig_cfg,
        "node_configs": node_configs,
        "device_plugin_configs": dp_configs,
        "quotas": outputs.quotas(fleet, items),
        "prices": dict((k, prices.get(k)) for k in models),
    }
