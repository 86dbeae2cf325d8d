# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Replay engine, per-GPU milli model: ``sharing: fractional`` (the trace's GPU sharing) and
``sharing: exclusive`` (every GPU request rounded up to whole GPUs).

State per node: CPU, memory and pod slots left, and per GPU the milli-GPU left (0..1000). A pod
arrives, the feasible nodes are found (filter), scored by the policy, the best is taken (ties:
uniformly at random, as kube-scheduler's selection does), GPUs are picked inside the node, and the
node's state changes. Pods never leave (the protocol of the FGD artefact; departures.py makes them
leave with ``unplace``). After every arrival the engine records the arrived GPU request, the allocated
GPU milli and the fragmented GPU milli; the curve (metrics.py) is made from those events.

Filter (artefact: kube-scheduler's NodeResourcesFit + the Open-Gpu-Share filter plugin):
CPU and memory requests fit, a pod slot is free, and for a GPU pod: the node has GPUs of a model the
pod accepts (``gpu_spec``); a sharing pod (1 GPU, < 1000 milli) finds one GPU with that much milli
left; a pod of ``n`` whole GPUs finds ``n`` fully free GPUs.

Scoring policies (definitions from the artefact's ``pkg/simulator/plugin/*_score.go``, re-implemented
here; integer truncations kept because they decide the ties):

* ``random``: a feasible node uniformly at random; a random fitting GPU inside it.
* ``best-fit``: ``int(100 * (1 - (0.5 (cpu_left - cpu)/128000 + 0.5 (gpu_left - gpu)/8000)))``,
  gpu_left = the node's total milli-GPU left; GPU: the fitting GPU with the least milli left.
* ``dot-product`` (Tetris, artefact config ``merge``/``max``): ``int(100 * (1 - (cpu_left cpu /
  128000^2 + gpu_left gpu / 8000^2) / 2))``; GPU as best-fit.
* ``packing`` (GpuPacking): 100 - free share of the GPU used / 10 when a sharing pod fits on a
  partly used GPU; 50 - (fully free GPUs it needs) (min 33) on a used node; 33 - free GPUs
  (min: that count) on an idle node; CPU pods 0. GPU as best-fit.
* ``clustering`` (GpuClustering): nodes already running pods of the same GPU kind (share, 1, 2, 4,
  8 GPUs) first, then idle nodes, then mixed ones, within each band fuller nodes first.
* ``fgd``: ``int(100 sigmoid((F(node) - F(node with the pod)) / 1000))``, F the node's fragmentation
  (frag.py); for a sharing pod, each fitting GPU is tried and the best (first on ties) is both the
  node's score and the GPU used.
* ``kube-default``: kube-scheduler's defaults as our local v1.37.2 control plane runs them
  (NodeResourcesFit LeastAllocated over cpu and memory, weight 1, on NonZero requests, plus
  NodeResourcesBalancedAllocation over cpu and memory, weight 1; the other default plugins score all
  of these nodes alike), and its sampling of nodes: on clusters of 100 nodes or more only the first
  ``max(100, N (50 - N/125) / 100)`` feasible nodes, from a start index that rotates by the nodes
  examined, are scored. GPUs: first fit (fractional: the fitting GPU with the least left).

Requires numpy (controller side only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import frag as whatif_frag
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.workload import Arrival, nonzero_cpu

try:
    import numpy as np

    HAS_NUMPY = True
except ImportError:  # pragma: no cover - exercised by the sanity import test
    np = None  # type: ignore[assignment]
    HAS_NUMPY = False

if TYPE_CHECKING:
    import random
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.data import Node

MILLI = 1000
MAX_SPEC_CPU = 128000.0  # artefact normalisers (open-gpu-share utils const.go)
MAX_SPEC_GPU = 8000.0
UNLIMITED = 1 << 60
DEFAULT_MEMORY_BYTES = 200 * 1024 * 1024  # schedutil.DefaultMemoryRequest
SCALE = 840  # unit model: milli x 840 keeps every MIG share (1/7, 1/4, 1/8 ...) an integer
SCORINGS = ("random", "best-fit", "packing", "dot-product", "fgd", "kube-default", "clustering")


def need_numpy() -> None:
    if not HAS_NUMPY:
        raise GpuOpsError("the what-if engine needs numpy on the controller (pip install numpy)", missing_lib="numpy")


class Cluster(object):
    """Static description of the nodes, as arrays. ``nodes``: data.Node list."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        need_numpy()
        self.nodes = list(nodes)
        n = len(self.nodes)
        self.n = n
        self.names = [x.name for x in self.nodes]
        self.cpu = np.array([x.cpu_milli if x.cpu_milli is not None else UNLIMITED for x in self.nodes], dtype=np.int64)
        self.mem = np.array([x.memory_mib if x.memory_mib is not None else UNLIMITED for x in self.nodes], dtype=np.int64)
        self.pods = np.array([x.pods if x.pods is not None else UNLIMITED for x in self.nodes], dtype=np.int64)
        self.ngpu = np.array([x.gpus for x in self.nodes], dtype=np.int64)
        self.models = sorted(set(x.model for x in self.nodes if x.model))
        index = dict((m, i) for i, m in enumerate(self.models))
        self.model_idx = np.array([index[x.model] if x.model else -1 for x in self.nodes], dtype=np.int64)
        self.g = int(max(1, self.ngpu.max() if n else 1))
        self.total_milli = int(self.ngpu.sum()) * MILLI
        self.total_gpus = int(self.ngpu.sum())
        self.limited_cpu = all(x.cpu_milli is not None for x in self.nodes)
        self.limited_mem = all(x.memory_mib is not None for x in self.nodes)

    def spec_mask(self, spec: Sequence[str]) -> np.ndarray:
        """Nodes with GPUs of a model in ``spec`` (empty: any GPU node)."""
        if not spec:
            return self.ngpu > 0
        ok = np.zeros(self.n, dtype=bool)
        for m in spec:
            if m in self.models:
                ok |= self.model_idx == self.models.index(m)
        return ok & (self.ngpu > 0)


class Events(object):
    """What the replay records after each arrival."""

    def __init__(self, size: int) -> None:
        self.arrived = np.zeros(size, dtype=np.float64)  # cumulative requested GPU milli
        self.allocated = np.zeros(size, dtype=np.float64)  # GPU milli bound to pods
        self.served = np.zeros(size, dtype=np.float64)  # requested GPU milli of the pods placed
        self.frag = np.zeros(size, dtype=np.float64)  # fragmented GPU milli
        self.idle = np.zeros(size, dtype=np.float64)  # GPU milli not allocated
        self.placed = np.zeros(size, dtype=bool)


class _Replay(object):
    """The replay loop and the policies, common to both GPU models.

    ``arrivals``: list of (cpu_milli, memory_mib, num_gpu, gpu_milli, request_milli, spec) where
    ``gpu_milli`` is the per-GPU request as the model reads it (milli model under exclusive: 1000)
    and ``request_milli`` the trace's own request (for the arrived-workload axis).
    """

    def __init__(self, cluster: Cluster, arrivals: Sequence[Arrival], scoring: str, rng: random.Random,
                 percentage_of_nodes_to_score: Optional[int] = None, tie_break: Optional[str] = None) -> None:
        if scoring not in SCORINGS:
            raise GpuOpsError("scoring must be one of %s, not %r" % (", ".join(SCORINGS), scoring))
        self.c = cluster
        self.arrivals = arrivals
        self.scoring = scoring
        self.rng = rng
        n = cluster.n
        self.cpu_left = cluster.cpu.copy()
        self.mem_left = cluster.mem.copy()
        self.pods_left = cluster.pods.copy()
        # kube-default bookkeeping: NonZero requests (memory in bytes)
        self.cpu_nz = np.zeros(n, dtype=np.int64)
        self.mem_nz = np.zeros(n, dtype=np.int64)
        self.mem_bytes_cap = np.where(cluster.mem >= UNLIMITED, 0, cluster.mem * 1048576)
        self.cpu_cap_k = np.where(cluster.cpu >= UNLIMITED, 0, cluster.cpu)
        self.next_start = 0
        self.pct_score = percentage_of_nodes_to_score
        # clustering: pods per GPU kind on each node
        self.kinds: Dict[str, int] = {}
        self.aff = np.zeros((n, 8), dtype=np.int64)
        self.version = np.zeros(n, dtype=np.int64)
        self.cache: Dict[Any, Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._spec_masks: Dict[Tuple[str, ...], np.ndarray] = {}
        self.failed: List[int] = []
        # ties: "rank" = a fixed, seeded random priority of the nodes (the artefact's scheduler fork
        # picks the smallest node name among equal scores, and names start with a random permutation
        # index); "random" = uniformly at random per pod (kube-scheduler's own selection).
        if tie_break is None:
            tie_break = "random" if scoring == "kube-default" else "rank"
        if tie_break not in ("rank", "random"):
            raise GpuOpsError("tie_break must be rank or random, not %r" % (tie_break,))
        self.tie_break = tie_break
        perm = list(range(n))
        rng.shuffle(perm)
        self.rank = np.array(perm, dtype=np.int64)

    if TYPE_CHECKING:  # given by MilliReplay and SliceReplay
        frag: Any  # frag.NodeFrag or frag.SliceFrag
        feasible: Callable[[int, int, int, int, Tuple[str, ...]], np.ndarray]  # (cpu, mem, num, milli, spec) -> node mask
        request_milli: Callable[[int, int, np.ndarray], Union[float, np.ndarray]]  # (num, milli, idx)
        score_packing: Callable[[np.ndarray, int, int], np.ndarray]  # (idx, num, milli)
        score_fgd: Callable[[np.ndarray, int, int, int], Tuple[np.ndarray, np.ndarray]]  # (idx, cpu, num, milli)
        place: Callable[[int, int, int, int, int, Any], float]  # (node, cpu, mem, num, milli, hint) -> GPU milli taken

    # ------------------------------------------------------------------ helpers
    def _spec(self, spec):
        m = self._spec_masks.get(spec)
        if m is None:
            m = self.c.spec_mask(spec)
            self._spec_masks[spec] = m
        return m

    def _kind(self, num, milli):
        key = "share" if (num == 1 and milli < MILLI) else "%d-gpu" % num
        k = self.kinds.get(key)
        if k is None:
            k = len(self.kinds)
            self.kinds[key] = k
            if k >= self.aff.shape[1]:
                self.aff = np.concatenate([self.aff, np.zeros_like(self.aff)], axis=1)
        return k

    def _pick(self, idx, scores):
        """The best of ``idx`` by ``scores``; ties by node rank or at random (see tie_break)."""
        best = scores.max()
        ties = np.flatnonzero(scores == best)
        if len(ties) == 1:
            return int(idx[ties[0]])
        if self.tie_break == "rank":
            cand = idx[ties]
            return int(cand[np.argmin(self.rank[cand])])
        return int(idx[ties[self.rng.randrange(len(ties))]])

    def _base_feasible(self, cpu, mem, num, spec):
        f = (self.cpu_left >= cpu) & (self.mem_left >= mem) & (self.pods_left > 0)
        if num > 0:
            f &= self._spec(spec)
        return f

    # ------------------------------------------------------------------ scores (shared)
    def _score_best_fit(self, idx, cpu, gpu_req):
        s = (self.cpu_left[idx] - cpu) / MAX_SPEC_CPU * 0.5
        s = s + (self.free_milli(idx) - gpu_req) / MAX_SPEC_GPU * 0.5
        return ((1.0 - s) * 100.0).astype(np.int64)

    def _score_dot(self, idx, cpu, gpu_req):
        a0 = self.cpu_left[idx] / MAX_SPEC_CPU
        a1 = self.free_milli(idx) / MAX_SPEC_GPU
        inner = a0 * (cpu / MAX_SPEC_CPU) + a1 * (gpu_req / MAX_SPEC_GPU)
        return (100.0 * (1.0 - inner / 2.0)).astype(np.int64)

    def _score_clustering(self, idx, num, milli):
        if num == 0:
            return np.zeros(len(idx), dtype=np.int64)
        k = self._kind(num, milli)
        aff = self.aff[idx]
        kinds = (aff > 0).sum(axis=1)
        has = aff[:, k] > 0
        base = (25 * (8000 - np.floor(self.free_milli(idx)).astype(np.int64))) // 8000
        band = np.where(has, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        return base + band

    def _score_kube(self, idx, cpu, mem):
        mem_b = mem * 1048576
        cpu_nz = nonzero_cpu(cpu)
        mem_nz = mem_b if mem_b > 0 else DEFAULT_MEMORY_BYTES
        cap_c = self.cpu_cap_k[idx]
        cap_m = self.mem_bytes_cap[idx]
        req_c = self.cpu_nz[idx] + cpu_nz
        req_m = self.mem_nz[idx] + mem_nz
        sc = np.where((cap_c > 0) & (req_c <= cap_c), ((cap_c - req_c) * 100) // np.maximum(cap_c, 1), 0)
        sm = np.where((cap_m > 0) & (req_m <= cap_m), ((cap_m - req_m) * 100) // np.maximum(cap_m, 1), 0)
        w = (cap_c > 0).astype(np.int64) + (cap_m > 0).astype(np.int64)
        least = np.where(w > 0, (sc * (cap_c > 0) + sm * (cap_m > 0)) // np.maximum(w, 1), 0)
        if cpu == 0 and mem_b == 0:  # best-effort pod: BalancedAllocation skips it
            return least
        # BalancedAllocation: actual requests, with and without the pod
        used_c = (self.c.cpu[idx] - self.cpu_left[idx]).astype(np.float64)
        used_m = ((self.c.mem[idx] - self.mem_left[idx]) * 1048576).astype(np.float64)
        capf_c = np.where(cap_c > 0, cap_c, 1).astype(np.float64)
        capf_m = np.where(cap_m > 0, cap_m, 1).astype(np.float64)
        both = (cap_c > 0) & (cap_m > 0)

        def balanced(rc, rm):
            fc = np.minimum(rc / capf_c, 1.0)
            fm = np.minimum(rm / capf_m, 1.0)
            std = np.where(both, np.abs((fc - fm) / 2.0), 0.0)
            return ((1.0 - std) * 100.0).astype(np.int64)

        bal = 50 + (50 + balanced(used_c + cpu, used_m + mem_b) - balanced(used_c, used_m)) // 2
        return least + bal

    def _nodes_to_score(self, f):
        """kube-scheduler's node sampling: indices of the feasible nodes it would score."""
        n = self.c.n
        pct = self.pct_score if self.pct_score is not None else max(50 - n // 125, 5)
        want = n if (n < 100 or pct >= 100) else max(100, n * pct // 100)
        start = self.next_start
        order = np.concatenate([np.arange(start, n), np.arange(0, start)]) if start else np.arange(n)
        pos = np.flatnonzero(f[order])
        if len(pos) > want:
            pos = pos[:want]
            processed = int(pos[-1]) + 1
        else:
            processed = n
        self.next_start = (start + processed) % n
        return order[pos]

    def _fgd_cached(self, idx, key, compute):
        """Scores (and GPU choices) on ``idx``, cached per pod shape until a node changes."""
        entry = self.cache.get(key)
        if entry is None:
            n = self.c.n
            entry = (np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
            self.cache[key] = entry
        stamp, score, gpu = entry
        stale = idx[stamp[idx] != self.version[idx]]
        if len(stale):
            s, gsel = compute(stale)
            score[stale] = s
            gpu[stale] = gsel
            stamp[stale] = self.version[stale]
        return score[idx], gpu

    # ------------------------------------------------------------------ replay
    def choose(self, cpu: int, mem: int, num: int, milli: int, spec: Tuple[str, ...]) -> Tuple[int, Any]:
        """``(node, GPU hint)`` for one pod on the current state; node -1 when none fits."""
        scoring = self.scoring
        f = self.feasible(cpu, mem, num, milli, spec)
        idx = self._nodes_to_score(f) if scoring == "kube-default" else np.flatnonzero(f)
        hint = None
        if len(idx) == 0:
            node = -1
        elif len(idx) == 1 and scoring != "fgd":
            node = int(idx[0])
        elif scoring == "random":
            node = int(idx[self.rng.randrange(len(idx))])
        elif scoring == "best-fit":
            node = self._pick(idx, self._score_best_fit(idx, cpu, self.request_milli(num, milli, idx)))
        elif scoring == "dot-product":
            node = self._pick(idx, self._score_dot(idx, cpu, self.request_milli(num, milli, idx)))
        elif scoring == "packing":
            node = self._pick(idx, self.score_packing(idx, num, milli))
        elif scoring == "clustering":
            node = self._pick(idx, self._score_clustering(idx, num, milli))
        elif scoring == "kube-default":
            node = self._pick(idx, self._score_kube(idx, cpu, mem))
        else:  # fgd
            scores, gpus = self.score_fgd(idx, nonzero_cpu(cpu), num, milli)
            node = self._pick(idx, scores)
            hint = gpus[node]
        return node, hint

    def run(self, progress: Optional[Callable[[int], Any]] = None) -> Events:
        arrivals = self.arrivals
        ev = Events(len(arrivals))
        arrived = 0.0
        allocated = 0.0
        served = 0.0
        total = float(self.c.total_milli)
        for k, (cpu, mem, num, milli, req, spec) in enumerate(arrivals):
            arrived += req
            node, hint = self.choose(cpu, mem, num, milli, spec)
            if node < 0:
                self.failed.append(k)
            else:
                allocated += self.place(node, cpu, mem, num, milli, hint)
                served += req
                ev.placed[k] = True
            ev.arrived[k] = arrived
            ev.allocated[k] = allocated
            ev.served[k] = served
            ev.frag[k] = self.frag.total()
            ev.idle[k] = total - allocated
            if progress is not None:
                progress(k)
        return ev

    # ------------------------------------------------------------------ step by step
    def best_nodes(self, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """For arrival ``k`` on the current state (kube-default only): ``(nodes scored, nodes of the best
        score)`` as index arrays; both empty when no node fits. Lets another scheduler's choice be
        checked against the model one pod at a time (tests/e2e/test_whatif_scheduler.py)."""
        if self.scoring != "kube-default":
            raise GpuOpsError("best_nodes is for scoring kube-default, not %r" % (self.scoring,))
        cpu, mem, num, milli, dummy_req, spec = self.arrivals[k]
        idx = self._nodes_to_score(self.feasible(cpu, mem, num, milli, spec))
        if len(idx) == 0:
            return idx, idx
        scores = self._score_kube(idx, cpu, mem)
        return idx, idx[scores == scores.max()]

    def commit(self, k: int, node: int) -> float:
        """Place arrival ``k`` on ``node`` (another scheduler's choice) as :meth:`run` would."""
        cpu, mem, num, milli, dummy_req, dummy_spec = self.arrivals[k]
        return self.place(node, cpu, mem, num, milli, None)

    def _place_common(self, node, cpu, mem, num, milli):
        self.cpu_left[node] -= cpu
        self.mem_left[node] -= mem
        self.pods_left[node] -= 1
        self.cpu_nz[node] += nonzero_cpu(cpu)
        self.mem_nz[node] += mem * 1048576 if mem > 0 else DEFAULT_MEMORY_BYTES
        if num:
            self.aff[node, self._kind(num, milli)] += 1
        self.version[node] += 1

    def _unplace_common(self, node, cpu, mem, num, milli):
        """Undo :meth:`_place_common` (a pod leaves; departures.py)."""
        self.cpu_left[node] += cpu
        self.mem_left[node] += mem
        self.pods_left[node] += 1
        self.cpu_nz[node] -= nonzero_cpu(cpu)
        self.mem_nz[node] -= mem * 1048576 if mem > 0 else DEFAULT_MEMORY_BYTES
        if num:
            self.aff[node, self._kind(num, milli)] -= 1
        self.version[node] += 1


class MilliReplay(_Replay):
    """One replay on the per-GPU milli model (``fractional``; ``exclusive`` with gpu_milli 1000).

    ``typical``: frag.Typical for the fragmentation measure (same sharing transformation).
    """

    def __init__(self, cluster: Cluster, arrivals: Sequence[Arrival], scoring: str, typical: whatif_frag.Typical, rng: random.Random,
                 percentage_of_nodes_to_score: Optional[int] = None, tie_break: Optional[str] = None) -> None:
        _Replay.__init__(self, cluster, arrivals, scoring, rng, percentage_of_nodes_to_score, tie_break)
        g = cluster.g
        self.typ = typical
        valid = np.arange(g)[None, :] < cluster.ngpu[:, None]
        self.gl = np.where(valid, MILLI, -1).astype(np.int64)  # milli left per GPU (-1: no such GPU)
        self.total_left = cluster.ngpu * MILLI
        self.full = cluster.ngpu.copy()  # fully free GPUs
        self.max_left = np.where(cluster.ngpu > 0, MILLI, -1).astype(np.int64)
        self.frag = whatif_frag.NodeFrag(typical, cluster, self.gl, self.cpu_left)

    def free_milli(self, idx: np.ndarray) -> np.ndarray:
        return self.total_left[idx]

    def request_milli(self, num: int, milli: int, idx: np.ndarray) -> Union[float, np.ndarray]:
        return float(num * milli)

    def feasible(self, cpu: int, mem: int, num: int, milli: int, spec: Tuple[str, ...]) -> np.ndarray:
        f = self._base_feasible(cpu, mem, num, spec)
        if num > 0:
            if num == 1 and milli < MILLI:
                f &= self.max_left >= milli
            else:
                f &= self.full >= num
        return f

    def score_packing(self, idx: np.ndarray, num: int, milli: int) -> np.ndarray:
        if num == 0:
            return np.zeros(len(idx), dtype=np.int64)
        full = self.full[idx]
        idle = full == self.c.ngpu[idx]
        s3 = np.maximum(33 - full, full)
        if num == 1 and milli < MILLI:
            gl = self.gl[idx]
            best = np.where(gl >= milli, gl, MILLI + 1).min(axis=1)
            s1 = np.maximum(100 - ((best * 100) // MILLI) // 10, 50)
            s = np.where(best >= MILLI, 49, s1)
        else:
            s = np.full(len(idx), max(50 - num, 33), dtype=np.int64)
        return np.where(idle, s3, s)

    def score_fgd(self, idx: np.ndarray, cpu: int, num: int, milli: int) -> Tuple[np.ndarray, np.ndarray]:
        return self._fgd_cached(idx, (cpu, num, milli), lambda stale: self.frag.fgd(
            stale, self.gl[stale], self.cpu_left[stale], cpu, num, milli))

    def _gpus_for(self, node, num, milli, hint):
        row = self.gl[node]
        if num == 1 and milli < MILLI:
            if hint is not None:
                return [int(hint)]
            fits = np.flatnonzero(row >= milli)
            if self.scoring == "random":
                return [int(fits[self.rng.randrange(len(fits))])]
            return [int(fits[np.argmin(row[fits])])]
        free = np.flatnonzero(row == MILLI)
        return [int(i) for i in free[:num]]

    def place(self, node: int, cpu: int, mem: int, num: int, milli: int, hint: Any) -> float:
        self._place_common(node, cpu, mem, num, milli)
        self.last_gpus: List[int] = []
        if num:
            row = self.gl[node]
            self.last_gpus = self._gpus_for(node, num, milli, hint)
            for i in self.last_gpus:
                row[i] -= milli
            self._refresh(node)
        self.frag.update(node, self.gl[node], self.cpu_left[node])
        return float(num * milli)

    def _refresh(self, node):
        row = self.gl[node]
        valid = row[row >= 0]
        self.total_left[node] = int(valid.sum())
        self.full[node] = int((valid == MILLI).sum())
        self.max_left[node] = int(valid.max()) if len(valid) else -1

    def unplace(self, node: int, cpu: int, mem: int, num: int, milli: int, gpus: List[int]) -> float:
        """A pod placed with ``gpus`` (``last_gpus`` after its :meth:`place`) leaves."""
        self._unplace_common(node, cpu, mem, num, milli)
        if num:
            row = self.gl[node]
            for i in gpus:
                row[i] += milli
            self._refresh(node)
        self.frag.update(node, self.gl[node], self.cpu_left[node])
        return float(num * milli)

    def held_gpus(self) -> int:
        """GPUs with at least one pod on them."""
        return int(((self.gl >= 0) & (self.gl < MILLI)).sum())


class SliceReplay(_Replay):
    """One replay on the unit model (``mig``, ``planned``; ``exclusive`` gives the same result as
    the milli model). ``layouts``: per node, per GPU, the list of unit kinds (mig.py); ``table``: the
    mig.UnitTable; ``typical``: frag.SliceTypical.
    """

    def __init__(self, cluster: Cluster, arrivals: Sequence[Arrival], scoring: str, table: whatif_mig.UnitTable, layouts: whatif_mig.Layouts,
                 typical: whatif_frag.Typical, rng: random.Random, percentage_of_nodes_to_score: Optional[int] = None, tie_break: Optional[str] = None) -> None:
        _Replay.__init__(self, cluster, arrivals, scoring, rng, percentage_of_nodes_to_score, tie_break)
        n, g = cluster.n, cluster.g
        self.table = table
        kinds = len(table.kinds)
        self.nk = kinds
        self.size_s = np.array([int(round(k.size_milli * SCALE)) for k in table.kinds], dtype=np.int64)
        self.fc = np.zeros((n, g, kinds), dtype=np.int64)  # free units per GPU and kind
        for i, per_gpu in enumerate(layouts):
            for j, units in enumerate(per_gpu):
                for u in units:
                    self.fc[i, j, u] += 1
        valid = np.arange(g)[None, :] < cluster.ngpu[:, None]
        self.fm = np.where(valid, MILLI * SCALE, -1).astype(np.int64)  # free (unallocated) scaled milli per GPU
        self.used = np.zeros((n, g), dtype=bool)
        self.reconf = np.zeros((n, g), dtype=bool)  # being reconfigured (set_gpu_units)
        self.layouts0 = layouts  # the units installed at the start (gpu_units of a busy GPU)
        self.installed: Dict[Tuple[int, int], List[int]] = {}  # (node, gpu) -> units set by set_gpu_units since
        self.nf = self.fc.sum(axis=1)  # [N, K] free units per node
        self.total_left = cluster.ngpu * (MILLI * SCALE)
        # kinds present per model, and the request -> kind map per model
        present: List[Set[int]] = [set() for dummy in cluster.models]
        for i, per_gpu in enumerate(layouts):
            m = cluster.model_idx[i]
            if m >= 0:
                for units in per_gpu:
                    present[m].update(units)
        self.present = present
        self._kmap: Dict[int, np.ndarray] = {}
        self.typ = typical
        self.frag = whatif_frag.SliceFrag(typical, cluster, table, present, self.size_s, SCALE, self.nf, self.total_left,
                                          self.cpu_left)

    def kind_nodes(self, milli: int) -> np.ndarray:
        """Unit kind per node for a per-GPU request of ``milli`` (-1 on nodes without GPUs)."""
        q = self._kmap.get(milli)
        if q is None:
            per_model = np.array([whatif_mig.request_kind(self.table, sorted(p), milli) for p in self.present] + [-1],
                                 dtype=np.int64)
            q = per_model[self.c.model_idx]  # model_idx -1 -> last entry
            self._kmap[milli] = q
        return q

    def free_milli(self, idx: np.ndarray) -> np.ndarray:
        return self.total_left[idx] / float(SCALE)

    def request_milli(self, num: int, milli: int, idx: np.ndarray) -> Union[float, np.ndarray]:
        if num == 0:
            return 0.0
        q = self.kind_nodes(milli)[idx]
        return self.size_s[np.maximum(q, 0)] * num / float(SCALE)

    def feasible(self, cpu: int, mem: int, num: int, milli: int, spec: Tuple[str, ...]) -> np.ndarray:
        f = self._base_feasible(cpu, mem, num, spec)
        if num > 0:
            q = self.kind_nodes(milli)
            f &= (q >= 0) & (self.nf[np.arange(self.c.n), np.maximum(q, 0)] >= num)
        return f

    def score_packing(self, idx: np.ndarray, num: int, milli: int) -> np.ndarray:
        if num == 0:
            return np.zeros(len(idx), dtype=np.int64)
        used = self.used[idx]
        ngpu = self.c.ngpu[idx]
        fullfree = ngpu - used.sum(axis=1)
        idle = fullfree == ngpu
        s3 = np.maximum(33 - fullfree, fullfree)
        q = self.kind_nodes(milli)[idx]
        if num == 1 and milli < MILLI:
            has = self.fc[idx, :, :][np.arange(len(idx)), :, np.maximum(q, 0)] > 0  # [X, G]
            fm = np.where(has, self.fm[idx], 1 << 62)
            g = fm.argmin(axis=1)
            best = fm[np.arange(len(idx)), g]
            best_used = used[np.arange(len(idx)), g]
            milli_left = best // SCALE
            s1 = np.maximum(100 - ((milli_left * 100) // MILLI) // 10, 50)
            s = np.where(best_used, s1, 49)
        else:
            s = np.full(len(idx), max(50 - num, 33), dtype=np.int64)
        return np.where(idle, s3, s)

    def score_fgd(self, idx: np.ndarray, cpu: int, num: int, milli: int) -> Tuple[np.ndarray, np.ndarray]:
        q = self.kind_nodes(milli) if num else None

        def compute(stale):
            qs = q[stale] if q is not None else None
            return self.frag.fgd(stale, self.nf[stale], self.total_left[stale], self.cpu_left[stale], cpu, num, qs)
        return self._fgd_cached(idx, (cpu, num, milli), compute)

    def _units_for(self, node, num, q, hint):
        """GPU index per unit taken (a GPU may give several units).

        Whole GPUs: the first free ones by index (as the artefact's exclusive allocation); a MIG
        unit: random (random), the first GPU holding one (fgd: every choice leaves the node the
        same; kube-default: first fit), else the GPU with the least free capacity (best fit).
        """
        have = self.fc[node, :, q]
        gpus = np.flatnonzero(have > 0)
        if q == whatif_mig.WHOLE:
            return [int(i) for i in gpus[:num]]
        if num == 1:
            if self.scoring == "random":
                return [int(gpus[self.rng.randrange(len(gpus))])]
            if self.scoring in ("fgd", "kube-default"):
                return [int(gpus[0])]
            return [int(gpus[np.argmin(self.fm[node, gpus])])]
        order = gpus if self.scoring in ("fgd", "kube-default", "random") else gpus[np.argsort(self.fm[node, gpus], kind="stable")]
        out = []
        for gi in order:
            out.extend([int(gi)] * int(have[gi]))
        out = out[:num]
        return out

    def place(self, node: int, cpu: int, mem: int, num: int, milli: int, hint: Any) -> float:
        self._place_common(node, cpu, mem, num, milli)
        got = 0.0
        self.last_gpus: whatif_mig.UnitGpus = (None, [])
        if num:
            q = int(self.kind_nodes(milli)[node])
            size = int(self.size_s[q])
            gpus = self._units_for(node, num, q, hint)
            for gi in gpus:
                self.fc[node, gi, q] -= 1
                self.fm[node, gi] -= size
                self.used[node, gi] = True
            self.nf[node, q] -= num
            self.total_left[node] -= size * num
            got = size * num / float(SCALE)
            self.last_gpus = (q, gpus)
        self.frag.update(node, self.nf[node], self.total_left[node], self.cpu_left[node])
        return got

    def unplace(self, node: int, cpu: int, mem: int, num: int, milli: int, gpus: whatif_mig.UnitGpus) -> float:
        """A pod placed on ``gpus`` (``last_gpus`` after its :meth:`place`: unit kind, GPU per unit) leaves."""
        self._unplace_common(node, cpu, mem, num, milli)
        got = 0.0
        q, per_unit = gpus
        if num:
            size = int(self.size_s[q])
            for gi in per_unit:
                self.fc[node, gi, q] += 1
                self.fm[node, gi] += size
                self.used[node, gi] = self.fm[node, gi] != MILLI * SCALE
            self.nf[node, q] += num
            self.total_left[node] += size * num
            got = size * num / float(SCALE)
        self.frag.update(node, self.nf[node], self.total_left[node], self.cpu_left[node])
        return got

    def held_gpus(self) -> int:
        """GPUs with at least one pod on them (or being reconfigured: see set_gpu_units)."""
        return int(self.used.sum())

    def gpu_empty(self, node: int, gi: int) -> bool:
        return not self.used[node, gi]

    def gpu_units(self, node: int, gi: int) -> List[int]:
        """The unit kinds of one GPU now (free ones: the GPU must be empty to be meaningful)."""
        out = []
        for u in np.flatnonzero(self.fc[node, gi]):
            out.extend([int(u)] * int(self.fc[node, gi, u]))
        return out

    def set_gpu_units(self, node: int, gi: int, units: Optional[Iterable[int]]) -> None:
        """Replace the units of an empty GPU (``units`` None: the GPU is taken away while it is being
        reconfigured - no units, counted as used and fully allocated)."""
        if self.used[node, gi] and not self.reconf[node, gi]:
            raise GpuOpsError("GPU %d of node %s runs pods; only an empty GPU is reconfigured" % (gi, self.c.names[node]))
        before = self.fc[node, gi].copy()
        self.nf[node] -= before
        self.fc[node, gi] = 0
        if units is None:
            if self.fm[node, gi] == MILLI * SCALE:
                self.total_left[node] -= MILLI * SCALE
            self.fm[node, gi] = 0
            self.used[node, gi] = True
            self.reconf[node, gi] = True
        else:
            self.installed[(node, gi)] = list(units)
            for u in units:
                self.fc[node, gi, u] += 1
            self.nf[node] += self.fc[node, gi]
            if self.fm[node, gi] == 0:
                self.total_left[node] += MILLI * SCALE
            self.fm[node, gi] = MILLI * SCALE
            self.used[node, gi] = False
            self.reconf[node, gi] = False
        self.version[node] += 1
        self.frag.update(node, self.nf[node], self.total_left[node], self.cpu_left[node])

    def use_kinds(self, present: Iterable[Iterable[int]]) -> None:
        """Pods ask for units among ``present[model]`` (kind indices; replanned: every profile of the
        model's shape), whatever the layouts hold now; the fragmentation measure follows."""
        self.present = [set(x) for x in present]
        self._kmap = {}
        self.cache = {}
        self.frag = whatif_frag.SliceFrag(self.typ, self.c, self.table, self.present, self.size_s, SCALE, self.nf,
                                          self.total_left, self.cpu_left)
