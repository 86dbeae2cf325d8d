# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load and time of a replay with departures, and nested cluster samples (``gpu_whatif`` options ``window``,
``load_factor``, ``cluster_gpus``).

* ``window``: ``active`` (the default) replays from the first arrival to the last deletion of the replayed pods,
  where a recording that starts with pods already running has them arrive at its start: when at most 5 % of the
  pods were created before the trace's first deletion, the window starts at that first deletion and those pods
  arrive then (keeping their deletion time). The openb lists' 8,152 pods are deleted between hours 2,768 and
  3,584, and the 33 created before hour 2,768 (from hour 0) were running when the recording began. ``whole``: from the
  first creation time to the trace's end, as before (rates and means over the 3,584 hours).
* ``load_factor`` f: arrivals compressed by f towards the window's start (``start + (creation - start) / f``),
  every pod's life (deletion - arrival) kept, so that concurrent demand scales by about f. f = 1 changes
  nothing.
* ``cluster_gpus``: the nodes ordered per seed so that every prefix keeps the node list's GPU model mix
  (stratified: each model's nodes shuffled, then interleaved, the model furthest below its share of GPUs
  next); a sample of about G GPUs is the shortest prefix with at least G GPUs. The samples of one seed are
  nested, so that capacity grows with G and a search over sizes can bisect (capacity.py). Nodes without a GPU
  follow in proportion to the GPU nodes.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

WINDOWS = ("active", "whole")


def check(p: Dict[str, Any]) -> None:
    """``window``, ``load_factor`` and ``cluster_gpus`` of the normalised params (in place)."""
    if p.get("window") is None:
        p["window"] = "active"
    if p["window"] not in WINDOWS:
        raise GpuOpsError("window must be one of %s, not %r" % (", ".join(WINDOWS), p["window"]), valid=list(WINDOWS))
    f = p.get("load_factor")
    if f is None:
        f = 1.0
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1000:
        raise GpuOpsError("load_factor must be a number in (0, 1000] (2: arrivals twice as dense, lives kept), not %r"
                          % (f,), valid="0 < load_factor <= 1000")
    p["load_factor"] = float(f)
    g = p.get("cluster_gpus")
    if g is not None:
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise GpuOpsError("cluster_gpus must be a positive integer (GPUs of the node sample), not %r" % (g,),
                              valid="integer >= 1")
        if p.get("sample_nodes") is not None:
            raise GpuOpsError("give at most one of sample_nodes (a uniform sample of nodes) and cluster_gpus (a "
                              "stratified, nested sample of about that many GPUs)")
    if not p.get("departures"):
        for key, default in (("load_factor", 1.0),):
            if p[key] != default:
                raise GpuOpsError("%s needs departures: true (it changes the pods' times)" % key)


PRE_EXISTING_MAX = 0.05  # share of the pods created before the first deletion that marks a recording's start


def window_start(seq: Sequence[Any]) -> float:
    """The active window's start: the trace's first deletion when at most ``PRE_EXISTING_MAX`` (5 %) of the pods
    were created before it (a recording that began with them running), else the first creation."""
    first = min(p.creation_time for p in seq)
    dels = [p.deletion_time for p in seq if p.deletion_time is not None]
    if dels and min(dels) > first:
        before = sum(1 for p in seq if p.creation_time < min(dels))
        if before <= PRE_EXISTING_MAX * len(seq):
            return min(dels)
    return first


def retime(seq: Sequence[Any], window: str = "active", factor: float = 1.0) -> Tuple[List[Any], float]:
    """``(pods with new times, end)``: the window and the load factor applied (see the module doc). ``end`` is the
    replay's end: the latest creation or deletion time of the result."""
    if not seq:
        return [], 0.0
    whole = window == "whole"
    if whole and factor == 1.0:
        out = list(seq)
    else:
        start = min(p.creation_time for p in seq) if whole else window_start(seq)
        out = []
        for p in seq:
            c0 = max(p.creation_time, start)
            c = start + (c0 - start) / factor
            d = None if p.deletion_time is None else c + (p.deletion_time - c0)
            out.append(p._replace(creation_time=c, deletion_time=d))
    deletions = [p.deletion_time for p in out if p.deletion_time is not None]
    end = max(max(p.creation_time for p in out), max(deletions or [0.0]))
    return out, end


def nested_order(nodes: Sequence[Any], seed: int) -> List[Any]:
    """The node list in the order whose prefixes are the nested samples of ``seed`` (see the module doc)."""
    rng = random.Random("cluster-gpus-%d" % seed)
    strata = {}
    for n in nodes:
        if n.gpus:
            strata.setdefault(n.model, []).append(n)
    cpu_only = [n for n in nodes if not n.gpus]
    total = float(sum(n.gpus for n in nodes))
    if not total:
        raise GpuOpsError("cluster_gpus: none of the %d nodes has a GPU" % len(nodes))
    share = dict((m, sum(n.gpus for n in ns) / total) for m, ns in strata.items())
    for m in sorted(strata):
        rng.shuffle(strata[m])
    pos = dict((m, 0) for m in strata)
    have = dict((m, 0) for m in strata)
    got = 0
    order = []
    while len(order) < total and any(pos[m] < len(strata[m]) for m in strata):
        best: Any = None  # (behind, model) once a model with nodes left is seen
        for m in sorted(strata):
            if pos[m] >= len(strata[m]):
                continue
            nxt = strata[m][pos[m]]
            # how far below its share the model would be after this node (larger: more behind)
            behind = share[m] * (got + nxt.gpus) - have[m]
            if best is None or behind > best[0]:
                best = (behind, m)
        m = best[1]
        n = strata[m][pos[m]]
        pos[m] += 1
        have[m] += n.gpus
        got += n.gpus
        order.append(n)
    rng.shuffle(cpu_only)
    if not cpu_only:
        return order
    out = []
    gpu_nodes = len(order)
    j = 0
    for i, n in enumerate(order):
        out.append(n)
        while j < len(cpu_only) and j < (i + 1) * len(cpu_only) // gpu_nodes:
            out.append(cpu_only[j])
            j += 1
    return out + cpu_only[j:]


def prefix_for(order: Sequence[Any], gpus: float) -> int:
    """The number of nodes of ``order`` whose prefix is the shortest with at least ``gpus`` GPUs (all of them when
    the nodes hold fewer)."""
    got = 0
    for i, n in enumerate(order):
        got += n.gpus
        if got >= gpus:
            k = i + 1
            while k < len(order) and not order[k].gpus:
                k += 1  # the CPU-only nodes that follow belong to the sample
            return k
    return len(order)


def sample_gpus(nodes: Sequence[Any], gpus: float, seed: int) -> List[Any]:
    """The nested, stratified sample of about ``gpus`` GPUs of ``seed``, in the node list's order."""
    order = nested_order(nodes, seed)
    keep = set(id(n) for n in order[:prefix_for(order, gpus)])
    return [n for n in nodes if id(n) in keep]
