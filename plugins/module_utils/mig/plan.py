# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure MIG planner: current GPU instances + desired counts -> minimal actions with placements.

Unlike mig-parted, which destroys every instance of a GPU whose profile counts differ and
recreates the whole layout, the plan keeps every instance that is still wanted (same GI profile,
same compute-instance split) wherever the rest of the target fits around it, destroys only the
difference and creates the missing instances at explicit placements.

* Everything is validated before a plan is returned: profiles exist on the GPU (the error names the
  valid ones), counts are within each profile's max instances, compute and memory slices fit,
  and a placement exists for the whole target.
* Which instances to keep is an exhaustive search (a GPU holds at most 7-8 GPU instances, so at
  most 2^8 subsets): keep as many busy instances as possible, then as many instances as possible,
  subject to the remaining target fitting in the free memory slices.
* A busy instance (processes running) is never destroyed unless ``force`` is set; then the plan
  marks its destroy action ``forced``.

Pure Python, no NVML, Python 3.9 compatible.
"""

from __future__ import annotations

from collections import Counter, namedtuple
from itertools import combinations
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog

# One GPU instance the target layout needs.
Target = namedtuple("Target", ["profile", "compute_instances"])

# The result of planning one GPU.
GpuPlan = namedtuple("GpuPlan", ["keep", "destroy", "create", "forced"])


def _key(item):
    return (item.profile, tuple(item.compute_instances))


def mig_device_names(profile: str, compute_instances: Tuple[Any, ...], gi_compute_slices: int) -> List[str]:
    """Names of the MIG devices (one per CI) of a GI: 3g.40gb with (1, 1, 1) -> 3 x 1c.3g.40gb."""
    out = []
    for c in compute_instances:
        out.append(profile if c == gi_compute_slices else "%dc.%s" % (c, profile))
    return out


def profile_map(profiles: Sequence[Any]) -> Dict[str, Any]:
    return dict((p.name, p) for p in profiles)


def layout_geometry(profiles: Sequence[Any], memory_slices: Optional[int] = None,
                    compute_slices: Optional[int] = None) -> Tuple[int, int]:
    """(memory slices, compute slices) of a GPU from its profiles unless given."""
    if memory_slices is None:
        memory_slices = max([max(p.placements) + p.memory_slices for p in profiles if p.placements] or [0])
    if compute_slices is None:
        compute_slices = max([p.compute_slices for p in profiles] or [0])
    return memory_slices, compute_slices


def find_profile(profiles: Sequence[Any], name: str, label: str = "GPU") -> Any:
    """The GiProfile called ``name`` in ``profiles``; the error names the valid profiles."""
    canon = gpu_catalog.canonical_profile_name(name)
    for p in profiles:
        if p.name == canon:
            return p
    valid = [p.name for p in profiles]
    if not valid:
        raise GpuOpsError("%s does not support MIG (no MIG profiles); %s cannot be used" % (label, name))
    raise GpuOpsError("profile %s does not exist on %s; valid profiles: %s" % (name, label, ", ".join(valid)),
                      valid_profiles=valid)


def valid_profile_names(profiles: Sequence[Any]) -> List[str]:
    """GI profiles and the CI profiles inside them (1c.3g.40gb ...), for error messages."""
    out = [p.name for p in profiles]
    for p in profiles:
        for c in gpu_catalog.ci_slice_options(p.compute_slices):
            if c != p.compute_slices:
                out.append("%dc.%s" % (c, p.name))
    return out


def targets_from_mig_devices(mig_devices: Mapping[str, Any], profiles: Sequence[Any], label: str = "GPU") -> List[Any]:
    """Turn a mig-devices map ({"3g.40gb": 1, "1c.3g.40gb": 3}) into the list of GIs to exist.

    A GI profile key asks for that many GIs with one full compute instance each. A CI profile key
    (``<C>c.<G>g.<GB>gb``) asks for compute instances of C slices inside GIs of that GI profile;
    as in mig-parted they are packed into as few GIs as possible (``1c.3g.40gb: 3`` -> one 3g.40gb
    GI with three 1c compute instances).
    """
    targets = []
    pools = {}
    for key in sorted(mig_devices):
        count = mig_devices[key]
        try:
            c, gi = gpu_catalog.parse_profile(key)
        except GpuOpsError:
            raise GpuOpsError("%s is not a MIG profile; valid profiles on %s: %s"
                              % (key, label, ", ".join(valid_profile_names(profiles))),
                              valid_profiles=valid_profile_names(profiles))
        p = find_profile(profiles, gi, label)
        if not count:
            continue
        if c is None:
            targets.extend([Target(p.name, (p.compute_slices,))] * count)
            continue
        options = gpu_catalog.ci_slice_options(p.compute_slices)
        if c not in options:
            valid = ["%dc.%s" % (o, p.name) for o in options if o != p.compute_slices]
            raise GpuOpsError("compute instance profile %s does not exist on %s; valid compute instance profiles "
                              "of %s: %s" % (key, label, p.name, ", ".join(valid) or "none"),
                              valid_profiles=valid_profile_names(profiles))
        pools.setdefault(p.name, []).extend([c] * count)
    for name in sorted(pools):
        p = find_profile(profiles, name, label)
        bins = []  # first-fit decreasing by compute slices
        for c in sorted(pools[name], reverse=True):
            for b in bins:
                if sum(b) + c <= p.compute_slices:
                    b.append(c)
                    break
            else:
                bins.append([c])
        targets.extend(Target(p.name, tuple(sorted(b, reverse=True))) for b in bins)
    return targets


def describe_targets(targets: List[Any]) -> str:
    counts = Counter()
    for t in targets:
        counts[t.profile if len(t.compute_instances) == 1 else "%s(%s)" % (
            t.profile, "+".join("%dc" % c for c in t.compute_instances))] += 1
    return ", ".join("%d x %s" % (n, k) for k, n in sorted(counts.items()))


def validate_targets(targets: List[Any], profiles: Sequence[Any], memory_slices: Optional[int] = None,
                     compute_slices: Optional[int] = None, label: str = "GPU") -> None:
    """Check counts, slices and that a placement exists for the whole target on an empty GPU."""
    pmap = profile_map(profiles)
    memory_slices, compute_slices = layout_geometry(profiles, memory_slices, compute_slices)
    counts = Counter(t.profile for t in targets)
    for name, n in sorted(counts.items()):
        p = pmap.get(name) or find_profile(profiles, name, label)
        if n > p.max_instances:
            raise GpuOpsError("%d x %s requested on %s but at most %d instances of %s fit"
                              % (n, name, label, p.max_instances, name),
                              profile=name, max_instances=p.max_instances)
    used_c = sum(pmap[t.profile].compute_slices for t in targets)
    used_m = sum(pmap[t.profile].memory_slices for t in targets)
    if used_c > compute_slices:
        raise GpuOpsError("layout %s needs %d compute slices but %s has %d"
                          % (describe_targets(targets), used_c, label, compute_slices),
                          compute_slices=compute_slices)
    if used_m > memory_slices:
        raise GpuOpsError("layout %s needs %d memory slices but %s has %d"
                          % (describe_targets(targets), used_m, label, memory_slices),
                          memory_slices=memory_slices)
    if place(targets, pmap, memory_slices) is None:
        raise GpuOpsError("layout %s cannot be placed on %s: no combination of the profiles' placements fits "
                          "in %d memory slices" % (describe_targets(targets), label, memory_slices))


def _mask(start, size):
    return ((1 << size) - 1) << start


def _placements_of(targets, pmap, memory_slices, occupied):
    """Every placement of ``targets`` in the free memory slices (bit mask ``occupied``), as ``(starts, used
    mask)``, in search order: largest and most constrained profiles first, lowest start first; equal targets
    take increasing starts so permutations of identical instances are not re-tried. ``starts`` is the same
    list each time (copy it to keep it)."""
    order = sorted(range(len(targets)), key=lambda i: (-pmap[targets[i].profile].memory_slices,
                                                       len(pmap[targets[i].profile].placements),
                                                       targets[i].profile, targets[i].compute_instances))
    starts = [None] * len(targets)
    full = (1 << memory_slices) - 1

    def rec(k, used, prev_key, prev_start):
        if k == len(order):
            yield starts, used
            return
        i = order[k]
        t = targets[i]
        p = pmap[t.profile]
        for s in sorted(p.placements):
            if _key(t) == prev_key and s <= prev_start:
                continue
            m = _mask(s, p.memory_slices)
            if m & used or (m | full) != full:
                continue
            starts[i] = s
            yield from rec(k + 1, used | m, _key(t), s)

    return rec(0, occupied, None, -1)


def place(targets: List[Any], pmap: Dict[str, Any], memory_slices: int, occupied: int = 0) -> Optional[List[int]]:
    """Starts for ``targets`` in the free memory slices (bit mask ``occupied``) or None: the first placement of
    an exhaustive backtracking search (``_placements_of``)."""
    for starts, dummy_used in _placements_of(targets, pmap, memory_slices, occupied):
        return list(starts)
    return None


def _free_placements(pmap, memory_slices, used):
    """How many (profile, start) placements are still free in the mask ``used``."""
    full = (1 << memory_slices) - 1
    n = 0
    for p in pmap.values():
        for s in p.placements:
            m = _mask(s, p.memory_slices)
            if not m & used and (m | full) == full:
                n += 1
    return n


def best_place(targets: List[Any], pmap: Dict[str, Any], memory_slices: int, occupied: int = 0,
               limit: int = 20000) -> Optional[List[int]]:
    """Like place() but, among all placements, the one that leaves the most room for later changes.

    Every solution is enumerated (at most ``limit``; a GPU has 8 memory slices, so there are few) and
    scored by the number of (profile, start) placements still free afterwards, so that new small
    instances do not fragment the free slices (a 1g next to a 4g goes where a 2g still fits beside
    it). Ties keep the lowest starts. None when nothing fits.
    """
    best, best_score = None, -1
    for n, (starts, used) in enumerate(_placements_of(targets, pmap, memory_slices, occupied)):
        if n >= limit:
            break
        score = _free_placements(pmap, memory_slices, used)
        if score > best_score:
            best, best_score = list(starts), score
    return best


def _keepable_subsets(cand, want):
    """The subsets of ``cand`` (as bit masks over its indexes, in increasing order) that keep no more
    instances of a kind than ``want`` holds: only those can be kept, so the others are never built."""
    per_key = {}
    for j, inst in enumerate(cand):
        per_key.setdefault(_key(inst), []).append(1 << j)
    masks = [0]
    for key, bits in per_key.items():
        picks = [sum(c) for n in range(min(len(bits), want[key]) + 1) for c in combinations(bits, n)]
        masks = [m | p for m in masks for p in picks]
    return sorted(masks)


def plan_gpu(profiles: Sequence[Any], current: List[Any], targets: List[Any], force: bool = False,
             memory_slices: Optional[int] = None, compute_slices: Optional[int] = None, label: str = "GPU") -> Any:
    """Plan one GPU. Returns GpuPlan(keep, destroy, create, forced).

    ``keep`` and ``destroy`` are lists of Instance, ``create`` a list of (Target, start) and
    ``forced`` the busy instances destroyed because of ``force``. Raises GpuOpsError (before
    anything changes) when the target is invalid or a busy instance would have to go without force.
    """
    memory_slices, compute_slices = layout_geometry(profiles, memory_slices, compute_slices)
    validate_targets(targets, profiles, memory_slices, compute_slices, label)
    pmap = profile_map(profiles)
    want = Counter(_key(t) for t in targets)
    cand = [inst for inst in current if _key(inst) in want]
    best = None
    for bits in _keepable_subsets(cand, want):
        kept = [cand[j] for j in range(len(cand)) if bits >> j & 1]
        have = Counter(_key(k) for k in kept)
        occupied = 0
        clash = False
        for k in kept:
            m = _mask(k.start, k.size)
            if m & occupied:
                clash = True
                break
            occupied |= m
        if clash:
            continue
        rest = []
        left = Counter(have)
        for t in targets:
            if left[_key(t)]:
                left[_key(t)] -= 1
            else:
                rest.append(t)
        starts = place(rest, pmap, memory_slices, occupied)
        if starts is None:
            continue
        score = (sum(1 for k in kept if k.busy), len(kept), sum(k.size for k in kept))
        if best is None or score > best[0]:
            best = (score, kept, list(zip(rest, starts)))
    if best is None:  # cannot happen after validate_targets (keeping nothing always fits)
        raise GpuOpsError("no placement found for %s on %s" % (describe_targets(targets), label))
    _score, kept, create = best
    occupied = 0
    for k in kept:
        occupied |= _mask(k.start, k.size)
    rest = [t for t, _s in create]
    starts = best_place(rest, pmap, memory_slices, occupied)
    if starts is not None:
        create = list(zip(rest, starts))
    kept_ids = set(id(k) for k in kept)
    destroy = [inst for inst in current if id(inst) not in kept_ids]
    busy = [d for d in destroy if d.busy]
    if busy and not force:
        wanted = [d for d in busy if _key(d) in want]
        raise GpuOpsError(
            "%s: the layout %s needs to destroy busy MIG instance(s) %s (processes are running on them%s); "
            "stop the workloads or set force: true"
            % (label, describe_targets(targets) or "(no instances)",
               ", ".join("%s gi %s at %d" % (d.profile, d.gpu_instance_id, d.start) for d in busy),
               "; kept profiles do not fit around them" if wanted else "; they are not in the target layout"),
            busy_instances=[{"profile": d.profile, "gpu_instance_id": d.gpu_instance_id,
                             "placement": {"start": d.start, "size": d.size}} for d in busy])
    create.sort(key=lambda ts: (ts[1], ts[0].profile))
    return GpuPlan(kept, destroy, create, busy)
