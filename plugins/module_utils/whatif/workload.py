# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The arrival sequence of a replay and the "typical pods" of the fragmentation measure.

Protocol of the FGD artefact's published experiments (hkust-adsl/kubernetes-scheduler-simulator
@ 8f3d641, ``experiments/run_scripts/generate_run_scripts.py`` -> ``scripts/generate_config_and_run.py
--shuffle-pod=true -tune 1.3 -tuneseed <42..51>``; ``pkg/simulator/core.go`` ``Simulate``,
``pkg/simulator/simulator.go`` ``SortClusterPods`` / ``TunePodsByNodeTotalResource``):

1. order: the trace's pods sorted by name, then shuffled with the seed (``order: shuffle``); or in
   creation order (``order: creation``: creation time, then name; pods without a time last), or as
   given (``order: file``). Pods have no departures (the artefact's converter drops the times).
2. workload inflation ("tuning") to ``inflation`` x the cluster's GPU capacity: while the total
   GPU request of the pods is below the target, pods are drawn with replacement (uniformly, seeded)
   from the trace and appended; the first draw that would exceed the target ends it. When the
   trace already requests more, pods are removed at random until the total fits.

GPU request of a pod = ``num_gpu x gpu_milli`` (the trace's own request, whatever the sharing mode
later makes of it).

Typical pods (``pkg/utils/frag.go`` ``GetTypicalPods``, config ``podPopularityThreshold: 95``,
``podIncreaseStep: 1``, CPU pods included): the distinct pod shapes (CPU, per-GPU milli, GPU
count, GPU model constraint) of the trace, most frequent first, until they cover 95 % of the pods;
their frequencies renormalised to sum to 1. They define the fragmentation measure (frag.py).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Iterable, List, Optional, Sequence, Tuple, TypeVar

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

if TYPE_CHECKING:
    import random

    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.data import Pod

MILLI = 1000
ORDERS = ("shuffle", "creation", "file")
# The scheduler counts a CPU request of 0 as 100 milli-CPU (schedutil.DefaultMilliCPURequest); the
# artefact's typical pods and scores use that non-zero request.
DEFAULT_MILLI_CPU = 100

# A typical pod's shape: (cpu_milli, gpu_milli, num_gpu, gpu_spec).
Shape = Tuple[int, int, int, Tuple[str, ...]]
# One arrival of the replay engine: (cpu_milli, memory_mib, num_gpu, gpu_milli as the GPU model reads it, the
# trace's request_milli, gpu_spec).
Arrival = Tuple[int, int, int, int, int, Tuple[str, ...]]
_ShapeT = TypeVar("_ShapeT")


def request_milli(pod: Pod) -> int:
    return pod.num_gpu * pod.gpu_milli


def ordered(pods: Iterable[Pod], order: str, rng: random.Random) -> List[Pod]:
    """The pods in arrival order (``rng``: a ``random.Random``)."""
    if order == "file":
        return list(pods)
    by_name = sorted(pods, key=lambda p: p.name)
    if order == "shuffle":
        rng.shuffle(by_name)
        return by_name
    if order == "creation":
        big = float("inf")
        return sorted(by_name, key=lambda p: (p.creation_time if p.creation_time is not None else big, p.name))
    raise GpuOpsError("order must be one of %s, not %r" % (", ".join(ORDERS), order))


def inflate(sequence: Sequence[Pod], pods: Iterable[Pod], capacity_milli: float, inflation: Optional[float],
            rng: random.Random) -> Tuple[List[Pod], int, int]:
    """Tune ``sequence`` to ``inflation`` x ``capacity_milli`` of GPU request (see module doc).

    ``pods`` is the trace (the population drawn from, sorted by name as the artefact does).
    Returns ``(arrivals, added, removed)``.
    """
    if not inflation or inflation <= 0:
        return list(sequence), 0, 0
    target = inflation * capacity_milli
    total = sum(request_milli(p) for p in sequence)
    out = list(sequence)
    added = removed = 0
    if total < target:
        population = sorted(pods, key=lambda p: p.name)
        if not any(request_milli(p) for p in population):
            return out, 0, 0
        while True:
            pod = population[rng.randrange(len(population))]
            req = request_milli(pod)
            if total + req > target:
                break
            total += req
            out.append(pod._replace(name="%s-tuned-%d" % (pod.name, added)))
            added += 1
    elif total > target:
        while total > target and out:
            i = rng.randrange(len(out))
            total -= request_milli(out[i])
            del out[i]
            removed += 1
    return out, added, removed


def nonzero_cpu(cpu_milli: int) -> int:
    return cpu_milli if cpu_milli > 0 else DEFAULT_MILLI_CPU


def typical_pods(shapes: Iterable[_ShapeT], threshold: float = 95) -> List[Tuple[_ShapeT, int]]:
    """``[(shape, count)]`` of the most frequent shapes covering ``threshold`` % of ``shapes``.

    ``shapes``: one hashable, orderable shape per pod, ``(cpu_milli, gpu_milli, num_gpu, spec)``.
    Ties in count are broken by the shape, larger first (the artefact sorts its list in reverse).
    The returned counts are the raw counts; their sum is the normaliser.
    """
    counts = Counter(shapes)
    if not counts:
        return []
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total = float(sum(counts.values()))
    expected = threshold * total / 100.0
    out = []
    cum = 0
    for shape, n in ranked:
        if cum >= expected:
            break
        out.append((shape, n))
        cum += n
    return out
