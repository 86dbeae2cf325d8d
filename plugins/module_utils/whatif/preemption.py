# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pod priority and preemption for the replay with departures (``gpu_whatif`` option ``priorities``).

Priorities: the trace's ``qos`` column mapped to integers (``priorities``: ``{qos: integer}``, or ``default``
for DEFAULT_PRIORITIES). A pod without a ``qos`` gets priority 0 (a Kubernetes pod without a
priorityClassName when no class is the global default); a ``qos`` the mapping does not name fails, naming
the values it has. Without ``priorities`` every pod has priority 0 and nothing is ever preempted (the replay
is the FIFO one of departures.py).

With priorities (kube-scheduler's PrioritySort and DefaultPreemption plugins, v1.37):

* the pending queue is retried highest priority first, then in the order the pods joined it;
* a pod that fits nowhere looks for a node where evicting pods of *strictly lower* priority makes it fit
  (DryRunPreemption). The nodes are examined from a random (seeded) offset and the search stops after
  ``max(100, 10 % of the nodes)`` candidate nodes (minCandidateNodesAbsolute, minCandidateNodesPercentage);
* on one node (selectVictimsOnNode) every lower-priority pod is removed; if the pod then fits, the removed
  pods are given back one at a time, most important first (higher priority, then earlier start), and each
  one the pod still fits beside stays (is *reprieved*); the others are the victims;
* among the candidate nodes (pickOneNodeForPreemption), in this order: fewest PodDisruptionBudget
  violations (the trace has no PDBs: always 0, so this rule never decides), the lowest priority of the
  highest-priority victim, the lowest sum of victim priorities (each shifted by 2^31, as kube-scheduler
  does, so that more victims weigh more), the fewest victims, the latest start of the highest-priority
  victims, then the first node examined;
* the victims leave at once (a graceful termination of 0 s) and go back to the pending queue, keeping
  their ``deletion_time`` (their controller re-creates them); the preempting pod binds on that node at the
  same instant (kube-scheduler nominates it there and binds it once the victims are gone).

Why that order: it is kube-scheduler's own, so the replay answers "what would our cluster do" rather than
"what would an ideal preemptor do". It minimises the priority harmed first and the number of pods second.

Pure Python over the engine's numpy arrays; controller side only.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

try:
    import numpy as np
except ImportError:  # pragma: no cover - engine.need_numpy reports it
    np = None  # type: ignore[assignment]

# The trace's qos values (Alibaba: LS latency-sensitive, BE best-effort; Kubernetes' Guaranteed and Burstable
# QoS classes): latency-sensitive and guaranteed pods above burstable, best-effort lowest.
DEFAULT_PRIORITIES = {"LS": 1000, "Guaranteed": 1000, "Burstable": 500, "BE": 0}
MIN_CANDIDATES = 100
CANDIDATE_PCT = 10
SHIFT = 2 ** 31  # kube-scheduler adds MaxInt32 + 1 to each priority before summing
MILLI = 1000
INT32_MIN, PRIORITY_MAX = -(2 ** 31), 10 ** 9  # user PriorityClasses: values up to one billion


def check_priorities(value: Any) -> Optional[Dict[str, int]]:
    """The ``priorities`` option -> ``{qos: int}`` or None (no priorities)."""
    if value is None or value is False:
        return None
    if value == "default" or value is True:
        return dict(DEFAULT_PRIORITIES)
    if not isinstance(value, dict) or not value:
        raise GpuOpsError("priorities must be a mapping {qos: integer} (e.g. %s) or 'default', not %r"
                          % (DEFAULT_PRIORITIES, value), valid="mapping qos -> integer, or 'default'")
    out: Dict[str, int] = {}
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, int) or not INT32_MIN <= v <= PRIORITY_MAX:
            raise GpuOpsError("priorities.%s must be an integer in [%d, %d], not %r" % (k, INT32_MIN, PRIORITY_MAX, v),
                              valid="integer")
        out[str(k)] = v
    return out


def pod_priorities(seq: Iterable[Any], mapping: Mapping[str, int]) -> List[int]:
    """Priority per pod of ``seq`` (0 without a qos); an unknown qos fails naming the mapping's values."""
    out: List[int] = []
    for p in seq:
        if p.qos is None:
            out.append(0)
            continue
        v = mapping.get(p.qos)
        if v is None:
            raise GpuOpsError("pod %s has qos %r, which priorities does not map; its qos values are: %s"
                              % (p.name, p.qos, ", ".join(sorted(mapping))), pod=p.name, qos=p.qos,
                              valid=sorted(mapping))
        out.append(v)
    return out


class _NodeView(object):
    """What one node would have left with some of its pods removed (no change to the engine)."""

    def __init__(self, e: Any, node: int) -> None:
        self.e = e
        self.cpu = int(e.cpu_left[node])
        self.mem = int(e.mem_left[node])
        self.pods = int(e.pods_left[node])
        self.slice = hasattr(e, "nf")
        self.gpu = e.nf[node].copy() if self.slice else e.gl[node].copy()

    def change(self, arrival: Sequence[Any], gpus: Any, sign: int) -> None:
        cpu, mem, num, milli = arrival[:4]
        self.cpu += sign * cpu
        self.mem += sign * mem
        self.pods += sign
        if num:
            if self.slice:
                q, per_unit = gpus
                self.gpu[q] += sign * len(per_unit)
            else:
                for i in gpus:
                    self.gpu[i] += sign * milli

    def fits(self, cpu: int, mem: int, num: int, milli: int, q: int) -> bool:
        if self.cpu < cpu or self.mem < mem or self.pods <= 0:
            return False
        if not num:
            return True
        if self.slice:
            return q >= 0 and self.gpu[q] >= num
        if num == 1 and milli < MILLI:
            return int(self.gpu.max()) >= milli
        return int((self.gpu == MILLI).sum()) >= num


class Preemptor(object):
    """Preemption for one DepartureReplay ``dr`` (attach first). ``prio``: priority per arrival."""

    def __init__(self, prio: Iterable[int], seed: Any = 0) -> None:
        self.prio = list(prio)
        self.rng = random.Random("preempt-%s" % seed)
        self.on_node: Dict[int, Dict[int, None]] = {}  # node -> {arrival: None}
        self.evictions = 0
        self.dr: Any = None  # the DepartureReplay (attach)
        self.levels = sorted(set(self.prio))
        index = dict((v, i) for i, v in enumerate(self.levels))
        self.level = [index[v] for v in self.prio]
        self.count: Any = None  # np.ndarray [level, node]: pods running

    def attach(self, dr: Any) -> None:
        self.dr = dr
        self.count = np.zeros((len(self.levels), dr.e.c.n), dtype=np.int64)

    # ------------------------------------------------------------------ bookkeeping hooks
    def bound(self, k: int, node: int) -> None:
        self.on_node.setdefault(node, {})[k] = None
        self.count[self.level[k], node] += 1

    def left(self, k: int, node: int) -> None:
        del self.on_node[node][k]
        self.count[self.level[k], node] -= 1

    def order(self, pending: Iterable[int]) -> List[int]:
        """Pending pods, highest priority first, then in queue order (a stable sort)."""
        return sorted(pending, key=lambda k: -self.prio[k])

    # ------------------------------------------------------------------ preemption
    def _victims(self, e: Any, node: int, k: int, q: int) -> Optional[List[int]]:
        """Victims on ``node`` for arrival ``k`` (sorted most important first) or None when it cannot fit."""
        pk = self.prio[k]
        cpu, mem, num, milli = e.arrivals[k][:4]
        lower = [j for j in self.on_node.get(node, ()) if self.prio[j] < pk]
        if not lower:
            return None
        view = _NodeView(e, node)
        where = self.dr.where
        for j in lower:
            view.change(e.arrivals[j], where[j][1], +1)
        if not view.fits(cpu, mem, num, milli, q):
            return None
        start = self.dr.started
        lower.sort(key=lambda j: (-self.prio[j], start(j), j))
        victims: List[int] = []
        for j in lower:
            view.change(e.arrivals[j], where[j][1], -1)
            if not view.fits(cpu, mem, num, milli, q):
                view.change(e.arrivals[j], where[j][1], +1)
                victims.append(j)
        return victims

    def candidates(self, k: int) -> List[Tuple[int, List[int]]]:
        """``[(node, victims)]`` in the order examined (at most max(100, 10 % of the nodes) of them)."""
        dr = self.dr
        e = dr.e
        lvl = self.level[k]
        if lvl == 0:
            return []
        cpu, mem, num, milli, dummy_req, spec = e.arrivals[k]
        n = e.c.n
        ok = self.count[:lvl].sum(axis=0) > 0
        if num:
            ok &= e._spec(spec)
        ok &= self._unmasked(e)
        nodes = np.flatnonzero(ok)
        if len(nodes) == 0:
            return []
        want = min(n, max(MIN_CANDIDATES, n * CANDIDATE_PCT // 100))
        offset = self.rng.randrange(n)
        order = np.concatenate([nodes[nodes >= offset], nodes[nodes < offset]])
        qs = e.kind_nodes(milli) if (num and hasattr(e, "kind_nodes")) else None
        out: List[Tuple[int, List[int]]] = []
        for node in order:
            node = int(node)
            victims = self._victims(e, node, k, int(qs[node]) if qs is not None else -1)
            if victims is not None:
                out.append((node, victims))
                if len(out) >= want:
                    break
        return out

    def _unmasked(self, e: Any) -> Any:
        """Nodes that are in the cluster now (the autoscaler masks the others)."""
        asc = getattr(self.dr, "asc", None)
        if asc is None:
            return np.ones(e.c.n, dtype=bool)
        return asc.up.copy()

    def pick(self, cands: Sequence[Tuple[int, List[int]]]) -> Tuple[int, List[int]]:
        """kube-scheduler's pickOneNodeForPreemption over ``[(node, victims)]`` (victims most important first)."""
        start = self.dr.started
        best: Optional[Tuple[Tuple[Any, ...], int, List[int]]] = None
        for pos, (node, victims) in enumerate(cands):
            top = self.prio[victims[0]] if victims else INT32_MIN - 1
            tops = [j for j in victims if self.prio[j] == top]
            key = (0,  # PDB violations: the trace has none
                   top,
                   sum(self.prio[j] + SHIFT for j in victims),
                   len(victims),
                   -min(start(j) for j in tops) if tops else 0.0,
                   pos)
            if best is None or key < best[0]:
                best = (key, node, victims)
        if best is None:
            raise GpuOpsError("preemption: pick needs at least one candidate node")
        return best[1], best[2]

    def preempt(self, k: int, t: float) -> int:
        """Evict for arrival ``k`` at ``t``; the node it now fits on, or -1."""
        cands = self.candidates(k)
        if not cands:
            return -1
        node, victims = self.pick(cands)
        for j in victims:
            self.dr.evict(j, t)
            self.evictions += 1
        return node


def check_fit(e: Any, node: int, k: int) -> None:
    """True when arrival ``k`` fits on ``node`` now (a guard after the victims left)."""
    cpu, mem, num, milli, dummy_req, spec = e.arrivals[k]
    f = e.feasible(cpu, mem, num, milli, spec)
    if not f[node]:
        raise GpuOpsError("preemption: pod %d does not fit on node %s after its victims left" % (k, e.c.names[node]))


def by_priority(dr: Any, percentile: Callable[[List[float], float], Optional[float]]) -> Dict[str, Dict[str, Any]]:
    """Per priority: pods, served % (GPU-time), pods never placed, start delay p95 (s), pods preempted.

    ``percentile``: departures.percentile (passed in: this module does not import departures)."""
    groups: Dict[int, Dict[str, Any]] = {}
    prio = dr.pre.prio
    for k, p in enumerate(dr.seq):
        g = groups.setdefault(prio[k], {"pods": 0, "req": 0.0, "served": 0.0, "never": 0, "delays": [],
                                        "preempted": 0})
        g["pods"] += 1
        gpus = dr.arr[k][4] / float(MILLI)
        stop = min(dr._deletion(k), dr.end)
        g["req"] += gpus * max(stop - p.creation_time, 0.0)
        b = dr.bind[k]
        if b is None:
            g["never"] += 1
            continue
        g["served"] += gpus * dr.run_seconds(k, stop)
        g["delays"].append(b - p.creation_time)
        if k in dr.evicted_run:
            g["preempted"] += 1
    out: Dict[str, Dict[str, Any]] = {}
    for v in sorted(groups, reverse=True):
        g = groups[v]
        d95 = percentile(g["delays"], 95)
        out[str(v)] = {"pods": g["pods"],
                       "served_pct": round(100.0 * g["served"] / g["req"], 3) if g["req"] > 0 else None,
                       "pods_never_placed": g["never"],
                       "start_delay_p95_s": None if d95 is None else round(d95, 1),
                       "pods_preempted": g["preempted"]}
    return out
