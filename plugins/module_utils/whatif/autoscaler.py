# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Elastic capacity for the replay with departures (``gpu_whatif`` option ``autoscaler``), with Cluster
Autoscaler's semantics.

* **Node groups** are the node shapes of the sample (GPU model, GPU count, CPU, memory, pod slots). The
  *pool* holds ``max_nodes`` nodes (default: the sample's node count): the sample itself, or a seeded
  subset of it when ``max_nodes`` is smaller, or the sample followed by copies of its nodes (``name~2``, ...)
  when larger. A pool node is *up* (in the cluster), *booting* (asked for, not yet Ready) or *absent*.
  Absent and booting nodes are masked (no pod slot left), so the engines do not change and cost nothing
  when the option is off.
* At the start ``min_nodes`` nodes of the pool are up (the first of a seeded order of the pool).
* **Scale-up.** Whenever pods are pending (after the retries and arrivals of an instant: CA's 10 s scan is
  not modelled), each pending pod not yet *covered* by a booting node (queue order) is first packed, first
  fit, into the booting nodes (CPU, memory, pod slots and the milli-GPU per GPU of a node of that shape:
  CA's binpacking estimator); if none holds it, one more node is asked for from the node group whose empty
  node fits the pod with the least waste (fewest GPUs left idle, then CPU, then memory: CA's
  ``least-waste`` expander, on GPUs first), as long as the pool has an absent node of that group. A booting
  node becomes up ``scale_up_delay_s`` later; the pods it covered are then retried with the others, by the
  real scheduler (on MIG modes the estimate counts shares, the scheduler slices: a pod the estimate placed
  may still not fit, and asks again).
* **Scale-down.** A node that is up and has no pod for ``scale_down_after_s`` (CA's
  scale-down-unneeded-time) is removed, unless that would leave fewer than ``min_nodes`` nodes up. Only
  empty nodes are removed: CA also drains under-used nodes whose pods fit elsewhere; this does not (a
  conservative autoscaler), and there is no scale-down-delay-after-add.
* **Provisioned GPUs** are those of the nodes up or booting (a cloud bills a node from its creation).

Pure Python over the engine's numpy arrays; controller side only.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

try:
    import numpy as np
except ImportError:  # pragma: no cover - engine.need_numpy reports it
    np = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.data import Node
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.engine import Cluster

MILLI = 1000
SCALE = 6  # event type of departures.py (after its own; ordering within an instant does not matter for it)


def pool_nodes(nodes: Sequence[Node], cfg: Mapping[str, Any], seed: Any) -> Tuple[List[Node], List[int]]:
    """``(pool, initial)``: the pool's Node list and the indices of the nodes up at the start."""
    size = cfg["max_nodes"] if cfg["max_nodes"] is not None else len(nodes)
    rng = random.Random("autoscaler-%s" % seed)
    if size <= len(nodes):
        keep = set(rng.sample(range(len(nodes)), size))
        pool = [n for i, n in enumerate(nodes) if i in keep]
    else:
        pool = list(nodes)
        copy = 2
        while len(pool) < size:
            for n in nodes[:size - len(pool)]:
                pool.append(n._replace(name="%s~%d" % (n.name, copy)))
            copy += 1
    order = list(range(len(pool)))
    rng.shuffle(order)
    return pool, sorted(order[:min(cfg["min_nodes"], len(pool))])


class _Boot(object):
    """A booting node as the scale-up estimate sees it."""

    def __init__(self, c: Cluster, node: int) -> None:
        self.node = node
        self.cpu = int(c.cpu[node])
        self.mem = int(c.mem[node])
        self.pods = int(c.pods[node])
        self.gpu = [MILLI] * int(c.ngpu[node])

    def take(self, cpu: int, mem: int, num: int, milli: int) -> bool:
        """Pack one pod (first fit over the GPUs); False when it does not fit."""
        if self.cpu < cpu or self.mem < mem or self.pods < 1:
            return False
        if num:
            if num == 1 and milli < MILLI:
                fit = [i for i, g in enumerate(self.gpu) if g >= milli][:1]
            else:
                fit = [i for i, g in enumerate(self.gpu) if g == MILLI][:num]
            if len(fit) < num:
                return False
            for i in fit:
                self.gpu[i] -= milli if num == 1 else MILLI
        self.cpu -= cpu
        self.mem -= mem
        self.pods -= 1
        return True


class Autoscaler(object):
    """The autoscaler of one DepartureReplay on an engine built on the pool (``cluster``)."""

    def __init__(self, cfg: Mapping[str, Any], cluster: Cluster, initial: Iterable[int]) -> None:
        self.delay = float(cfg["scale_up_delay_s"])
        self.after = float(cfg["scale_down_after_s"])
        self.min_nodes = int(cfg["min_nodes"])
        self.c = cluster
        n = cluster.n
        self.up = np.zeros(n, dtype=bool)
        self.up[list(initial)] = True
        self.booting: Dict[int, _Boot] = {}  # node -> _Boot
        self.covered: Dict[int, int] = {}  # pending pod -> booting node
        self.empty_since: List[Optional[float]] = [None] * n
        keys = [(x.model, x.gpus, x.cpu_milli, x.memory_mib, x.pods) for x in cluster.nodes]
        gid: Dict[Tuple[Any, ...], int] = {}
        self.group = [gid.setdefault(k, len(gid)) for k in keys]
        # absent nodes per group, lowest index first (a stack, reversed)
        self.free: List[List[int]] = [[] for dummy in gid]
        for i in range(n - 1, -1, -1):
            if not self.up[i]:
                self.free[self.group[i]].append(i)
        self.rep = [self.group.index(g) for g in range(len(gid))]  # a node of each group (its template)
        self.scale_ups = 0
        self.scale_downs = 0
        self.nodes_peak = int(self.up.sum())
        self.dr: Any = None  # the DepartureReplay (attach)
        self.slots: Any = None  # np.ndarray: pods per node when up

    # ------------------------------------------------------------------ state
    def attach(self, dr: Any) -> None:
        self.dr = dr
        e = dr.e
        self.slots = self.c.pods.copy()
        e.pods_left[~self.up] = 0
        self._provisioned()
        for node in np.flatnonzero(self.up):
            self._empty(int(node), dr.start)

    def _provisioned(self) -> None:
        gpus = int(self.c.ngpu[self.up].sum()) + sum(int(self.c.ngpu[b]) for b in self.booting)
        self.dr.provisioned = gpus
        self.nodes_peak = max(self.nodes_peak, int(self.up.sum()) + len(self.booting))

    def _empty(self, node: int, t: float) -> None:
        self.empty_since[node] = t
        self.dr.push(t + self.after, SCALE, ("down", node, t))

    # ------------------------------------------------------------------ hooks of DepartureReplay
    def bound(self, node: int) -> None:
        self.empty_since[node] = None

    def left(self, node: int, t: float) -> None:
        if self.dr.e.pods_left[node] == self.slots[node]:
            self._empty(node, t)

    def event(self, payload: Tuple[Any, ...], t: float) -> bool:
        """A node becomes Ready (returns True: pods may fit) or an idle check falls due."""
        if payload[0] == "up":
            node = payload[1]
            del self.booting[node]
            self.up[node] = True
            self.dr.e.pods_left[node] = self.slots[node]
            for k in [k for k, b in self.covered.items() if b == node]:
                del self.covered[k]
            self._provisioned()
            self._empty(node, t)
            return True
        dummy, node, since = payload
        if self.up[node] and self.empty_since[node] == since and int(self.up.sum()) > self.min_nodes:
            self.up[node] = False
            self.dr.e.pods_left[node] = 0
            self.free[self.group[node]].append(node)
            self.empty_since[node] = None
            self.scale_downs += 1
            self._provisioned()
        return False

    # ------------------------------------------------------------------ scale-up
    def _fits_empty(self, g: int, cpu: int, mem: int, num: int, milli: int, spec: Any) -> bool:
        i = self.rep[g]
        x = self.c.nodes[i]
        if (x.cpu_milli is not None and x.cpu_milli < cpu) or (x.memory_mib is not None and x.memory_mib < mem):
            return False
        if x.pods is not None and x.pods < 1:
            return False
        if num:
            if not x.gpus or (spec and x.model not in spec):
                return False
            return x.gpus >= num
        return True

    def _waste(self, g: int, num: int, milli: int, cpu: int, mem: int) -> Tuple[float, int, int, int]:
        x = self.c.nodes[self.rep[g]]
        gpus = x.gpus - num * milli / float(MILLI)
        return (gpus, (x.cpu_milli or 0) - cpu, (x.memory_mib or 0) - mem, g)

    def scale_up(self, t: float, pending: Iterable[int]) -> None:
        """Ask for nodes for the pending pods not covered yet (``pending``: in queue order)."""
        if not any(self.free):
            return
        arr = self.dr.e.arrivals
        hopeless = set()
        for k in pending:
            if k in self.covered:
                continue
            cpu, mem, num, milli, dummy_req, spec = arr[k]
            shape = (cpu, mem, num, milli, spec)
            if shape in hopeless:
                continue
            boot = next((b for b in self.booting.values() if b.take(cpu, mem, num, milli)), None)
            if boot is None:
                groups = [g for g in range(len(self.free)) if self.free[g] and self._fits_empty(g, cpu, mem, num, milli, spec)]
                if not groups:
                    hopeless.add(shape)
                    continue
                g = min(groups, key=lambda x: self._waste(x, num, milli, cpu, mem))
                node = self.free[g].pop()
                boot = _Boot(self.c, node)
                boot.take(cpu, mem, num, milli)
                self.booting[node] = boot
                self.scale_ups += 1
                self.dr.push(t + self.delay, SCALE, ("up", node))
                self._provisioned()
            self.covered[k] = boot.node
