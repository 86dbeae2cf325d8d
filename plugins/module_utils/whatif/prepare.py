# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every what-if run prepares the same way - node samples, arrival sequences, engine arrivals, typical
pods, MIG layouts -, the loop over seeds and sharing x scoring (``replay_runs``) and the summaries over seeds;
used by runner.py (the FGD protocol) and timed.py (the replay with departures). runner.py re-exports these names.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import trace_models
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import workload

MILLI = 1000


def sample(nodes: Sequence[Any], k: int, seed: int) -> List[Any]:
    """``k`` nodes drawn without replacement (seeded), in their original order."""
    if k is None or k >= len(nodes):
        return list(nodes)
    rng = random.Random("sample-nodes-%d" % seed)
    keep = set(rng.sample(range(len(nodes)), k))
    out = [n for i, n in enumerate(nodes) if i in keep]
    if not any(n.gpus for n in out):
        raise GpuOpsError("the sample of %d nodes (seed %d) holds no GPU; sample more nodes" % (k, seed))
    return out


def layouts_for(sharing: str, nodes: Sequence[Any], p: Mapping[str, Any], table: Any = None) -> Any:
    """Unit layouts for the unit-model sharing modes (validated)."""
    if sharing == "mig":
        return whatif_mig.static_layouts(nodes, p["mig_config"], p["mig_shape"], table)
    if sharing == "planned":
        return whatif_mig.planned_layouts(nodes, p["plan"], p["mig_shape"], table)
    return whatif_mig.exclusive_layouts(nodes, table)


def arrivals_for(pods: Sequence[Any], capacity_milli: int, p: Mapping[str, Any],
                 seed: int) -> Tuple[List[Any], random.Random, int, int]:
    """The arrival sequence of one seed: ``(pods in order, rng after drawing, added, removed)``."""
    rng = random.Random(seed)
    seq = workload.ordered(pods, p["order"], rng)
    seq, added, removed = workload.inflate(seq, pods, capacity_milli, p["inflation"], rng)
    return seq, rng, added, removed


def _per_gpu_milli(pod, sharing):
    if pod.num_gpu and sharing == "exclusive":
        return MILLI
    return pod.gpu_milli


def engine_arrivals(seq: Sequence[Any], sharing: str) -> List[Tuple[Any, ...]]:
    return [(p.cpu_milli, p.memory_mib, p.num_gpu, _per_gpu_milli(p, sharing), p.num_gpu * p.gpu_milli, p.gpu_spec)
            for p in seq]


def typical_for(pods: Sequence[Any], sharing: str, threshold: float = 95) -> Any:
    shapes = [(workload.nonzero_cpu(p.cpu_milli), _per_gpu_milli(p, sharing), p.num_gpu, p.gpu_spec) for p in pods]
    return workload.typical_pods(shapes, threshold)


def _mean(values):
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _stdev(values):
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return 0.0 if vals else None
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))


def _r(value, digits=2):
    return None if value is None else round(float(value), digits)


def combine(summaries: Sequence[Mapping[str, Any]], seeds: Sequence[int], fields: Sequence[str]) -> Dict[str, Any]:
    if len(summaries) == 1:
        return dict(summaries[0])
    out = {}
    spread = {}
    for f in fields:
        vals = [s[f] for s in summaries]
        m = _mean(vals)
        out[f] = _r(m, 2) if m is not None else None
        if m is not None:
            spread[f] = {"stdev": _r(_stdev(vals), 3), "min": min(v for v in vals if v is not None),
                         "max": max(v for v in vals if v is not None)}
    out["spread"] = spread
    out["seeds"] = list(seeds)
    out["per_seed"] = [dict(s, seed=seed) for s, seed in zip(summaries, seeds)]
    return out


def _single(values):
    return values[0] if len(values) == 1 else values


def describe_cluster(nodes: Sequence[Any]) -> Dict[str, Any]:
    models = {}
    for n in nodes:
        if n.gpus:
            models[n.model] = models.get(n.model, 0) + n.gpus
    return {"nodes": len(nodes), "gpu_nodes": sum(1 for n in nodes if n.gpus), "gpus": sum(n.gpus for n in nodes),
            "gpus_by_model": dict(sorted(models.items()))}


def _cluster_of(clusters, p):
    if p.get("cluster_gpus"):
        return dict(clusters[0], cluster_gpus=p["cluster_gpus"], gpus_per_seed=[c["gpus"] for c in clusters])
    return clusters[0] if p["sample_nodes"] is None else dict(clusters[0], sampled=p["sample_nodes"])


def replay_runs(p: Dict[str, Any], nodes_all: Sequence[Any], pods: Sequence[Any], replay_one: Callable[..., Any],
                mean_curve: Callable[..., Any], fields: Sequence[str],
                timing: Tuple[float, float, Callable[[], float]], progress: Any = None) -> Dict[str, Any]:
    """Every ``sharing`` x ``scoring`` of ``p`` replayed per seed on the same arrival sequence, and the result
    dict ``runner.run`` returns (``curve``, ``summary``, ``runs``, ``cluster``, ``workload``, ``prices``,
    ``timing``, ``params``).

    ``replay_one(cluster, nodes, seq, rng, sharing, scoring, per_seed, step)`` replays one run and returns
    ``(curve, summary)``; ``per_seed`` is a dict it may keep what the runs of one seed share in (MIG layouts),
    ``step`` the progress step (None without ``progress``). ``mean_curve(curves)``: the curve over the seeds;
    ``fields``: the summary fields combined over seeds; ``timing``: ``(t0, t_load, clock)``.
    """
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

    t0, t_load, clock = timing
    combos = [(sh, sc) for sh in p["sharing"] for sc in p["scoring"]]
    results = dict((c, {"curves": [], "summaries": [], "seconds": []}) for c in combos)
    wl = {"arrivals": [], "added": [], "removed": []}
    clusters = []
    for seed in p["seeds"]:
        if p.get("cluster_gpus"):
            # a nested, stratified sample (load.py); the workload stays that of the whole node list
            from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import load

            nodes = load.sample_gpus(nodes_all, p["cluster_gpus"], seed)
            drawn_on = sum(n.gpus for n in nodes_all) * MILLI
        else:
            nodes = sample(nodes_all, p["sample_nodes"], seed)
            drawn_on = None
        cluster = whatif_engine.Cluster(nodes)
        clusters.append(describe_cluster(nodes))
        seq, rng0, added, removed = arrivals_for(pods, drawn_on or cluster.total_milli, p, seed)
        wl["arrivals"].append(len(seq))
        wl["added"].append(added)
        wl["removed"].append(removed)
        state = rng0.getstate()
        per_seed = {}
        for sharing, scoring in combos:
            rng = random.Random()
            rng.setstate(state)
            t1 = clock()
            step = progress.begin(seed, sharing, scoring, len(seq)) if progress is not None else None
            curve, summary = replay_one(cluster, nodes, seq, rng, sharing, scoring, per_seed, step)
            res = results[(sharing, scoring)]
            res["seconds"].append(clock() - t1)
            res["curves"].append(curve)
            res["summaries"].append(summary)
            if progress is not None:
                progress.end()
    runs = []
    for sharing, scoring in combos:
        res = results[(sharing, scoring)]
        runs.append({"scoring": scoring, "sharing": sharing, "curve": mean_curve(res["curves"]),
                     "summary": combine(res["summaries"], p["seeds"], fields),
                     "replay_seconds": [round(s, 3) for s in res["seconds"]]})
    return {
        "curve": runs[0]["curve"],
        "summary": runs[0]["summary"],
        "runs": runs,
        "cluster": _cluster_of(clusters, p),
        "workload": {"pods": len(pods), "arrivals": _single(wl["arrivals"]),
                     "added_by_inflation": _single(wl["added"]), "removed_by_inflation": _single(wl["removed"]),
                     "inflation": p["inflation"], "order": p["order"], "seeds": p["seeds"]},
        "prices": dict((m, trace_models.price_of(m, p["prices"]))
                       for m in sorted(set(n.model for n in nodes_all if n.model))),
        "timing": {"load_seconds": round(t_load, 3),
                   "replay_seconds": dict(("%s/%s" % (r["sharing"], r["scoring"]), round(sum(r["replay_seconds"]), 3))
                                          for r in runs),
                   "total_seconds": round(clock() - t0, 3)},
        "params": p,
    }
