# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Capacity search (``gpu_whatif`` option ``capacity_search``, with ``departures: true``): for each strategy
(``sharing`` x ``scoring``) and seed, the fewest GPUs of the seed's nested node samples (load.py) whose replay
meets the service target.

* Target (any subset): ``served_pct`` (GPU-time served, of the GPU-time requested, >=), ``start_delay_p95_s``
  (95th percentile of the wait of the pods placed, <=), ``never_placed_pct`` (pods never placed, of the pods,
  <=). Default: ``served_pct`` 99 alone when the mapping is empty.
* The workload is the same at every size: the arrival sequence of a seed is drawn against the whole node list
  (``inflation``), then ``window`` and ``load_factor`` (load.py).
* Sizes are prefixes of the seed's nested node order; the search assumes that a larger sample never serves
  worse (capacity is monotone; the scheduling nearly so). It starts at the GPUs the previous seed needed (the
  first seed: at the peak concurrent GPU request), gallops (steps of 5 %, doubling) to a bracket, then bisects until the bracket is one
  node or ``RESOLUTION`` (5 %) of the GPUs wide (well inside the spread over seeds), and reports its upper end.
* A replay stops early once the target cannot be met any more: the GPU-time lost to waiting exceeds what the
  served target allows, more pods were deleted while pending than the never-placed target allows, or more pods
  started late than the p95 allows (each a bound that only grows).
* A target not met with every node is reported as ``met: false`` at the largest size, not as an error.

Per run and seed (``capacity.per_seed``): ``gpus``, ``nodes``, ``met``, ``usd_per_hour`` (the sample's GPUs at
catalog prices or ``prices``; None when a model has no price), ``utilisation_pct`` (requested / provisioned
GPU-time), ``held_pct`` (GPU-time held / provisioned), ``node_hours_held``, the served figures at that size and
``replays`` (how many replays the search took). ``capacity`` holds the means over the seeds, ``spread`` and
``met`` (every seed met the target).

Requires numpy (the engines); controller side only.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import departures
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import load
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import prepare
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import trace_models

TARGETS = ("served_pct", "start_delay_p95_s", "never_placed_pct")
DEFAULT_TARGET = {"served_pct": 99.0}
RESOLUTION = 0.05
CHECKS = 200  # early-stop checks per replay
FIELDS = ("gpus", "nodes", "usd_per_hour", "utilisation_pct", "held_pct", "node_hours_held", "served_pct",
          "served_pods_pct", "start_delay_p95_s", "never_placed_pct", "gpu_hours_provisioned", "replays")


def check(value: Any) -> Optional[Dict[str, float]]:
    """The ``capacity_search`` option -> ``{target: value}`` (None: no search)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise GpuOpsError("capacity_search must be a mapping with any of %s (e.g. {served_pct: 99}), not %r"
                          % (", ".join(TARGETS), value), valid=list(TARGETS))
    out = {}
    for k, v in value.items():
        if k not in TARGETS:
            raise GpuOpsError("capacity_search: unknown target %r; the targets are: %s" % (k, ", ".join(TARGETS)),
                              valid=list(TARGETS))
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise GpuOpsError("capacity_search.%s must be a number >= 0, not %r" % (k, v), valid=">= 0")
        if k != "start_delay_p95_s" and v > 100:
            raise GpuOpsError("capacity_search.%s is a percentage: 0..100, not %r" % (k, v), valid="0..100")
        out[k] = float(v)
    return out or dict(DEFAULT_TARGET)


class Hopeless(Exception):
    """Raised inside a replay once its target can no longer be met."""


class BoundedReplay(departures.DepartureReplay):
    """A DepartureReplay that stops (raises Hopeless) as soon as ``target`` cannot be met any more."""

    def __init__(self, engine, seq, end, target, replanner=None, preemptor=None, autoscaler=None):
        departures.DepartureReplay.__init__(self, engine, seq, end, replanner, preemptor=preemptor, autoscaler=autoscaler)
        from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

        np = whatif_engine.np
        self.np = np
        self.target = target
        n = len(seq)
        self.c_arr = np.array([p.creation_time for p in seq], dtype=np.float64)
        self.d_arr = np.array([min(self._deletion(k), self.end) for k in range(n)], dtype=np.float64)
        self.g_arr = np.array([a[4] / departures.MILLI for a in self.arr], dtype=np.float64)
        self.b_arr = np.full(n, np.nan)
        req = float((self.g_arr * np.maximum(self.d_arr - self.c_arr, 0.0)).sum())
        self.lost_max = None
        if "served_pct" in target:
            self.lost_max = (1.0 - target["served_pct"] / 100.0) * req * (1 + 1e-9) + 1e-6
        self.never_max = None
        if "never_placed_pct" in target:
            self.never_max = target["never_placed_pct"] / 100.0 * n
        self.late_max = None
        if "start_delay_p95_s" in target:
            self.late_max = 0.05 * n + 1
        self.every = max((self.end - self.start) / CHECKS, 1.0)
        self.next_check = self.start + self.every

    def _try(self, k, t):
        ok = departures.DepartureReplay._try(self, k, t)
        if ok and self.np.isnan(self.b_arr[k]):  # the first binding (a preempted pod binds again later)
            self.b_arr[k] = t
        return ok

    def _advance(self, t):
        departures.DepartureReplay._advance(self, t)
        if t >= self.next_check:
            self.next_check = t + self.every
            self.check_hopeless(t)

    def check_hopeless(self, t: float) -> None:
        np = self.np
        if self.never_max is not None and self.deleted_pending > self.never_max:
            raise Hopeless()
        bound = ~np.isnan(self.b_arr)
        if self.lost_max is not None:
            arrived = self.c_arr <= t
            upto = np.where(bound, self.b_arr, np.minimum(self.d_arr, t))
            lost = float((self.g_arr * np.maximum(upto - self.c_arr, 0.0))[arrived].sum())
            if lost > self.lost_max:
                raise Hopeless()
        if self.late_max is not None:
            late = int((bound & (self.b_arr - self.c_arr > self.target["start_delay_p95_s"])).sum())
            if late >= self.late_max:
                raise Hopeless()


class _NoFrag(object):
    """The fragmentation measure, skipped: a replay with departures reads it only to score ``fgd``."""

    def update(self, *args: Any) -> None:
        return None


def meets(summary: Mapping[str, Any], target: Mapping[str, float], pods: int) -> bool:
    if "served_pct" in target and (summary["served_pct"] is None or summary["served_pct"] < target["served_pct"]):
        return False
    if "start_delay_p95_s" in target and (summary["pending_p95_s"] or 0.0) > target["start_delay_p95_s"]:
        return False
    if "never_placed_pct" in target and 100.0 * summary["pods_never_placed"] / max(pods, 1) > target["never_placed_pct"]:
        return False
    return True


def peak_request(seq: Sequence[Any]) -> float:
    """The peak of the concurrent GPU request (GPUs) of the pods' own times."""
    ev = []
    for p in seq:
        g = p.num_gpu * p.gpu_milli / 1000.0
        if not g:
            continue
        ev.append((p.creation_time, 1, g))
        if p.deletion_time is not None:
            ev.append((p.deletion_time, 0, -g))
    ev.sort()
    now = peak = 0.0
    for dummy_t, dummy_o, g in ev:
        now += g
        peak = max(peak, now)
    return peak


class Prober(object):
    """The replays of one strategy and seed at the sizes (prefixes of ``order``) the search asks for."""

    def __init__(self, p, pods, order, seq, end, rng_state, sharing, scoring, target, build):
        self.build = build
        self.p, self.pods, self.order, self.seq, self.end = p, pods, order, seq, end
        self.rng_state, self.sharing, self.scoring, self.target = rng_state, sharing, scoring, target
        self.cum = []
        got = 0
        for n in order:
            got += n.gpus
            self.cum.append(got)
        self.cache = {}
        self.replays = 0
        self.pos = dict((id(n), i) for i, n in enumerate(order))

    def gpus(self, k: int) -> int:
        return self.cum[k - 1] if k > 0 else 0

    def nodes(self, k: int) -> List[Any]:
        chosen = self.order[:k]
        return sorted(chosen, key=lambda n: n.name)

    def summary(self, k: int) -> Optional[Dict[str, Any]]:
        """The summary at ``k`` nodes, or None when it stopped early (the target cannot be met)."""
        if k in self.cache:
            return self.cache[k]
        from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

        out = None
        if self.gpus(k) > 0:
            nodes = self.nodes(k)
            cluster = whatif_engine.Cluster(nodes)
            rng = random.Random()
            rng.setstate(self.rng_state)
            eng, rp = self.build(cluster, nodes, self.pods, self.seq, rng, self.scoring, self.sharing, self.p)
            if self.scoring != "fgd":
                eng.frag = _NoFrag()
            self.replays += 1
            pre = None
            if self.p.get("priorities"):
                from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import preemption

                pre = preemption.Preemptor(preemption.pod_priorities(self.seq, self.p["priorities"]), seed=k)
            asc = None
            if self.p.get("autoscaler") is not None:  # the sample is the pool the autoscaler may bring up
                from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import autoscaler

                cfg = dict(self.p["autoscaler"], max_nodes=None)
                dummy_pool, initial = autoscaler.pool_nodes(nodes, cfg, k)
                asc = autoscaler.Autoscaler(cfg, cluster, initial)
            dr = BoundedReplay(eng, self.seq, self.end, self.target, rp, preemptor=pre, autoscaler=asc)
            for hook in (pre, asc):
                if hook is not None:
                    hook.attach(dr)
            try:
                dr.run()
                out = departures.summarise(dr)
                out["_met"] = meets(out, self.target, len(self.seq))
                out["_nodes"] = nodes
            except Hopeless:
                out = None
        self.cache[k] = out
        return out

    def met(self, k: int) -> bool:
        s = self.summary(k)
        return bool(s and s["_met"])

    def search(self, guess_gpus: Optional[float] = None) -> Tuple[int, bool]:
        """``(k, met)``: the fewest nodes of the order that meet the target (the largest size when none does)."""
        n = len(self.order)
        if guess_gpus is None:
            guess_gpus = peak_request(self.seq)
        k = min(max(load.prefix_for(self.order, guess_gpus), 1), n)
        lo, hi = 0, None  # lo: fails (0 nodes fail), hi: meets
        step = max(1, int(k * RESOLUTION))
        if self.met(k):
            hi = k
            while hi - step > lo:
                if self.met(hi - step):
                    hi -= step
                    step *= 2
                else:
                    lo = hi - step
                    break
        else:
            lo = k
            while hi is None:
                if lo >= n:
                    return n, False
                k = min(lo + step, n)
                if self.met(k):
                    hi = k
                else:
                    lo = k
                    step *= 2
        while hi - lo > 1 and self.gpus(hi) - self.gpus(lo) > RESOLUTION * self.gpus(hi):
            mid = (lo + hi) // 2
            if self.met(mid):
                hi = mid
            else:
                lo = mid
        return hi, True


def at_size(prober: Any, k: int, met: bool, prices: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    s = prober.summary(k)
    if s is None:  # the largest size stopped early: replay it to the end for its figures
        saved_target = prober.target
        prober.target = {}
        prober.cache.pop(k, None)
        try:
            s = prober.summary(k)
        finally:
            prober.target = saved_target
    nodes = s["_nodes"]
    per_gpu: List[Any] = [trace_models.price_of(nd.model, prices) for nd in nodes for dummy in range(nd.gpus)]
    usd = round(sum(per_gpu), 2) if per_gpu and all(x is not None for x in per_gpu) else None
    cap = {"gpus": prober.gpus(k), "nodes": k, "met": met, "usd_per_hour": usd,
           "utilisation_pct": s["utilisation_pct"], "held_pct": s["held_pct"], "node_hours_held": s["node_hours_held"],
           "served_pct": s["served_pct"], "served_pods_pct": s["served_pods_pct"],
           "start_delay_p95_s": s["pending_p95_s"],
           "never_placed_pct": round(100.0 * s["pods_never_placed"] / max(len(prober.seq), 1), 3),
           "gpu_hours_provisioned": s["gpu_hours_provisioned"], "replays": prober.replays}
    summary = dict((key, v) for key, v in s.items() if not key.startswith("_"))
    return cap, summary


def combine(caps: Sequence[Mapping[str, Any]], seeds: Sequence[int]) -> Dict[str, Any]:
    out = prepare.combine(caps, seeds, FIELDS) if len(caps) > 1 else dict(caps[0])
    out["met"] = all(c["met"] for c in caps)
    out["met_seeds"] = sum(1 for c in caps if c["met"])
    return out


def search(p: Mapping[str, Any], nodes_all: Sequence[Any], pods: Sequence[Any], target: Mapping[str, float],
           build: Callable[..., Any], progress: Optional[Callable[..., Any]] = None
           ) -> Tuple[List[Tuple[str, str]], Dict[Tuple[str, str], Dict[str, List[Any]]]]:
    """Per run: ``(capacity, summaries at the size found per seed)``; see the module doc. ``build(cluster, nodes,
    pods, seq, rng, scoring, sharing, p)`` -> ``(engine, replanner)`` (timed.build)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

    full = whatif_engine.Cluster(nodes_all)
    limit = p.get("cluster_gpus")
    combos = [(sh, sc) for sh in p["sharing"] for sc in p["scoring"]]
    found = dict((c, {"caps": [], "summaries": []}) for c in combos)
    guesses = {}
    for seed in p["seeds"]:
        order = load.nested_order(nodes_all, seed)
        if limit:
            order = order[:load.prefix_for(order, limit)]
        seq, rng0, dummy_a, dummy_r = prepare.arrivals_for(pods, full.total_milli, p, seed)
        seq, end = load.retime(seq, p["window"], p["load_factor"])
        state = rng0.getstate()
        for sharing, scoring in combos:
            pr = Prober(p, pods, order, seq, end, state, sharing, scoring, target, build)
            k, met = pr.search(guesses.get((sharing, scoring)))
            cap, summary = at_size(pr, k, met, p["prices"])
            cap["seed"] = seed
            guesses[(sharing, scoring)] = cap["gpus"]
            found[(sharing, scoring)]["caps"].append(cap)
            found[(sharing, scoring)]["summaries"].append(summary)
            if progress is not None:
                progress(seed, sharing, scoring, cap)
    return combos, found


class _Fluid(object):
    """The engine interface of departures.DepartureReplay over one pool of ``gpus`` perfectly divisible GPUs: a pod
    fits when its GPU request (``num_gpu`` x ``gpu_milli``, the trace's own) fits what the pool has left; CPU,
    memory, nodes and GPU models do not count."""

    def __init__(self, arrivals: Sequence[Any], gpus: int) -> None:
        from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

        np = whatif_engine.np
        self.arrivals = arrivals
        self.left = gpus * 1000.0
        self.size = gpus * 1000.0
        self.failed: List[int] = []
        self.pods_left = np.zeros(1, dtype=np.int64)
        self.c = type("FluidPool", (), {"total_gpus": gpus, "pods": np.ones(1, dtype=np.int64)})()
        self.last_gpus = None

    def choose(self, cpu: int, mem: int, num: int, milli: int, spec: Any) -> Tuple[int, Any]:
        return (0, None) if num * milli <= self.left + 1e-9 else (-1, None)

    def place(self, node: int, cpu: int, mem: int, num: int, milli: int, hint: Any) -> float:
        self.left -= num * milli
        return float(num * milli)

    def unplace(self, node: int, cpu: int, mem: int, num: int, milli: int, gpus: Any) -> float:
        self.left += num * milli
        return float(num * milli)

    def held_gpus(self) -> int:
        return int(math.ceil((self.size - self.left) / 1000.0 - 1e-9))


def ideal_gpus(seq: Sequence[Any], end: float, target: Mapping[str, float]) -> int:
    """The fewest GPUs at which the pods of ``seq`` (times retimed as the search replays them), perfectly divisible
    into one pool, meet ``target`` (FIFO pending queue as departures.py): the ideal every strategy is set against.
    At most the peak concurrent request rounded up (nothing waits there)."""
    arr = prepare.engine_arrivals(seq, "fractional")
    hi = max(int(math.ceil(peak_request(seq) - 1e-9)), 1)
    lo = 0  # fails (or nothing to serve)

    def met(g):
        try:
            dr = BoundedReplay(_Fluid(arr, g), seq, end, target).run()
        except Hopeless:
            return False
        return meets(departures.summarise(dr), target, len(seq))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if met(mid):
            hi = mid
        else:
            lo = mid
    return hi
