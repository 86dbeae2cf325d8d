# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU fragmentation as the FGD paper defines it (Weng et al., ATC '23, section 4; artefact
``pkg/utils/frag.go`` ``NodeGpuShareFragAmount`` / ``GetNodePodFrag``).

For a node and one typical pod shape t (frequency p_t) the node's idle GPU milli L is *fragmented
for t* when t cannot run there: t needs no GPU (CPU-only pods cannot use GPUs), the node's GPU
model is not one t accepts, the node lacks CPU for t, or fewer than ``num_t`` of its GPUs have
``milli_t`` left. When t can run, only the milli on GPUs with less than ``milli_t`` left is
fragmented. The node's fragmentation is the expectation over the typical pods:

    F(node) = sum_t p_t * frag_t = L - sum_t p_t [t fits] S_t,   S_t = milli left on GPUs with >= milli_t left

The cluster's fragmented GPU milli is the sum over nodes. Memory does not enter (as in the paper).

Here the frequencies are kept as integer counts (p_t = count_t / D), so F * D is an integer and
"the fragmentation did not change" is exact: FGD's integer scores ``int(100 sigmoid(dF / 1000))``
then tie exactly where the artefact's do.

Requires numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.workload import nonzero_cpu

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None  # type: ignore[assignment]

# ``cluster`` arguments are engine.Cluster objects (typed Any: engine imports this module).
if TYPE_CHECKING:
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.mig import UnitTable
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.workload import Shape

MILLI = 1000


class Typical(object):
    """Typical pods, from ``workload.typical_pods``: ``[((cpu, milli, num, spec), count)]``."""

    def __init__(self, items: Iterable[Tuple[Shape, int]], models: Sequence[str]) -> None:
        self.items = list(items)
        self.denominator = float(sum(n for shape, n in self.items)) or 1.0
        gpu = [(s, n) for s, n in self.items if s[2] > 0 and s[1] > 0]
        shapes = [s for s, n in gpu]
        self.cpu_only_weight = float(sum(n for s, n in self.items if not (s[2] > 0 and s[1] > 0)))
        self.u_vals = sorted(set(s[1] for s in shapes))
        uidx = dict((u, i) for i, u in enumerate(self.u_vals))
        self.t_cpu = np.array([nonzero_cpu(s[0]) for s in shapes], dtype=np.int64)
        self.t_milli = np.array([s[1] for s in shapes], dtype=np.int64)
        self.t_num = np.array([s[2] for s in shapes], dtype=np.int64)
        self.t_cnt = np.array([n for s, n in gpu], dtype=np.float64)
        self.t_u = np.array([uidx[s[1]] for s in shapes], dtype=np.int64)
        self.u = np.array(self.u_vals, dtype=np.int64)
        # accessible[model index + 1, t]; row 0 is "no GPU model" (never accessible)
        acc = np.zeros((len(models) + 1, len(gpu)), dtype=bool)
        for j, s in enumerate(shapes):
            spec = s[3]
            for m, name in enumerate(models):
                acc[m + 1, j] = (not spec) or (name in spec)
        self.acc = acc
        self.ntypes = len(gpu)

    def describe(self) -> List[Dict[str, Any]]:
        out = []
        for (cpu, milli, num, spec), n in self.items:
            out.append({"cpu_milli": cpu, "gpu_milli": milli, "num_gpu": num, "gpu_spec": "|".join(spec),
                        "share": round(n / self.denominator, 6)})
        return out


class NodeFrag(object):
    """Fragmentation of every node, kept up to date, and FGD's what-if scores."""

    def __init__(self, typical: Typical, cluster: Any, gl: np.ndarray, cpu_left: np.ndarray) -> None:
        self.t = typical
        self.model_row = cluster.model_idx + 1
        self.fd = self._fd(np.arange(cluster.n), gl, cpu_left)
        self.total_fd = float(self.fd.sum())

    # S_u, C_u of GPU rows (gl: [..., G], -1 for no GPU)
    def _sc(self, gl):
        u = self.t.u
        ge = gl[..., None] >= u  # [..., G, U]
        s = np.where(ge, gl[..., None], 0).sum(axis=-2)
        c = ge.sum(axis=-2)
        return s, c

    def _w(self, s, c, cpu_left, rows):
        """sum_t count_t [t fits] S_t for states s/c [..., U], cpu [...], model rows [...]."""
        t = self.t
        if not t.ntypes:
            return np.zeros(np.shape(cpu_left), dtype=np.float64)
        st = s[..., t.t_u]  # [..., T]
        ct = c[..., t.t_u]
        fits = (ct >= t.t_num) & (cpu_left[..., None] >= t.t_cpu) & t.acc[rows]
        return np.where(fits, st, 0).astype(np.float64) @ t.t_cnt

    def _fd(self, nodes, gl, cpu_left):
        gl = np.asarray(gl)
        left = np.where(gl >= 0, gl, 0).sum(axis=-1).astype(np.float64)
        s, c = self._sc(gl)
        w = self._w(s, c, np.asarray(cpu_left), self.model_row[nodes])
        return left * self.t.denominator - w

    def update(self, node: int, row: np.ndarray, cpu_left: int) -> None:
        new = float(self._fd(np.array([node]), row[None, :], np.array([cpu_left]))[0])
        self.total_fd += new - self.fd[node]
        self.fd[node] = new

    def total(self) -> float:
        return self.total_fd / self.t.denominator

    def node_milli(self) -> np.ndarray:
        return self.fd / self.t.denominator

    def fgd(self, nodes: np.ndarray, gl: np.ndarray, cpu_left: np.ndarray, cpu: int, num: int,
            milli: int) -> Tuple[np.ndarray, np.ndarray]:
        """FGD scores of placing a pod (cpu, num, milli) on ``nodes`` (GPU rows ``gl``).

        Returns ``(scores, gpu)``: the integer score per node and, for a sharing pod, the GPU
        index that gives it (first on ties).
        """
        t = self.t
        rows = self.model_row[nodes]
        old = self.fd[nodes]
        d = t.denominator
        left = np.where(gl >= 0, gl, 0).sum(axis=1).astype(np.float64)
        s, c = self._sc(gl)  # [X, U]
        cpu_new = cpu_left - cpu
        if num == 1 and milli < MILLI:
            u = t.u
            g_old = gl[:, :, None]  # [X, G, 1]
            g_new = gl[:, :, None] - milli
            was = g_old >= u
            now = g_new >= u
            s_new = s[:, None, :] - np.where(was, g_old, 0) + np.where(now, g_new, 0)  # [X, G, U]
            c_new = c[:, None, :] - was + now
            w = self._w(s_new, c_new, np.broadcast_to(cpu_new[:, None], gl.shape), rows[:, None])
            new = (left[:, None] - milli) * d - w
            scores = _score(old[:, None] - new, d)
            scores = np.where(gl >= milli, scores, -1)
            choice = scores.argmax(axis=1)
            return scores[np.arange(len(nodes)), choice], choice
        take = num * MILLI if num else 0
        s_new = s - take
        c_new = c - num
        w = self._w(s_new, c_new, cpu_new, rows)
        new = (left - take) * d - w
        return _score(old - new, d), np.zeros(len(nodes), dtype=np.int64)


class SliceFrag(object):
    """Fragmentation on the unit model (MIG layouts, whole GPUs): a typical pod t fits a node when it
    has ``num_t`` free units of the kind t asks for on that node's model (mig.request_kind) and CPU
    for it; then the free capacity of those units is not fragmented for t, all other idle capacity
    (other kinds, slices no instance covers) is. Values are scaled milli (x ``scale``)."""

    def __init__(self, typical: Typical, cluster: Any, table: UnitTable, present: Sequence[Set[int]], size_s: np.ndarray,
                 scale: int, nf: np.ndarray, total_left: np.ndarray, cpu_left: np.ndarray) -> None:
        from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig

        self.t = typical
        self.scale = scale
        self.size_s = size_s
        t = typical
        qt = np.full((len(cluster.models) + 1, t.ntypes), -1, dtype=np.int64)
        for m in range(len(cluster.models)):
            for j in range(t.ntypes):
                if t.acc[m + 1, j]:
                    qt[m + 1, j] = whatif_mig.request_kind(table, sorted(present[m]), int(t.t_milli[j]))
        self.qt = qt
        self.model_row = cluster.model_idx + 1
        self.fd = self._fd(np.arange(cluster.n), nf, total_left, cpu_left)
        self.total_fd = float(self.fd.sum())

    def _fd(self, nodes, nf, left, cpu_left):
        t = self.t
        left = np.asarray(left, dtype=np.float64)
        if not t.ntypes:
            return left * t.denominator
        q = self.qt[self.model_row[nodes]]  # [X, T]
        qq = np.maximum(q, 0)
        cnt = np.take_along_axis(np.asarray(nf), qq, axis=-1)  # [X, T]
        fits = (q >= 0) & (cnt >= t.t_num) & (np.asarray(cpu_left)[..., None] >= t.t_cpu)
        st = (cnt * self.size_s[qq]).astype(np.float64)
        w = np.where(fits, st, 0.0) @ t.t_cnt
        return left * t.denominator - w

    def update(self, node: int, nf_row: np.ndarray, left: int, cpu_left: int) -> None:
        new = float(self._fd(np.array([node]), nf_row[None, :], np.array([left]), np.array([cpu_left]))[0])
        self.total_fd += new - self.fd[node]
        self.fd[node] = new

    def total(self) -> float:
        return self.total_fd / (self.t.denominator * self.scale)

    def node_milli(self) -> np.ndarray:
        return self.fd / (self.t.denominator * self.scale)

    def fgd(self, nodes: np.ndarray, nf: np.ndarray, left: np.ndarray, cpu_left: np.ndarray, cpu: int, num: int,
            q: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
        """FGD scores of taking ``num`` units of kind ``q`` (per node) and ``cpu`` on ``nodes``."""
        old = self.fd[nodes]
        new_nf = np.array(nf, copy=True)
        new_left = np.asarray(left, dtype=np.int64).copy()
        if num:
            rows = np.arange(len(nodes))
            new_nf[rows, q] -= num
            new_left = new_left - self.size_s[q] * num
        new = self._fd(nodes, new_nf, new_left, cpu_left - cpu)
        return _score(old - new, self.t.denominator * self.scale), np.zeros(len(nodes), dtype=np.int64)


def _score(delta_fd, d):
    """FGD's node score from the change of F * D: int64(100 * sigmoid(dF / 1000))."""
    return (100.0 / (1.0 + np.exp(-(delta_fd / d) / 1000.0))).astype(np.int64)
