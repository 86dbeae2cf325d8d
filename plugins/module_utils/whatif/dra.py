# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic MIG through DRA in the replay with departures: ``sharing: dra-first-fit`` and ``sharing: dra-steered``.

No GPU holds a fixed MIG layout. Every GPU publishes every profile x placement as a device with counters, as
NVIDIA's DRA driver does with its ``DynamicMIG`` gate (tenancy/dra_dynamic.py makes the slices; docs/dra.md); an
instance is made when a claim is allocated and destroyed when its pod leaves, so both modes need
``departures: true``.

* **What a pod asks for.** As ``sharing: mig`` maps it (whatif/mig.py ``request_kind``): a pod of
  ``gpu_milli`` < 1000 asks for the smallest profile the planner hands out (no ``+me`` profiles) whose compute
  share *and* memory share are both at least ``gpu_milli`` / 1000 (fewest compute slices, then fewest memory
  slices), a whole GPU when none is large enough; a pod of ``num_gpu`` x 1000 asks for ``num_gpu`` whole GPUs.
  A trace model that cannot do MIG gets the geometry of ``mig_shape`` (as under ``mig``). A device counts as its
  compute share (1g on a 7-slice GPU: 142.9 milli).
* **Which node.** The scoring policy chooses among the nodes that can allocate the claim (kube-default by default,
  the same node filter and scores as the other modes). ``packing`` and ``fgd`` score the fixed-layout models'
  slices and are refused here.
* **Which device, ``dra-first-fit``** (the scheduler's rule): the first device of the profile, in the order the
  driver publishes the node's slices - GPUs by minor number, and within a GPU its devices sorted by name
  (tenancy/dra_dynamic.resource_slices, walked as the scheduler walks a pool) - whose counters still fit
  (tenancy/dra_dynamic.admission: exactly the catalog's MIG placement rules). A whole GPU is the device
  ``gpu-<minor>`` (Ampere: the full-size profile), which fits only on an empty GPU.
* **Which device, ``dra-steered``** (what the collection's steering taints make first fit do, with a planner that
  looks at fragmentation): among the node's GPUs whose counters fit the profile, the one already most used
  (allocated compute slices, then memory slices; ties: the lower minor); on it, the placement after which the
  largest profiles stay placeable - the counts of placeable devices per profile, largest profile first, compared
  lexicographically (so the largest free profile first of all); ties: publication order. The node is the
  scoring policy's either way: taints close devices, they do not score nodes.
* A claim for several devices of a fraction (``num_gpu`` > 1, ``gpu_milli`` < 1000) takes them one after the
  other by the same rule; the node is feasible when ``num_gpu`` of its GPUs fit the profile (enough, not needed).

Pure Python with numpy (controller side only), Python 3.9 compatible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as plan_options
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig

if TYPE_CHECKING:
    import random

SHARINGS = ("dra-first-fit", "dra-steered")
SCORINGS = ("kube-default", "random", "best-fit", "dot-product", "clustering")
MILLI = whatif_engine.MILLI
WHOLE = whatif_mig.WHOLE
# Where a pod's devices are (DraReplay.last_gpus): (unit kind, [(GPU index, device index)]).
DraGpus = Tuple[Optional[int], List[Tuple[int, int]]]


def check(sharings: Sequence[str], scorings: Sequence[str], departures: bool) -> None:
    """The options that go with the DRA sharings: departures, and a scoring that does not read fixed slices."""
    dra = [s for s in sharings if s in SHARINGS]
    if not dra:
        return
    if not departures:
        raise GpuOpsError("sharing %s needs departures: true (an instance is made when a pod's claim is allocated "
                          "and destroyed when the pod leaves, over the trace's time)" % dra[0])
    bad = [s for s in scorings if s not in SCORINGS]
    if bad:
        raise GpuOpsError("sharing %s does not go with scoring %s (it scores fixed MIG slices); valid with the DRA "
                          "sharings: %s" % (dra[0], ", ".join(bad), ", ".join(SCORINGS)), valid=list(SCORINGS))


def shape_host(shape: gpu_catalog.GpuModel) -> Dict[str, Any]:
    """gpu_info-like facts of a node with one GPU (minor 0) of ``shape``, MIG mode on."""
    return {"driver_version": "580.95.05", "cuda_driver_version": "13.0",
            "gpus": [{"index": 0, "minor": 0, "model": shape.key, "name": shape.variants[0].nvml_name,
                      "uuid": "GPU-whatif", "memory_total_mib": shape.total_memory_mib, "mig_mode_current": True}]}


class GpuShape(object):
    """One MIG-capable model as the driver publishes one of its GPUs, and the rules of both modes on it.

    A GPU's state is the bit mask of its allocated devices (bit i: ``names[i]``, publication order); the answers
    per (state, profile kind) are kept, so the counters are summed once per state met."""

    def __init__(self, shape: gpu_catalog.GpuModel, table: whatif_mig.UnitTable) -> None:
        self.shape = shape
        slices = dra_dynamic.resource_slices("whatif", shape_host(shape))
        self.admit = dra_dynamic.admission(slices)
        devices = [d for s in slices for d in s["spec"].get("devices") or []]  # the scheduler's walk
        self.names = [d["name"] for d in devices]
        usable = dict((p.name, p) for p in plan_options.usable_profiles(shape))
        self.kind_of: List[int] = []
        self.cost: List[Tuple[int, int]] = []  # (compute slices, memory slices) per device
        for d in devices:
            prof = ((d.get("attributes") or {}).get("profile") or {}).get("string")
            if prof is None:  # the whole GPU (Hopper, Blackwell)
                self.kind_of.append(WHOLE)
                self.cost.append((shape.compute_slices, shape.memory_slices))
            elif prof in usable:
                self.kind_of.append(table.kind(shape, usable[prof]))
                self.cost.append((usable[prof].compute_slices, usable[prof].memory_slices))
            else:
                self.kind_of.append(-1)  # +me profiles: never asked for
                self.cost.append((0, 0))
        if WHOLE not in self.kind_of:
            raise GpuOpsError("%s: no whole-GPU device or full-size profile published" % shape.key)  # pragma: no cover
        self.kinds = sorted(set(k for k in self.kind_of if k >= 0))
        # profiles largest first (steering's measure): kind -> rank
        sizes = sorted(set((-self.cost[i][0], -self.cost[i][1], k) for i, k in enumerate(self.kind_of) if k >= 0))
        self.by_size = [k for dummy_c, dummy_m, k in sizes]
        self._fits: Dict[Tuple[int, int], bool] = {}
        self._first: Dict[Tuple[int, int], int] = {}
        self._steer: Dict[Tuple[int, int], int] = {}
        self._room: Dict[int, Tuple[int, ...]] = {}
        self._used: Dict[int, Tuple[int, int]] = {}

    def taken(self, state: int) -> List[str]:
        return [n for i, n in enumerate(self.names) if state >> i & 1]

    def fits(self, state: int, dev: int) -> bool:
        key = (state, dev)
        ok = self._fits.get(key)
        if ok is None:
            ok = not (state >> dev & 1) and self.admit(self.taken(state) + [self.names[dev]])
            self._fits[key] = ok
        return ok

    def first(self, state: int, kind: int) -> int:
        """``dra-first-fit``: the first device of ``kind`` in publication order that fits (-1: none)."""
        key = (state, kind)
        got = self._first.get(key)
        if got is None:
            got = -1
            for i, k in enumerate(self.kind_of):
                if k == kind and self.fits(state, i):
                    got = i
                    break
            self._first[key] = got
        return got

    def room(self, state: int) -> Tuple[int, ...]:
        """Placeable devices per profile, largest profile first."""
        got = self._room.get(state)
        if got is None:
            count = dict((k, 0) for k in self.by_size)
            for i, k in enumerate(self.kind_of):
                if k >= 0 and self.fits(state, i):
                    count[k] += 1
            got = tuple(count[k] for k in self.by_size)
            self._room[state] = got
        return got

    def steered(self, state: int, kind: int) -> int:
        """``dra-steered``: the fitting device of ``kind`` that leaves the most room (ties: publication order)."""
        key = (state, kind)
        got = self._steer.get(key)
        if got is None:
            got, best = -1, None
            for i, k in enumerate(self.kind_of):
                if k == kind and self.fits(state, i):
                    r = self.room(state | 1 << i)
                    if best is None or r > best:
                        got, best = i, r
            self._steer[key] = got
        return got

    def used(self, state: int) -> Tuple[int, int]:
        """(compute slices, memory slices) allocated."""
        got = self._used.get(state)
        if got is None:
            c = m = 0
            for i, cost in enumerate(self.cost):
                if state >> i & 1:
                    c += cost[0]
                    m += cost[1]
            got = (c, m)
            self._used[state] = got
        return got


class _NoFrag(object):
    """The fragmentation measure of the fixed-layout models does not apply: nothing measured."""

    def update(self, *args: Any) -> None:
        return None

    def total(self) -> float:
        return 0.0


class DraReplay(whatif_engine._Replay):
    """One replay of ``dra-first-fit`` (``steered`` False) or ``dra-steered`` (True); the engine interface of
    departures.DepartureReplay (choose, place, unplace, held_gpus, last_gpus)."""

    def __init__(self, cluster: whatif_engine.Cluster, arrivals: Sequence[Any], scoring: str, rng: random.Random,
                 steered: bool, mig_shape: str = whatif_mig.DEFAULT_SHAPE,
                 percentage_of_nodes_to_score: Optional[int] = None, tie_break: Optional[str] = None) -> None:
        if scoring not in SCORINGS:
            raise GpuOpsError("scoring %s does not go with the DRA sharings; valid: %s" % (scoring, ", ".join(SCORINGS)),
                              valid=list(SCORINGS))
        whatif_engine._Replay.__init__(self, cluster, arrivals, scoring, rng, percentage_of_nodes_to_score, tie_break)
        np = whatif_engine.np
        self.np = np
        self.steered_mode = steered
        self.table = whatif_mig.UnitTable()
        self.shapes: List[GpuShape] = []
        by_key: Dict[str, GpuShape] = {}
        for m in cluster.models:
            s = whatif_mig.shape_of(m, mig_shape)
            if s.key not in by_key:
                by_key[s.key] = GpuShape(s, self.table)
            self.shapes.append(by_key[s.key])
        n, g = cluster.n, cluster.g
        self.nk = len(self.table.kinds)
        self.size = [k.size_milli for k in self.table.kinds]
        self.state = [[0] * int(cluster.ngpu[i]) for i in range(n)]
        self.used = np.zeros((n, g), dtype=bool)
        self.nf = np.zeros((n, self.nk), dtype=np.int64)  # GPUs of the node that fit each kind
        self.alloc = np.zeros(n, dtype=np.float64)  # milli allocated per node
        self._kmap: Dict[int, Any] = {}
        for i in range(n):
            self._refresh(i)
        self.frag = _NoFrag()

    def _shape(self, node: int) -> Optional[GpuShape]:
        m = int(self.c.model_idx[node])
        return self.shapes[m] if m >= 0 else None

    def _refresh(self, node: int) -> None:
        sh = self._shape(node)
        row = self.nf[node]
        row[:] = 0
        if sh is None:
            return
        for st in self.state[node]:
            for k in sh.kinds:
                if sh.first(st, k) >= 0:
                    row[k] += 1

    def kind_nodes(self, milli: int) -> Any:
        """Unit kind per node for a per-GPU request of ``milli`` (-1 on nodes without GPUs)."""
        q = self._kmap.get(milli)
        if q is None:
            per_model = [whatif_mig.request_kind(self.table, s.kinds, milli) for s in self.shapes] + [-1]
            q = self.np.array(per_model, dtype=self.np.int64)[self.c.model_idx]
            self._kmap[milli] = q
        return q

    def free_milli(self, idx: Any) -> Any:
        return self.c.ngpu[idx] * float(MILLI) - self.alloc[idx]

    def request_milli(self, num: int, milli: int, idx: Any) -> Union[float, Any]:
        if num == 0:
            return 0.0
        q = self.kind_nodes(milli)[idx]
        return self.np.array(self.size, dtype=self.np.float64)[self.np.maximum(q, 0)] * num

    def feasible(self, cpu: int, mem: int, num: int, milli: int, spec: Tuple[str, ...]) -> Any:
        f = self._base_feasible(cpu, mem, num, spec)
        if num > 0:
            q = self.kind_nodes(milli)
            f &= (q >= 0) & (self.nf[self.np.arange(self.c.n), self.np.maximum(q, 0)] >= num)
        return f

    def score_packing(self, idx: Any, num: int, milli: int) -> Any:  # pragma: no cover - refused in __init__
        raise GpuOpsError("scoring packing does not go with the DRA sharings")

    def score_fgd(self, idx: Any, cpu: int, num: int, milli: int) -> Any:  # pragma: no cover - refused in __init__
        raise GpuOpsError("scoring fgd does not go with the DRA sharings")

    def pick(self, node: int, kind: int) -> Tuple[int, int]:
        """(GPU index, device index) the next device of ``kind`` on ``node`` takes, by the mode's rule."""
        sh = self._shape(node)
        if sh is None:  # pragma: no cover - feasible() keeps GPU pods off nodes without GPUs
            raise GpuOpsError("node %s has no GPU" % self.c.names[node])
        states = self.state[node]
        if not self.steered_mode or kind == WHOLE:
            for gi, st in enumerate(states):
                dev = sh.first(st, kind)
                if dev >= 0:
                    return gi, dev
            raise GpuOpsError("no GPU of node %s fits the claim" % self.c.names[node])  # pragma: no cover
        best = None
        for gi, st in enumerate(states):
            dev = sh.steered(st, kind)
            if dev >= 0:
                c, m = sh.used(st)
                key = (-c, -m, gi)
                if best is None or key < best[0]:
                    best = (key, gi, dev)
        if best is None:
            raise GpuOpsError("no GPU of node %s fits the claim" % self.c.names[node])  # pragma: no cover
        return best[1], best[2]

    def place(self, node: int, cpu: int, mem: int, num: int, milli: int, hint: Any) -> float:
        self._place_common(node, cpu, mem, num, milli)
        self.last_gpus: DraGpus = (None, [])
        got = 0.0
        if num:
            q = int(self.kind_nodes(milli)[node])
            taken = []
            for dummy in range(num):
                gi, dev = self.pick(node, q)
                self.state[node][gi] |= 1 << dev
                self.used[node, gi] = True
                taken.append((gi, dev))
            got = self.size[q] * num
            self.alloc[node] += got
            self.last_gpus = (q, taken)
            self._refresh(node)
        return got

    def unplace(self, node: int, cpu: int, mem: int, num: int, milli: int, gpus: DraGpus) -> float:
        """A pod placed on ``gpus`` (``last_gpus`` after its :meth:`place`) leaves: its instances are destroyed."""
        self._unplace_common(node, cpu, mem, num, milli)
        q, taken = gpus
        got = 0.0
        if num and q is not None:
            for gi, dev in taken:
                self.state[node][gi] &= ~(1 << dev)
                self.used[node, gi] = self.state[node][gi] != 0
            got = self.size[q] * num
            self.alloc[node] -= got
            self._refresh(node)
        return got

    def held_gpus(self) -> int:
        """GPUs with at least one instance (a pod) on them."""
        return int(self.used.sum())

    def devices(self, node: int) -> List[List[str]]:
        """The device names allocated now on each GPU of ``node`` (publication order; minor = GPU index)."""
        sh = self._shape(node)
        if sh is None:
            return []
        return [[n.replace("gpu-0", "gpu-%d" % gi, 1) for n in sh.taken(st)] for gi, st in enumerate(self.state[node])]
