# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Service per class of pods in a replay with departures (``summary.by_class``).

Classes (a pod is in one class of each family):

* GPU shape: ``whole`` (one whole GPU), ``shared`` (a share of one GPU, gpu_milli < 1000), ``multi-gpu``
  (two GPUs or more), ``cpu`` (no GPU);
* life: ``short`` (the pod existed less than ``SHORT_S`` = 1 hour in the trace: deletion - creation),
  ``long`` (1 hour or more, or never deleted);
* priority, when the trace gives one: ``qos:<value>`` (the openb lists' ``qos``: LS, BE, Burstable,
  Guaranteed).

Per class: ``pods``, ``served_pct`` (the request x the time its pods ran, of the request x the time they
existed within the window - GPU-time; None for CPU pods), ``served_pods_pct`` (pods placed, of the pods),
``start_delay_p95_s`` (95th percentile of the wait of the pods placed, None when none was placed) and
``pods_never_placed``.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.stats import percentile

MILLI = 1000.0
SHORT_S = 3600.0
SHAPES = ("whole", "shared", "multi-gpu", "cpu")
LIVES = ("short", "long")


def shape_of(pod: Any) -> str:
    if not pod.num_gpu:
        return "cpu"
    if pod.num_gpu > 1:
        return "multi-gpu"
    return "shared" if pod.gpu_milli < MILLI else "whole"


def life_of(pod: Any) -> str:
    if pod.deletion_time is None:
        return "long"
    return "short" if pod.deletion_time - pod.creation_time < SHORT_S else "long"


def classes_of(pod: Any) -> List[str]:
    out = [shape_of(pod), life_of(pod)]
    if pod.qos:
        out.append("qos:%s" % pod.qos)
    return out


def by_class(seq: Sequence[Any], arrivals: Sequence[Sequence[Any]], bind: Sequence[Optional[float]], end: float,
             deletion: Callable[[int], float], ran: Optional[Callable[[int, float], float]] = None,
             prio: Optional[Sequence[int]] = None) -> Dict[str, Dict[str, Any]]:
    """``{class: {pods, served_pct, served_pods_pct, start_delay_p95_s, pods_never_placed}}`` of one replay.
    ``seq``: the Pods replayed (times), ``arrivals``: their engine tuples (request milli at index 4), ``bind``:
    the time each was bound (None: never), ``end``: the window's end, ``deletion(k)``: pod k's deletion time
    (inf when none); ``ran(k, stop)``: the seconds pod k ran up to ``stop`` when it may have been evicted and
    bound again (preemption.py; default ``stop - bind``); ``prio``: the priority of each pod (with
    ``priorities``), which adds the classes ``priority:<value>``."""
    acc = {}
    for k, p in enumerate(seq):
        gpus = arrivals[k][4] / MILLI
        stop = min(deletion(k), end)
        req = gpus * max(stop - p.creation_time, 0.0)
        b = bind[k]
        if b is None:
            served = 0.0
        else:
            served = gpus * (ran(k, stop) if ran is not None else max(stop - b, 0.0))
        names = classes_of(p)
        if prio is not None:
            names.append("priority:%d" % prio[k])
        for c in names:
            a = acc.setdefault(c, {"pods": 0, "req": 0.0, "served": 0.0, "waits": [], "never": 0})
            a["pods"] += 1
            a["req"] += req
            a["served"] += served
            if b is None:
                a["never"] += 1
            else:
                a["waits"].append(b - p.creation_time)
    out = {}
    for c in sorted(acc, key=_order):
        a = acc[c]
        p95 = percentile(a["waits"], 95)
        out[c] = {"pods": a["pods"],
                  "served_pct": round(100.0 * a["served"] / a["req"], 3) if a["req"] > 0 else None,
                  "served_pods_pct": round(100.0 * (a["pods"] - a["never"]) / a["pods"], 3),
                  "start_delay_p95_s": None if p95 is None else round(p95, 1),
                  "pods_never_placed": a["never"]}
    return out


def _order(c):
    fixed = SHAPES + LIVES
    return (fixed.index(c), c) if c in fixed else (len(fixed), c)


def combine(per_seed: Sequence[Mapping[str, Mapping[str, Any]]]) -> Mapping[str, Mapping[str, Any]]:
    """Means over seeds of each class's fields (classes missing in a seed are left out of its mean)."""
    if len(per_seed) == 1:
        return per_seed[0]
    names = []
    for bc in per_seed:
        for c in bc:
            if c not in names:
                names.append(c)
    out = {}
    for c in sorted(names, key=_order):
        row = {}
        for f in ("pods", "served_pct", "served_pods_pct", "start_delay_p95_s", "pods_never_placed"):
            vals = [bc[c][f] for bc in per_seed if c in bc and bc[c][f] is not None]
            row[f] = round(sum(vals) / len(vals), 3) if vals else None
        out[c] = row
    return out
