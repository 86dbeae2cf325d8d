# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The replay with departures (``gpu_whatif`` option ``departures: true``).

Pods arrive at their ``creation_time`` and leave at their ``deletion_time`` (the trace's seconds; a pod
without a deletion time stays to the end). Arrivals and departures are replayed as one time-ordered
event stream on the same engines as the FGD protocol (engine.MilliReplay, engine.SliceReplay):

* at one instant, departures (and MIG reconfigurations that end) come first, then the pending pods are
  retried, then the arrivals of that instant in the arrival sequence's order (``order``, ``inflation``:
  pods the inflation adds keep the times of the pod they copy);
* an arrival that fits nowhere waits in a pending queue; every time resources are freed the queue is
  retried in FIFO order (kube-scheduler moves its unschedulable pods back on cluster events and takes
  them in arrival order); a pod bound late still leaves at its ``deletion_time``;
* a pod still pending at its ``deletion_time`` was deleted while pending; a pod still pending at the
  end of the trace (the latest creation or deletion time) never ran: both are *never placed*;
* ``sharing: replanned`` (replanned.py) adds re-plans of the MIG layouts and GPUs that are
  unavailable while they are reconfigured.

Measured (``summarise``): GPU-hours *held* (GPUs with at least one pod, or being reconfigured, integrated
over time: what the cluster cannot give back), GPU-hours allocated (the milli or slices bound to pods),
requested and served GPU-hours (the trace's own request times the time a pod runs, within the trace's
end), served %, pods never placed, pending time (median, p95) and GPUs reconfigured per day; GPU-hours
*provisioned* (``provisioned_gpus()`` integrated like the GPUs held: the static cluster's GPUs unless a
subclass - an autoscaler - changes them over time), ``utilisation_pct`` (requested / provisioned GPU-time),
``held_pct``, node-hours held, served % by pod count and ``by_class`` (classes.py). Every rate and mean is over
the replayed window (``start`` .. ``end``; load.py makes the window and the load factor).

Requires numpy (the engines); controller side only.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.stats import percentile  # also departures.percentile

DEP, CFG, EXP, TICK, WAKE, ARR = 0, 1, 2, 3, 4, 5  # order of the events of one instant (ARR after the rest)
SCALE = 6  # autoscaler.py: a node Ready or an idle check (popped with the others before the instant's arrivals)
INF = float("inf")
MILLI = 1000.0
MAX_POINTS = 600  # timeline samples per run
SUMMARY_FIELDS = ("gpu_hours_held", "gpu_hours_allocated", "gpu_hours_requested", "gpu_hours_served", "served_pct",
                  "pods_never_placed", "pods_deleted_pending", "pods_waited", "pending_median_s", "pending_p95_s",
                  "pending_waited_median_s", "pending_waited_p95_s", "held_gpus_mean", "held_gpus_peak",
                  "reconfigured_gpus", "reconfigured_gpus_per_day", "replans", "planner_seconds",
                  "gpu_hours_provisioned", "utilisation_pct", "held_pct", "node_hours_held", "served_pods_pct")


def check_times(pods: Iterable[Any]) -> Optional[float]:
    """Every pod needs a creation time; returns the trace's end (the latest creation or deletion time)."""
    end = None
    for i, p in enumerate(pods):
        if p.creation_time is None:
            raise GpuOpsError("departures needs a creation_time on every pod; pod %d (%s) has none (the openb "
                              "multigpu* lists have no times: use departures: false with them)" % (i, p.name),
                              pod=p.name)
        for t in (p.creation_time, p.deletion_time):
            if t is not None and (end is None or t > end):
                end = t
    return end


class DepartureReplay(object):
    """One time-ordered replay. ``engine``: a MilliReplay or SliceReplay built on ``arrivals`` (the engine
    tuples of ``seq``); ``seq``: the Pod list (their times); ``end``: the trace's end (seconds);
    ``replanner``: a replanned.Replanner or None."""

    def __init__(self, engine, seq, end, replanner=None, step_s=None, preemptor=None, autoscaler=None):
        self.e = engine
        self.seq = seq
        self.arr = engine.arrivals
        self.end = float(end)
        self.start = min(p.creation_time for p in seq) if seq else 0.0
        self.rp = replanner
        span = max(self.end - self.start, 1.0)
        self.step = step_s or max(3600.0, math.ceil(span / MAX_POINTS / 3600.0) * 3600.0)
        n = len(seq)
        self.bind = [None] * n
        self.where = {}  # k -> (node, gpus, allocated milli)
        self.pending = {}  # k -> None, insertion (FIFO) order
        self.deleted_pending = 0
        self.heap = []
        self.allocated = 0.0
        self.counter = 0
        self.integral = {"held": 0.0, "allocated": 0.0, "reconf": 0.0, "provisioned": 0.0, "nodes": 0.0}
        self.last = self.start
        self.next_sample = self.start
        self.timeline = []
        self.held = 0
        self.held_nodes = 0
        self.prov = 0
        self.reconf = 0
        self.held_peak = 0
        self.reconfigured = 0
        self.wake_at = None
        # priority and preemption (preemption.py), elastic capacity (autoscaler.py): None when off
        self.pre = preemptor
        self.asc = autoscaler
        self.evicted_run = {}  # k -> seconds run before its evictions
        self.last_bind = {}  # k -> time of its latest binding after an eviction (None: pending again)
        self.evicted_now = []
        self.provisioned = engine.c.total_gpus  # GPUs provisioned now (autoscaler.py changes it)

    # ------------------------------------------------------------------ events
    def push(self, t: float, typ: int, payload: Any) -> None:
        self.counter += 1
        heapq.heappush(self.heap, (t, typ, self.counter, payload))

    def _deletion(self, k):
        d = self.seq[k].deletion_time
        return INF if d is None else float(d)

    def _try(self, k, t):
        cpu, mem, num, milli, dummy_req, spec = self.arr[k]
        node, hint = self.e.choose(cpu, mem, num, milli, spec)
        if node < 0:
            if self.pre is None:
                return False
            node = self.pre.preempt(k, t)
            if node < 0:
                return False
        got = self.e.place(node, cpu, mem, num, milli, hint)
        self.where[k] = (node, self.e.last_gpus, got)
        self.allocated += got
        if self.bind[k] is None:
            self.bind[k] = t
        else:
            self.last_bind[k] = t
        if self.pre is not None:
            self.pre.bound(k, node)
        if self.asc is not None:
            self.asc.bound(node)
        d = self._deletion(k)
        if d <= self.end:
            self.push(max(d, t), DEP, k)
        return True

    def _leave(self, k, t=None):
        """Pod ``k`` leaves; False when it was not running (evicted since: its old departure event)."""
        here = self.where.pop(k, None)
        if here is None:
            return False
        node, gpus, got = here
        cpu, mem, num, milli, dummy_req, dummy_spec = self.arr[k]
        self.e.unplace(node, cpu, mem, num, milli, gpus)
        self.allocated -= got
        if self.pre is not None:
            self.pre.left(k, node)
        if self.asc is not None:
            self.asc.left(node, t)
        if self.rp is not None and getattr(self.rp, "waiting", None):
            self.rp.left(node, t)  # replan_node.py: a node waiting to drain
        return True

    def started(self, k: int) -> float:
        """When pod ``k``'s current binding began."""
        b = self.last_bind.get(k)
        return self.bind[k] if b is None else b

    def evict(self, k: int, t: float) -> None:
        """Preemption: pod ``k`` leaves now and goes back to the pending queue (see :meth:`flush`)."""
        self.evicted_run[k] = self.evicted_run.get(k, 0.0) + (t - self.started(k))
        self._leave(k, t)
        self.last_bind[k] = None
        self.evicted_now.append(k)

    def flush(self) -> bool:
        """Evicted pods join the pending queue (at its end), keeping their deletion time; True if any did."""
        if not self.evicted_now:
            return False
        for k in self.evicted_now:
            self.pending[k] = None
            d = self._deletion(k)
            if d <= self.end:
                self.push(d, EXP, k)
        self.evicted_now = []
        return True

    def run_seconds(self, k: int, stop: float) -> float:
        """Seconds pod ``k`` ran up to ``stop`` (its deletion or the trace's end), over all its bindings."""
        b = self.bind[k]
        if b is None:
            return 0.0
        if k not in self.evicted_run:
            return max(stop - b, 0.0)
        last = self.last_bind.get(k)
        return self.evicted_run[k] + (max(stop - last, 0.0) if last is not None else 0.0)

    def _retry(self, t):
        failed = set()
        keep = {}
        pre = self.pre
        for k in (self.pending if pre is None else pre.order(self.pending)):
            a = self.arr[k]
            shape = (a[0], a[1], a[2], a[3], a[5]) if pre is None else (a[0], a[1], a[2], a[3], a[5], pre.prio[k])
            if shape in failed or not self._try(k, t):
                failed.add(shape)
                keep[k] = None
        self.pending = keep
        if pre is not None and self.flush():
            self._retry(t)  # the victims (lower priorities: this ends) may fit elsewhere

    def _advance(self, t):
        dt = t - self.last
        if dt > 0:
            self.integral["held"] += self.held * dt
            self.integral["allocated"] += self.allocated / MILLI * dt
            self.integral["reconf"] += self.reconf * dt
            self.integral["provisioned"] += self.prov * dt
            self.integral["nodes"] += self.held_nodes * dt
        while self.next_sample < t and self.next_sample <= self.end:
            self.timeline.append({"hour": round((self.next_sample - self.start) / 3600.0, 3), "held_gpus": self.held,
                                  "allocated_gpus": round(self.allocated / MILLI, 3), "pending_pods": len(self.pending),
                                  "running_pods": len(self.where), "reconfiguring_gpus": self.reconf,
                                  "reconfigured_gpus": self.reconfigured, "provisioned_gpus": self.prov})
            self.next_sample += self.step
        self.last = max(self.last, t)

    def provisioned_gpus(self) -> int:
        """GPUs provisioned now (integrated into ``gpu_hours_provisioned``): the static cluster's GPUs, or with
        an autoscaler (autoscaler.py) the GPUs of the nodes up or booting, which it keeps in ``provisioned``."""
        return self.provisioned

    def held_nodes_now(self) -> int:
        """Nodes with at least one pod (or a GPU being reconfigured): those that could not be released now."""
        busy = self.e.pods_left != self.e.c.pods
        used = getattr(self.e, "used", None)
        if used is not None:
            busy = busy | used.any(axis=1)
        if self.asc is not None:
            busy = busy & self.asc.up  # absent and booting nodes are masked (no pod slot), not busy
        return int(busy.sum())

    def _measure(self):
        self.held = self.e.held_gpus()
        self.held_nodes = self.held_nodes_now()
        self.prov = self.provisioned_gpus()
        self.reconf = int(self.e.reconf.sum()) if hasattr(self.e, "reconf") else 0
        self.held_peak = max(self.held_peak, self.held)

    # ------------------------------------------------------------------ the loop
    def running_and_pending(self) -> Tuple[List[int], List[int]]:
        """``(running, pending)``: arrival indices of the pods bound now and of those waiting."""
        return list(self.where), list(self.pending)

    def run(self) -> DepartureReplay:
        for k, p in enumerate(self.seq):
            self.push(float(p.creation_time), ARR, k)
        if self.rp is not None:
            self.rp.attach(self)
            self.push(self.start + self.rp.every_s, TICK, None)
        self._measure()
        while self.heap and self.heap[0][0] <= self.end:
            t = self.heap[0][0]
            self._advance(t)
            freed = False
            arrivals = []
            tick = wake = False
            while self.heap and self.heap[0][0] == t:
                dummy_t, typ, dummy_c, k = heapq.heappop(self.heap)
                if typ == DEP:
                    freed = self._leave(k, t) or freed
                elif typ == CFG:
                    self.rp.finish(k)
                    freed = True
                elif typ == EXP:
                    if k in self.pending:
                        del self.pending[k]
                        self.deleted_pending += 1
                elif typ == TICK:
                    tick = True
                elif typ == WAKE:
                    wake = True
                elif typ == SCALE:
                    freed = self.asc.event(k, t) or freed
                else:
                    arrivals.append(k)
            if freed and self.pending:
                self._retry(t)
            for k in arrivals:
                if self.rp is not None:
                    self.rp.note_arrival(t, k)
                if not self._try(k, t):
                    d = self._deletion(k)
                    if d <= t:
                        self.deleted_pending += 1
                        continue
                    self.pending[k] = None
                    if d <= self.end:
                        self.push(d, EXP, k)
            if self.pre is not None and self.flush():
                self._retry(t)
            if self.asc is not None and self.pending:
                self.asc.scale_up(t, self.pending if self.pre is None else self.pre.order(self.pending))
            if self.rp is not None:
                if tick:
                    self.push(t + self.rp.every_s, TICK, None)
                if wake:
                    self.wake_at = None
                if self.rp.wanted(t, tick, bool(self.pending)):
                    changed = self.rp.replan(t)
                    if changed and self.pending:
                        self._retry(t)
                elif self.pending and self.wake_at is None:
                    self.wake_at = self.rp.next_allowed(t)
                    self.push(self.wake_at, WAKE, None)
            self._measure()
        self._advance(self.end)
        return self


def summarise(dr: DepartureReplay) -> Dict[str, Any]:
    """The summary of a finished DepartureReplay (see the module docstring)."""
    end = dr.end
    req_s = served_s = 0.0
    waits = []
    placed = 0
    for k, p in enumerate(dr.seq):
        gpus = dr.arr[k][4] / MILLI
        stop = min(dr._deletion(k), end)
        req_s += gpus * max(stop - p.creation_time, 0.0)
        b = dr.bind[k]
        if b is not None:
            placed += 1
            served_s += gpus * dr.run_seconds(k, stop)
            waits.append(b - p.creation_time)
    waited = [w for w in waits if w > 0]
    never = len(dr.seq) - placed
    span = max(end - dr.start, 1e-9)
    days = span / 86400.0
    rp = dr.rp
    out = {
        "gpu_hours_held": round(dr.integral["held"] / 3600.0, 2),
        "gpu_hours_allocated": round(dr.integral["allocated"] / 3600.0, 2),
        "gpu_hours_requested": round(req_s / 3600.0, 2),
        "gpu_hours_served": round(served_s / 3600.0, 2),
        "served_pct": round(100.0 * served_s / req_s, 3) if req_s > 0 else None,
        "pods_placed": placed,
        "pods_never_placed": never,
        "pods_deleted_pending": dr.deleted_pending,
        "pods_waited": len(waited),
        "pending_median_s": _r(percentile(waits, 50)),
        "pending_p95_s": _r(percentile(waits, 95)),
        "pending_waited_median_s": _r(percentile(waited, 50)),
        "pending_waited_p95_s": _r(percentile(waited, 95)),
        "held_gpus_mean": round(dr.integral["held"] / span, 2),
        "held_gpus_peak": dr.held_peak,
        "gpu_hours_reconfiguring": round(dr.integral["reconf"] / 3600.0, 2),
        "reconfigured_gpus": dr.reconfigured,
        "reconfigured_gpus_per_day": round(dr.reconfigured / days, 2) if days > 0 else 0.0,
        "replans": rp.replans if rp is not None else 0,
        "planner_calls": rp.planner_calls if rp is not None else 0,
        "planner_seconds": round(rp.planner_seconds, 3) if rp is not None else 0.0,
        "trace_hours": round(span / 3600.0, 2),
    }
    prov_s = dr.integral["provisioned"]
    out["gpu_hours_provisioned"] = round(prov_s / 3600.0, 2)
    out["utilisation_pct"] = round(100.0 * req_s / prov_s, 3) if prov_s > 0 else None
    out["held_pct"] = round(100.0 * dr.integral["held"] / prov_s, 3) if prov_s > 0 else None
    out["node_hours_held"] = round(dr.integral["nodes"] / 3600.0, 2)
    out["served_pods_pct"] = round(100.0 * placed / len(dr.seq), 3) if dr.seq else None
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import classes

    out["by_class"] = classes.by_class(dr.seq, dr.arr, dr.bind, end, dr._deletion, ran=dr.run_seconds,
                                       prio=dr.pre.prio if dr.pre is not None else None)
    return out


def _r(value):
    return None if value is None else round(float(value), 1)


def mean_timeline(timelines: Sequence[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Point-by-point mean of the timelines of several seeds (the common length)."""
    if len(timelines) == 1:
        return timelines[0]
    size = min(len(t) for t in timelines)
    out = []
    for i in range(size):
        pt = {"hour": timelines[0][i]["hour"]}
        for key in timelines[0][i]:
            if key != "hour":
                pt[key] = round(sum(t[i][key] for t in timelines) / float(len(timelines)), 2)
        out.append(pt)
    return out
