# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``runner.run`` with ``departures: true``: every ``sharing`` x ``scoring`` replayed over the trace's time
(departures.py; ``replanned``: replanned.py), per seed, on the same arrival sequence as the FGD protocol
(``order``, ``inflation``, ``sample_nodes``, seeds).

Returns what ``runner.run`` returns, with ``departures: true``; per run ``summary`` holds the fields of
departures.SUMMARY_FIELDS (means over seeds, ``spread`` and ``per_seed`` as usual) and ``curve`` is the
timeline (``hour`` since the first arrival, ``held_gpus``, ``allocated_gpus``, ``pending_pods``,
``running_pods``, ``reconfiguring_gpus``, ``reconfigured_gpus`` so far), the mean over seeds.

Requires numpy (the engines); controller side only.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import autoscaler
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import baselines
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import capacity
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import classes
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import departures
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import dra as whatif_dra
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import load
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import preemption
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import prepare
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replan_node
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import stats
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import trace_models


def initial_layouts(nodes: Sequence[Any], p: Mapping[str, Any], table: Any) -> Any:
    """Layouts ``replanned`` starts from: ``plan``, else ``mig_config``, else whole GPUs."""
    if p["plan"]:
        return whatif_mig.planned_layouts(nodes, p["plan"], p["mig_shape"], table)
    if p["mig_config"]:
        return whatif_mig.static_layouts(nodes, p["mig_config"], p["mig_shape"], table)
    return whatif_mig.exclusive_layouts(nodes, table)


def build(cluster: Any, nodes: Sequence[Any], pods: Sequence[Any], seq: Sequence[Any], rng: random.Random,
          scoring: str, sharing: str, p: Mapping[str, Any], end: Any = None,
          info: Optional[Dict[str, Any]] = None) -> Tuple[Any, Any]:
    """The engine of one run (not yet replayed) and its Replanner (None but for ``replanned``). ``end``: the
    trace's end, for ``planned`` without a plan and ``hindsight`` (baselines.py), which put what they planned
    for in ``info`` (a dict)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import frag as whatif_frag

    tie = None if p["tie_break"] == "auto" else p["tie_break"]
    unit_sharing = "mig" if sharing in ("replanned", "hindsight") + whatif_dra.SHARINGS else sharing
    typ = whatif_frag.Typical(prepare.typical_for(pods, unit_sharing, p["typical_threshold"]), cluster.models)
    arr = prepare.engine_arrivals(seq, unit_sharing)
    pct = p["percentage_of_nodes_to_score"]
    if sharing in ("exclusive", "fractional"):
        return whatif_engine.MilliReplay(cluster, arr, scoring, typ, rng, pct, tie), None
    if sharing in whatif_dra.SHARINGS:
        return whatif_dra.DraReplay(cluster, arr, scoring, rng, sharing == "dra-steered", p["mig_shape"], pct, tie), None
    if sharing == "hindsight" or (sharing == "planned" and not p["plan"]):
        if end is None:
            end = departures.check_times(seq)
        q = 100.0 if sharing == "hindsight" else p["planned_percentile"]
        table, lay, planned = baselines.plan_layouts(nodes, seq, end, q, p["mig_shape"])
        if info is not None:
            info.update(planned)
        return whatif_engine.SliceReplay(cluster, arr, scoring, table, lay, typ, rng, pct, tie), None
    if sharing in ("mig", "planned"):
        table, lay = prepare.layouts_for(sharing, nodes, p)
        return whatif_engine.SliceReplay(cluster, arr, scoring, table, lay, typ, rng, pct, tie), None
    table = whatif_mig.UnitTable()
    shapes = [whatif_mig.shape_of(m, p["mig_shape"]) for m in cluster.models]
    kinds = [replanned.usable_kinds(table, s) for s in shapes]  # every kind registered before the engine
    table, lay = initial_layouts(nodes, p, table)
    eng = whatif_engine.SliceReplay(cluster, arr, scoring, table, lay, typ, rng, pct, tie)
    eng.use_kinds(kinds)
    budget = replanned.budget_gpus(p["replan_budget"], cluster.total_gpus)
    if p["replan_scope"] == "node":
        rp: Any = replan_node.NodeReplanner(eng, cluster, table, shapes, p["replan_every_h"],
                                            p["replan_min_interval_h"], budget, p["reconfigure_s"],
                                            drain=p["replan_drain"])
    else:
        rp = replanned.Replanner(eng, cluster, table, shapes, p["replan_every_h"], p["replan_min_interval_h"], budget,
                                 p["reconfigure_s"])
    return eng, rp


def replay_strategy(cluster: Any, nodes: Sequence[Any], pods: Sequence[Any], times: Sequence[Any], stop: float,
                    rng: random.Random, scoring: str, sharing: str, p: Mapping[str, Any], mapping: Any,
                    replay: Optional[Callable[..., Any]] = None) -> Tuple[Any, Dict[str, Any]]:
    """One run with its strategies (priorities, autoscaler, node-level re-plans, planned baselines):
    ``(finished replay, summary)``. ``times``/``stop``: the retimed arrival sequence and its end; ``replay``: the
    DepartureReplay class (capacity.py's bounded one)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

    # seeds the preemption's node offsets and the autoscaler's pool without a draw from the run's stream
    copy = random.Random()
    copy.setstate(rng.getstate())
    draw = copy.random()
    asc = None
    if p["autoscaler"] is not None:
        pool, initial = autoscaler.pool_nodes(nodes, p["autoscaler"], draw)
        cluster, nodes = whatif_engine.Cluster(pool), pool
    info = {}
    eng, rp = build(cluster, nodes, pods, times, rng, scoring, sharing, p, stop, info)
    pre = None
    if mapping is not None:
        pre = preemption.Preemptor(preemption.pod_priorities(times, mapping), seed=draw)
    if p["autoscaler"] is not None:
        asc = autoscaler.Autoscaler(p["autoscaler"], cluster, initial)
    dr = (replay or departures.DepartureReplay)(eng, times, stop, rp, preemptor=pre, autoscaler=asc)
    for hook in (pre, asc):
        if hook is not None:
            hook.attach(dr)
    dr.run()
    summary = departures.summarise(dr)
    if info:
        summary["planned_for"] = info
    if p["replan_scope"] == "node" and "replanned" in p["sharing"]:
        node_rp = rp if sharing == "replanned" else None
        summary.update(drain_evictions=node_rp.drain_evictions if node_rp else 0,
                       drain_wait_s=round(node_rp.drain_wait_s, 1) if node_rp else 0.0)
    if pre is not None:
        summary["evictions"] = pre.evictions
        summary["by_priority"] = preemption.by_priority(dr, departures.percentile)
    if asc is not None:
        summary.update(scale_ups=asc.scale_ups, scale_downs=asc.scale_downs, nodes_peak=asc.nodes_peak,
                       pool_nodes=cluster.n)
    return dr, summary


def run(p: Dict[str, Any], nodes_all: Sequence[Any], pods: Sequence[Any], t0: float, t_load: float, progress: Any,
        clock: Callable[[], float]) -> Dict[str, Any]:
    end: Any = departures.check_times(pods)
    for sharing in p["sharing"]:
        if sharing == "mig" or (sharing == "planned" and p["plan"]):
            prepare.layouts_for(sharing, nodes_all, p)
        if sharing == "replanned":
            initial_layouts(nodes_all, p, whatif_mig.UnitTable())

    mapping = preemption.check_priorities(p["priorities"])
    if mapping is not None:
        preemption.pod_priorities(pods, mapping)  # an unknown qos fails before any replay
    if p["capacity_search"] is not None:
        return capacity_run(p, nodes_all, pods, end, t0, t_load, clock)

    def replay_one(cluster, nodes, seq, rng, sharing, scoring, per_seed, step):
        times, stop = timed_seq(seq, end, p)
        dr, summary = replay_strategy(cluster, nodes, pods, times, stop, rng, scoring, sharing, p, mapping)
        return dr.timeline, summary

    out = {"departures": True}
    fields: Tuple[str, ...] = departures.SUMMARY_FIELDS
    if mapping is not None:
        fields += ("evictions",)
    if p["autoscaler"] is not None:
        fields += ("scale_ups", "scale_downs", "nodes_peak")
    if p["replan_scope"] == "node" and "replanned" in p["sharing"]:
        fields += ("drain_evictions", "drain_wait_s")
    out.update(prepare.replay_runs(p, nodes_all, pods, replay_one, departures.mean_timeline, fields,
                                   (t0, t_load, clock), progress))
    finish(out, p, end)
    return out


def timed_seq(seq: Sequence[Any], end: float, p: Mapping[str, Any]) -> Tuple[Sequence[Any], float]:
    """The arrival sequence with the window and load factor applied (load.py) and the replay's end; the whole
    trace at load factor 1 keeps the trace's end (the FGD protocol's sequence as it was)."""
    if p["window"] == "whole" and p["load_factor"] == 1.0:
        return seq, end
    return load.retime(seq, p["window"], p["load_factor"])


def _labels(p):
    one = len(p["scoring"]) == 1
    return [(sh, sc, sh if one else "%s/%s" % (sh, sc)) for sh in p["sharing"] for sc in p["scoring"]]


def _baseline(p):
    b = p["baseline"]
    labels = _labels(p)
    if b is None:
        return labels[0][2]
    for sh, sc, label in labels:
        if b in (label, "%s/%s" % (sh, sc)):
            return label
    return labels[0][2]


PAIRED = ("served_pct", "served_pods_pct", "utilisation_pct", "gpu_hours_held", "pending_p95_s")
PAIRED_CAPACITY = ("gpus", "usd_per_hour", "utilisation_pct", "held_pct", "served_pct", "served_pods_pct")


def finish(out: Dict[str, Any], p: Mapping[str, Any], end: float) -> None:
    """Window facts, by_class over seeds and the paired differences against the baseline."""
    out["workload"]["trace_end_hours"] = round(end / 3600.0, 2)
    out["workload"]["window"] = p["window"]
    out["workload"]["load_factor"] = p["load_factor"]
    per_run = {}
    for run, (dummy_sh, dummy_sc, label) in zip(out["runs"], _labels(p)):
        s = run["summary"]
        if "per_seed" in s:
            s["by_class"] = classes.combine([x["by_class"] for x in s["per_seed"]])
        per_run[label] = s.get("per_seed") or [s]
    if len(per_run) > 1 and len(p["seeds"]) > 1:
        out["paired"] = {"baseline": _baseline(p),
                         "differences": stats.paired(per_run, _baseline(p), PAIRED, relative=("gpu_hours_held",))}


def capacity_run(p: Dict[str, Any], nodes_all: Sequence[Any], pods: Sequence[Any], end: float, t0: float,
                 t_load: float, clock: Callable[[], float]) -> Dict[str, Any]:
    """``runner.run`` with ``capacity_search`` (capacity.py)."""
    combos, found = capacity.search(p, nodes_all, pods, p["capacity_search"], build)
    runs = []
    per_run = {}
    for (sharing, scoring), (dummy_sh, dummy_sc, label) in zip(combos, _labels(p)):
        res = found[(sharing, scoring)]
        cap = capacity.combine(res["caps"], p["seeds"])
        summary = prepare.combine(res["summaries"], p["seeds"], departures.SUMMARY_FIELDS)
        runs.append({"scoring": scoring, "sharing": sharing, "curve": [], "summary": summary, "capacity": cap,
                     "replay_seconds": []})
        per_run[label] = res["caps"]
    cl = prepare.describe_cluster(nodes_all)
    out: Dict[str, Any] = {
        "departures": True, "curve": [], "summary": runs[0]["summary"], "runs": runs,
        "capacity": dict((label, r["capacity"]) for r, (dummy_sh, dummy_sc, label) in zip(runs, _labels(p))),
        "target": dict(p["capacity_search"]),
        "cluster": dict(cl, searched_up_to_gpus=p.get("cluster_gpus") or cl["gpus"]),
        "workload": {"pods": len(pods), "inflation": p["inflation"], "order": p["order"], "seeds": p["seeds"],
                     "arrivals": None, "added_by_inflation": None, "removed_by_inflation": None},
        "prices": dict((m, trace_models.price_of(m, p["prices"]))
                       for m in sorted(set(n.model for n in nodes_all if n.model))),
        "timing": {"load_seconds": round(t_load, 3), "replay_seconds": {}, "total_seconds": round(clock() - t0, 3)},
        "params": p
    }
    finish(out, p, end)
    if len(runs) > 1 and len(p["seeds"]) > 1:
        out["paired"]["capacity"] = stats.paired(per_run, _baseline(p), PAIRED_CAPACITY, relative=("gpus", "utilisation_pct"))
    return out
