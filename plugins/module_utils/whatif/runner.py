# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The what-if runs behind ``gpuops.k8s.gpu_whatif``: inputs, replays per seed, summaries, report.

``run(params)`` validates everything first (inputs, MIG layouts, plan), then replays every
``sharing`` x ``scoring`` combination on the same arrival sequence per seed, and returns::

    {"curve": [...], "summary": {...},          # the first combination
     "runs": [{"scoring", "sharing", "curve", "summary"}, ...],
     "cluster": {...}, "workload": {...}, "timing": {...}, "report": {...} or None}

Summary fields (at the point where the arrived workload reaches 100 % of the GPU capacity, the
paper's headline point, unless named otherwise):

* ``allocated_pct_at_100``: GPU milli bound to pods / capacity, %;
* ``served_pct_at_100``: the trace's request of the pods placed / capacity, % (exclusive GPUs and
  MIG slices bind more than a sharing pod asks for: allocated >= served);
* ``frag_pct_at_100``, ``fragmented_gpu_milli``: fragmented GPU milli (frag.py);
* ``unscheduled_pods_at_100`` and ``unscheduled_pods`` (the whole replay, up to ``inflation``);
* ``gpu_hours_saved``: per hour, the GPU-hours that whole GPUs for each placed pod (today's
  exclusive allocation: ``num_gpu`` GPUs per pod) would hold beyond what this mode holds for the
  same pods (0 for exclusive);
* ``cost_per_hour``: price of the cluster's GPUs per hour (catalog prices, ``prices`` overrides);
  ``cost_per_served_gpu_hour``: that / served GPU-hours; ``cost_saved_per_hour``:
  ``gpu_hours_saved`` at the cluster's mean price. None when a GPU model has no price.

With ``seeds``, summary values are means over the seeds, ``summary.spread`` gives stdev/min/max per
field and ``summary.per_seed`` the values of each seed; the curve is the mean curve.

Requires numpy for the replay (not for validation of the inputs).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data as whatif_data
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import prepare
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import trace_models
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import workload
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.engine import SCORINGS
# arrivals_for and sample are re-exported for the benchmarks and the lab replay (tests/e2e/lib)
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.prepare import (  # noqa: F401 pylint: disable=unused-import
    _r, arrivals_for, engine_arrivals, layouts_for, sample, typical_for)

SHARINGS = ("exclusive", "fractional", "mig", "planned", "replanned", "hindsight", "dra-first-fit", "dra-steered")
TIMED_ONLY = ("replanned", "hindsight", "dra-first-fit", "dra-steered")  # sharings that need departures: true
MILLI = 1000
SUMMARY_FIELDS = ("allocated_pct_at_100", "served_pct_at_100", "frag_pct_at_100", "fragmented_gpu_milli",
                  "unscheduled_pods_at_100", "unscheduled_pods", "gpu_hours_saved", "cost_per_hour",
                  "cost_per_served_gpu_hour", "cost_saved_per_hour")

DEFAULTS: Dict[str, Any] = {
    "nodes_csv": None, "pods_csv": None, "nodes": None, "pods": None,
    "scoring": ["kube-default"], "sharing": ["exclusive"], "inflation": 1.3, "order": "shuffle",
    "seed": 42, "seeds": None, "sample_nodes": None, "pods_per_node": None,
    "mig_config": None, "mig_shape": whatif_mig.DEFAULT_SHAPE, "plan": None, "prices": None,
    "tie_break": "auto", "percentage_of_nodes_to_score": None, "typical_threshold": 95,
    "report": None, "report_title": None,
    # the replay with departures (departures.py) and sharing replanned (replanned.py)
    "departures": False, "replan_every_h": 6.0, "replan_min_interval_h": 0.5, "replan_budget": "5%",
    "reconfigure_s": 120.0,
    # strategies of the replay with departures (issue 33): preemption.py, autoscaler.py, baselines.py
    "priorities": None, "autoscaler": None, "planned_percentile": 95.0, "replan_scope": "gpu",
    "replan_drain": "requeue",
    # load, time and capacity (load.py, capacity.py, stats.py)
    "window": None, "load_factor": 1.0, "cluster_gpus": None, "capacity_search": None, "baseline": None,
}


def _as_list(value, name):
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise GpuOpsError("%s must be a string or a list of strings, not %r" % (name, value))


def normalise(params: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Defaults filled in and every option checked; returns a new dict."""
    p: Dict[str, Any] = dict(DEFAULTS)
    for k, v in (params or {}).items():
        if v is not None or k not in p:
            p[k] = v
    p["scoring"] = _as_list(p["scoring"], "scoring") or list(DEFAULTS["scoring"])
    p["sharing"] = _as_list(p["sharing"], "sharing") or list(DEFAULTS["sharing"])
    for s in p["scoring"]:
        if s not in SCORINGS:
            raise GpuOpsError("scoring %r is not one of %s" % (s, ", ".join(SCORINGS)), valid=list(SCORINGS))
    for s in p["sharing"]:
        if s not in SHARINGS:
            raise GpuOpsError("sharing %r is not one of %s" % (s, ", ".join(SHARINGS)), valid=list(SHARINGS))
    if len(set(p["scoring"])) != len(p["scoring"]) or len(set(p["sharing"])) != len(p["sharing"]):
        raise GpuOpsError("scoring and sharing must not list a value twice")
    if (p["nodes_csv"] is None) == (p["nodes"] is None):
        raise GpuOpsError("give exactly one of nodes_csv (an openb node list) and nodes (a list)")
    if (p["pods_csv"] is None) == (p["pods"] is None):
        raise GpuOpsError("give exactly one of pods_csv (an openb pod list) and pods (a list)")
    try:
        p["inflation"] = float(p["inflation"])
    except (TypeError, ValueError):
        raise GpuOpsError("inflation must be a number (1.3: replay until 130 %% of the GPU capacity is requested), not %r"
                          % (p["inflation"],))
    if p["inflation"] < 0 or p["inflation"] > 100:
        raise GpuOpsError("inflation must be between 0 (replay the pods as given) and 100, not %s" % p["inflation"])
    if p["order"] not in workload.ORDERS:
        raise GpuOpsError("order must be one of %s, not %r" % (", ".join(workload.ORDERS), p["order"]))
    seeds = p["seeds"]
    if seeds is not None and seeds != []:
        if not isinstance(seeds, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise GpuOpsError("seeds must be a list of integers, not %r" % (seeds,))
        if len(set(seeds)) != len(seeds):
            raise GpuOpsError("seeds must not repeat a seed: %r" % (seeds,))
        p["seeds"] = list(seeds)
    else:
        if isinstance(p["seed"], bool) or not isinstance(p["seed"], int):
            raise GpuOpsError("seed must be an integer, not %r" % (p["seed"],))
        p["seeds"] = [p["seed"]]
    for key in ("sample_nodes", "pods_per_node", "percentage_of_nodes_to_score"):
        v = p[key]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise GpuOpsError("%s must be a positive integer, not %r" % (key, v))
    if p["percentage_of_nodes_to_score"] is not None and p["percentage_of_nodes_to_score"] > 100:
        raise GpuOpsError("percentage_of_nodes_to_score must be 1..100")
    if p["tie_break"] not in ("auto", "rank", "random"):
        raise GpuOpsError("tie_break must be auto, rank or random, not %r" % (p["tie_break"],))
    if "mig" in p["sharing"] and not p["mig_config"]:
        raise GpuOpsError("sharing mig needs mig_config ({model: layout}, e.g. {'*': all-balanced})")
    if "planned" in p["sharing"] and not p["plan"] and not p["departures"]:
        raise GpuOpsError("sharing planned needs plan (the result of gpuops.k8s.gpu_plan), or departures: true (then "
                          "it is planned from the workload's concurrent demand, see planned_percentile)")
    _check_departures(p)
    _check_capacity(p)
    if p["prices"] is not None:
        if not isinstance(p["prices"], dict):
            raise GpuOpsError("prices must be a mapping {model: USD per GPU-hour}")
        for k, v in p["prices"].items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise GpuOpsError("prices.%s must be a number >= 0, not %r" % (k, v))
    t = p["typical_threshold"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 100:
        raise GpuOpsError("typical_threshold must be a percentage in (0, 100], not %r" % (t,))
    return p


def _hours(p, key, minimum, strict, example):
    v = p[key]
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    if ok:
        ok = v > minimum if strict else v >= minimum
    if not ok:
        raise GpuOpsError("%s must be a number %s %g (e.g. %s), not %r" % (key, ">" if strict else ">=", minimum, example, v),
                          valid="%s %g" % (">" if strict else ">=", minimum))
    p[key] = float(v)


def _check_departures(p):
    """The options of the replay with departures and of sharing replanned."""
    if not isinstance(p["departures"], bool):
        raise GpuOpsError("departures must be true or false, not %r" % (p["departures"],))
    _hours(p, "replan_every_h", 0, True, "6")
    _hours(p, "replan_min_interval_h", 0, False, "0.5")
    _hours(p, "reconfigure_s", 0, False, "120")
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned

    replanned.budget_gpus(p["replan_budget"], 100)  # the form; the GPU count comes with the cluster
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import strategies

    strategies.check(p, SHARINGS)
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import dra as whatif_dra

    whatif_dra.check(p["sharing"], p["scoring"], p["departures"])
    for timed_only in TIMED_ONLY:
        if timed_only in p["sharing"] and not p["departures"]:
            valid = [s for s in SHARINGS if s not in TIMED_ONLY]
            raise GpuOpsError("sharing %s needs departures: true (%s); the sharings without departures are: %s"
                              % (timed_only, "it re-plans as pods arrive and leave over the trace's time"
                                 if timed_only == "replanned" else "it is planned from the concurrent demand over the "
                                 "trace's time", ", ".join(valid)), valid=valid)


def _check_capacity(p):
    """``window``, ``load_factor``, ``cluster_gpus``, ``capacity_search`` and ``baseline``."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import capacity, load

    load.check(p)
    p["capacity_search"] = capacity.check(p["capacity_search"])
    if p["capacity_search"] is not None and not p["departures"]:
        raise GpuOpsError("capacity_search needs departures: true (the service target is met over the trace's time)")
    b = p["baseline"]
    if b is not None:
        labels = run_labels(p)
        if b not in labels:
            raise GpuOpsError("baseline %r is not one of the runs: %s" % (b, ", ".join(labels)), valid=labels)


def run_labels(p: Mapping[str, Any]) -> List[str]:
    """The names of the runs: ``sharing`` (one scoring), ``sharing/scoring`` otherwise; both are accepted."""
    out = []
    for sh in p["sharing"]:
        for sc in p["scoring"]:
            if len(p["scoring"]) == 1:
                out.append(sh)
            out.append("%s/%s" % (sh, sc))
    return out


def load_inputs(p: Mapping[str, Any]) -> Tuple[List[Any], List[Any]]:
    """``(nodes, pods)`` from the CSV files or the lists."""
    nodes = whatif_data.read_nodes_csv(p["nodes_csv"]) if p["nodes_csv"] is not None else whatif_data.nodes_from_list(p["nodes"])
    pods = whatif_data.read_pods_csv(p["pods_csv"]) if p["pods_csv"] is not None else whatif_data.pods_from_list(p["pods"])
    if p["pods_per_node"]:
        nodes = [n if n.pods is not None else n._replace(pods=p["pods_per_node"]) for n in nodes]
    if not any(n.gpus for n in nodes):
        raise GpuOpsError("none of the %d nodes has a GPU: nothing to replay" % len(nodes))
    return nodes, pods


def replay(cluster: Any, nodes: Sequence[Any], pods: Sequence[Any], seq: Sequence[Any], rng: Any, scoring: str,
           sharing: str, p: Mapping[str, Any], layouts: Any = None, progress: Any = None) -> Tuple[Any, Any]:
    """One replay -> (events, engine). ``rng`` continues the arrival draw's stream."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import frag as whatif_frag

    tie = None if p["tie_break"] == "auto" else p["tie_break"]
    typ = whatif_frag.Typical(typical_for(pods, sharing, p["typical_threshold"]), cluster.models)
    arr = engine_arrivals(seq, sharing)
    if sharing in ("exclusive", "fractional"):
        r: Any = whatif_engine.MilliReplay(cluster, arr, scoring, typ, rng, p["percentage_of_nodes_to_score"], tie)
    else:
        table, lay = layouts
        r = whatif_engine.SliceReplay(cluster, arr, scoring, table, lay, typ, rng, p["percentage_of_nodes_to_score"], tie)
    return r.run(progress), r


def summarise(events: Any, engine: Any, cluster: Any, seq: Sequence[Any], p: Mapping[str, Any],
              curve_points: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import metrics

    cap = cluster.total_milli
    i100 = metrics.index_at(events, cap, 100)
    failed = set(engine.failed)
    unsched_100 = sum(1 for k in failed if k <= i100)
    upto = i100 + 1 if i100 >= 0 else 0
    whole = sum(seq[k].num_gpu * MILLI for k in range(upto) if events.placed[k])
    alloc = float(events.allocated[i100]) if i100 >= 0 else 0.0
    served = float(events.served[i100]) if i100 >= 0 else 0.0
    saved_h = (whole - alloc) / MILLI
    prices: List[Any] = [trace_models.price_of(n.model, p["prices"]) for n in cluster.nodes for dummy in range(n.gpus)]
    priced = all(x is not None for x in prices) and prices
    cost: Any = sum(prices) if priced else None
    mean_price = cost / len(prices) if priced else None
    return {
        "allocated_pct_at_100": metrics.at(curve_points, 100),
        "served_pct_at_100": metrics.at(curve_points, 100, "served_pct"),
        "frag_pct_at_100": metrics.at(curve_points, 100, "frag_pct"),
        "fragmented_gpu_milli": _r(events.frag[i100], 1) if i100 >= 0 else None,
        "unscheduled_pods_at_100": unsched_100,
        "unscheduled_pods": len(failed),
        "gpu_hours_saved": _r(saved_h, 2),
        "cost_per_hour": _r(cost, 2),
        "cost_per_served_gpu_hour": _r(cost / (served / MILLI), 4) if (cost is not None and served > 0) else None,
        "cost_saved_per_hour": _r(saved_h * mean_price, 2) if mean_price is not None else None,
    }


def combine(summaries: Sequence[Mapping[str, Any]], seeds: Sequence[int],
            fields: Sequence[str] = SUMMARY_FIELDS) -> Dict[str, Any]:
    """Means over seeds, ``spread`` (stdev, min, max) and ``per_seed`` of ``fields``."""
    return prepare.combine(summaries, seeds, fields)


def mean_curve(curves: Sequence[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    if len(curves) == 1:
        return curves[0]
    keys = ("allocated_pct", "frag_pct", "frag_ratio_pct", "served_pct")
    common = set(pt["arrived_pct"] for pt in curves[0])
    for c in curves[1:]:
        common &= set(pt["arrived_pct"] for pt in c)
    index = [dict((pt["arrived_pct"], pt) for pt in c) for c in curves]
    out = []
    for x in sorted(common):
        point = {"arrived_pct": x}
        for k in keys:
            point[k] = round(sum(ix[x][k] for ix in index) / len(index), 2)
        out.append(point)
    return out


def run(params: Optional[Mapping[str, Any]], progress: Any = None,
        clock: Callable[[], float] = time.time) -> Dict[str, Any]:
    """Everything the module returns (no report written here; see report.py)."""
    t0 = clock()
    p = normalise(params)
    nodes_all, pods = load_inputs(p)
    # validate the MIG inputs on the whole node list before any replay
    for sharing in p["sharing"]:
        if sharing == "mig" or (sharing == "planned" and p["plan"]):
            layouts_for(sharing, nodes_all, p)
    t_load = clock() - t0
    if p["departures"]:
        from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import timed

        return timed.run(p, nodes_all, pods, t0, t_load, progress, clock)
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import metrics

    def replay_one(cluster, nodes, seq, rng, sharing, scoring, per_seed, step):
        if sharing in ("mig", "planned") and sharing not in per_seed:
            per_seed[sharing] = layouts_for(sharing, nodes, p)
        events, engine = replay(cluster, nodes, pods, seq, rng, scoring, sharing, p, per_seed.get(sharing), step)
        curve_points = metrics.curve(events, cluster.total_milli)
        return curve_points, summarise(events, engine, cluster, seq, p, curve_points)

    return prepare.replay_runs(p, nodes_all, pods, replay_one, mean_curve, SUMMARY_FIELDS, (t0, t_load, clock), progress)
