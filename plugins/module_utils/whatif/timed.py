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

from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import autoscaler
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import baselines
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import departures
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import preemption
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import prepare
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replan_node
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned


def initial_layouts(nodes, p, table):
    """Layouts ``replanned`` starts from: ``plan``, else ``mig_config``, else whole GPUs."""
    if p["plan"]:
        return whatif_mig.planned_layouts(nodes, p["plan"], p["mig_shape"], table)
    if p["mig_config"]:
        return whatif_mig.static_layouts(nodes, p["mig_config"], p["mig_shape"], table)
    return whatif_mig.exclusive_layouts(nodes, table)


def build(cluster, nodes, pods, seq, rng, scoring, sharing, p, end=None, info=None):
    """The engine of one run (not yet replayed) and its Replanner (None but for ``replanned``). ``end``: the
    trace's end, for ``planned`` without a plan and ``hindsight`` (baselines.py), which put what they planned
    for in ``info`` (a dict)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import frag as whatif_frag

    tie = None if p["tie_break"] == "auto" else p["tie_break"]
    unit_sharing = "mig" if sharing in ("replanned", "hindsight") else sharing
    typ = whatif_frag.Typical(prepare.typical_for(pods, unit_sharing, p["typical_threshold"]), cluster.models)
    arr = prepare.engine_arrivals(seq, unit_sharing)
    pct = p["percentage_of_nodes_to_score"]
    if sharing in ("exclusive", "fractional"):
        return whatif_engine.MilliReplay(cluster, arr, scoring, typ, rng, pct, tie), None
    if sharing == "hindsight" or (sharing == "planned" and not p["plan"]):
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
        rp = replan_node.NodeReplanner(eng, cluster, table, shapes, p["replan_every_h"], p["replan_min_interval_h"],
                                       budget, p["reconfigure_s"], drain=p["replan_drain"])
    else:
        rp = replanned.Replanner(eng, cluster, table, shapes, p["replan_every_h"], p["replan_min_interval_h"], budget,
                                 p["reconfigure_s"])
    return eng, rp


def run(p, nodes_all, pods, t0, t_load, progress, clock):
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

    end = departures.check_times(pods)
    for sharing in p["sharing"]:
        if sharing == "mig" or (sharing == "planned" and p["plan"]):
            prepare.layouts_for(sharing, nodes_all, p)
        if sharing == "replanned":
            initial_layouts(nodes_all, p, whatif_mig.UnitTable())

    mapping = preemption.check_priorities(p["priorities"])
    if mapping is not None:
        preemption.pod_priorities(pods, mapping)  # an unknown qos fails before any replay

    def replay_one(cluster, nodes, seq, rng, sharing, scoring, per_seed, step):
        # seeds the preemption's node offsets and the autoscaler's pool without a draw from the run's stream
        copy = random.Random()
        copy.setstate(rng.getstate())
        draw = copy.random()
        asc = None
        if p["autoscaler"] is not None:
            pool, initial = autoscaler.pool_nodes(nodes, p["autoscaler"], draw)
            cluster, nodes = whatif_engine.Cluster(pool), pool
        info = {}
        eng, rp = build(cluster, nodes, pods, seq, rng, scoring, sharing, p, end, info)
        pre = None
        if mapping is not None:
            pre = preemption.Preemptor(preemption.pod_priorities(seq, mapping), seed=draw)
        if p["autoscaler"] is not None:
            asc = autoscaler.Autoscaler(p["autoscaler"], cluster, initial)
        dr = departures.DepartureReplay(eng, seq, end, rp, preemptor=pre, autoscaler=asc)
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
        return dr.timeline, summary

    out = {"departures": True}
    fields = departures.SUMMARY_FIELDS
    if mapping is not None:
        fields += ("evictions",)
    if p["autoscaler"] is not None:
        fields += ("scale_ups", "scale_downs", "nodes_peak")
    if p["replan_scope"] == "node" and "replanned" in p["sharing"]:
        fields += ("drain_evictions", "drain_wait_s")
    out.update(prepare.replay_runs(p, nodes_all, pods, replay_one, departures.mean_timeline, fields,
                                   (t0, t_load, clock), progress))
    out["workload"]["trace_end_hours"] = round(end / 3600.0, 2)
    return out
