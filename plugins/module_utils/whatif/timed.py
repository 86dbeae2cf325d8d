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

from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import departures
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import prepare
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import trace_models


def initial_layouts(nodes, p, table):
    """Layouts ``replanned`` starts from: ``plan``, else ``mig_config``, else whole GPUs."""
    if p["plan"]:
        return whatif_mig.planned_layouts(nodes, p["plan"], p["mig_shape"], table)
    if p["mig_config"]:
        return whatif_mig.static_layouts(nodes, p["mig_config"], p["mig_shape"], table)
    return whatif_mig.exclusive_layouts(nodes, table)


def build(cluster, nodes, pods, seq, rng, scoring, sharing, p):
    """The engine of one run (not yet replayed) and its Replanner (None but for ``replanned``)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import frag as whatif_frag

    tie = None if p["tie_break"] == "auto" else p["tie_break"]
    unit_sharing = "mig" if sharing == "replanned" else sharing
    typ = whatif_frag.Typical(prepare.typical_for(pods, unit_sharing, p["typical_threshold"]), cluster.models)
    arr = prepare.engine_arrivals(seq, unit_sharing)
    pct = p["percentage_of_nodes_to_score"]
    if sharing in ("exclusive", "fractional"):
        return whatif_engine.MilliReplay(cluster, arr, scoring, typ, rng, pct, tie), None
    if sharing in ("mig", "planned"):
        table, lay = prepare.layouts_for(sharing, nodes, p)
        return whatif_engine.SliceReplay(cluster, arr, scoring, table, lay, typ, rng, pct, tie), None
    table = whatif_mig.UnitTable()
    shapes = [whatif_mig.shape_of(m, p["mig_shape"]) for m in cluster.models]
    kinds = [replanned.usable_kinds(table, s) for s in shapes]  # every kind registered before the engine
    table, lay = initial_layouts(nodes, p, table)
    eng = whatif_engine.SliceReplay(cluster, arr, scoring, table, lay, typ, rng, pct, tie)
    eng.use_kinds(kinds)
    rp = replanned.Replanner(eng, cluster, table, shapes, p["replan_every_h"], p["replan_min_interval_h"],
                             replanned.budget_gpus(p["replan_budget"], cluster.total_gpus), p["reconfigure_s"])
    return eng, rp


def run(p, nodes_all, pods, t0, t_load, progress, clock):
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

    end = departures.check_times(pods)
    for sharing in p["sharing"]:
        if sharing in ("mig", "planned"):
            prepare.layouts_for(sharing, nodes_all, p)
        if sharing == "replanned":
            initial_layouts(nodes_all, p, whatif_mig.UnitTable())
    combos = [(sh, sc) for sh in p["sharing"] for sc in p["scoring"]]
    results = dict((c, {"curves": [], "summaries": [], "seconds": []}) for c in combos)
    wl = {"arrivals": [], "added": [], "removed": []}
    clusters = []
    for seed in p["seeds"]:
        nodes = prepare.sample(nodes_all, p["sample_nodes"], seed)
        cluster = whatif_engine.Cluster(nodes)
        clusters.append(prepare.describe_cluster(nodes))
        seq, rng0, added, removed = prepare.arrivals_for(pods, cluster.total_milli, p, seed)
        wl["arrivals"].append(len(seq))
        wl["added"].append(added)
        wl["removed"].append(removed)
        state = rng0.getstate()
        for sharing, scoring in combos:
            rng = random.Random()
            rng.setstate(state)
            t1 = clock()
            if progress is not None:
                progress.begin(seed, sharing, scoring, len(seq))
            eng, rp = build(cluster, nodes, pods, seq, rng, scoring, sharing, p)
            dr = departures.DepartureReplay(eng, seq, end, rp).run()
            res = results[(sharing, scoring)]
            res["seconds"].append(clock() - t1)
            res["curves"].append(dr.timeline)
            res["summaries"].append(departures.summarise(dr))
            if progress is not None:
                progress.end()
    runs = []
    for sharing, scoring in combos:
        res = results[(sharing, scoring)]
        runs.append({"scoring": scoring, "sharing": sharing, "curve": departures.mean_timeline(res["curves"]),
                     "summary": prepare.combine(res["summaries"], p["seeds"], departures.SUMMARY_FIELDS),
                     "replay_seconds": [round(s, 3) for s in res["seconds"]]})
    one = prepare._single
    return {
        "departures": True,
        "curve": runs[0]["curve"],
        "summary": runs[0]["summary"],
        "runs": runs,
        "cluster": clusters[0] if p["sample_nodes"] is None else dict(clusters[0], sampled=p["sample_nodes"]),
        "workload": {"pods": len(pods), "arrivals": one(wl["arrivals"]), "added_by_inflation": one(wl["added"]),
                     "removed_by_inflation": one(wl["removed"]), "inflation": p["inflation"], "order": p["order"],
                     "seeds": p["seeds"], "trace_end_hours": round(end / 3600.0, 2)},
        "prices": dict((m, trace_models.price_of(m, p["prices"]))
                       for m in sorted(set(n.model for n in nodes_all if n.model))),
        "timing": {"load_seconds": round(t_load, 3),
                   "replay_seconds": dict(("%s/%s" % (r["sharing"], r["scoring"]), round(sum(r["replay_seconds"]), 3))
                                          for r in runs),
                   "total_seconds": round(clock() - t0, 3)},
        "params": p,
    }
