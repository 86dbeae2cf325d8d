# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Re-plan without a drain on ``dra-dynamic`` nodes: which MIG placements each GPU keeps open (docs/dra.md).

:func:`open_placements` takes the nodes' dynamic ResourceSlices (as NVIDIA's driver publishes them with DynamicMIG,
``tenancy/dra_dynamic``), the ResourceClaims (their ``status.allocation``: the devices in use) and the pending pods
(the MIG profiles they ask for, through a claim or through the extended resource ``nvidia.com/mig-<profile>`` a
DeviceClass serves), and returns per node ``open: {"<gpu index>": [{profile, start}]}``, the map
``gpuops.k8s.dra_steering_rules`` closes every other device of those GPUs with:

* every allocated placement stays open - never close what is in use (a NoSchedule taint would not evict it, but the
  plan lists it so that the plan is the whole truth of the GPU); a GPU whose whole-GPU device is allocated is left
  out of the map (no rule can name the whole GPU open, and its counters admit nothing else anyway);
* each pending pod's profiles get placements, the pods largest first (memory slices, then multiprocessors), each
  profile at the placement with the best score among the devices whose counters still fit beside what is in use
  and what was chosen before (the scheduler's own admission rule, which matches the catalog's MIG placement rules -
  tests/unit/plugins/module_utils/tenancy/test_dra_dynamic.py): (1) the GPU with the fewest multiprocessors left
  after it (best fit: a partly used GPU before an idle one, so idle GPUs stay whole), (2) the most devices of that
  GPU that could still be allocated one more after it (the placement that fragments least: on an idle H100 3g.40gb
  goes to slices 4-7, leaving 4g.40gb at 0 possible), (3) the lowest node, GPU and start. A pod with several
  profiles is placed on one node;
* a pod that fits nowhere is ``unplaced`` with the reason; GPUs with nothing in use and nothing planned are left
  out of the map (fully open) unless ``close_idle``, where they get an empty list (closed).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import MIG_PREFIX
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic as gpu_dra_dynamic

# the scheduler's words for a pod whose claims (or extended resources served through DRA) cannot be allocated
# (k8s.io/kubernetes v1.37.2 pkg/scheduler/framework/plugins/dynamicresources, noderesources)
DRA_UNSCHEDULABLE = ("cannot allocate all claims", "cannot fit resource", "cannot schedule extended resource claim")
_CLASS_PROFILE = re.compile(r"\.profile\s*==\s*['\"]([^'\"]+)['\"]")
_CLASS_NAME = re.compile(r"^mig-(.+)\.nvidia\.com$")


def _meta(obj):
    return (obj or {}).get("metadata") or {}


def _ref(obj):
    return "%s/%s" % (_meta(obj).get("namespace", ""), _meta(obj).get("name", ""))


def class_profiles(classes: Optional[Sequence[Any]]) -> Dict[str, str]:
    """``{DeviceClass name: MIG profile}`` of the classes whose CEL selector names one profile."""
    out = {}
    for c in classes or []:
        for sel in ((c or {}).get("spec") or {}).get("selectors") or []:
            m = _CLASS_PROFILE.search(str((sel.get("cel") or {}).get("expression") or ""))
            if m:
                out[str(_meta(c).get("name"))] = gpu_catalog.canonical_profile_name(m.group(1))
    return out


def _class_profile(name, by_class):
    if name in by_class:
        return by_class[name]
    m = _CLASS_NAME.match(str(name or ""))
    return gpu_catalog.canonical_profile_name(m.group(1)) if m else None


def pending_requests(pods: Optional[Sequence[Any]], claims: Optional[Sequence[Any]] = None,
                     classes: Optional[Sequence[Any]] = None) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``(requests, ignored)``: the pods the scheduler cannot place because of their MIG devices through DRA,
    ``[{pod, profiles, node_selector}]`` (profiles from ``nvidia.com/mig-<profile>`` requests and from the
    unallocated claims' requests, by DeviceClass), and the other pending pods asking for MIG with the reason."""
    by_claim = dict((_ref(c), c) for c in claims or [])
    by_class = class_profiles(classes)
    requests, ignored = [], []
    for pod in pods or []:
        if not isinstance(pod, dict):
            raise GpuOpsError("pods: each entry must be a Pod resource (a mapping), got %s" % type(pod).__name__)
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if status.get("phase") != "Pending" or spec.get("nodeName") or _meta(pod).get("deletionTimestamp"):
            continue
        profiles: List[str] = []
        for c in spec.get("containers") or []:
            res = c.get("resources") or {}
            asked = dict(res.get("limits") or {})
            asked.update(res.get("requests") or {})
            for key, value in sorted(asked.items()):
                if key.startswith(MIG_PREFIX) and not key.endswith(".shared"):
                    profiles.extend([gpu_catalog.canonical_profile_name(key[len(MIG_PREFIX):])] * int(str(value)))
        generated = dict((s.get("name"), s.get("resourceClaimName")) for s in status.get("resourceClaimStatuses") or [])
        for pc in spec.get("resourceClaims") or []:
            cname = pc.get("resourceClaimName") or generated.get(pc.get("name"))
            claim = by_claim.get("%s/%s" % (_meta(pod).get("namespace", ""), cname)) if cname else None
            if claim is None or (claim.get("status") or {}).get("allocation"):
                continue
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                ex = r.get("exactly") or {}
                profile = _class_profile(ex.get("deviceClassName"), by_class)
                if profile is not None:
                    profiles.extend([profile] * int(ex.get("count") or 1))
        if not profiles:
            continue
        cond = [c for c in status.get("conditions") or []
                if (c.get("type"), str(c.get("status")), c.get("reason")) == ("PodScheduled", "False", "Unschedulable")]
        message = str(cond[0].get("message") or "") if cond else ""
        if not cond or not any(m in message for m in DRA_UNSCHEDULABLE):
            ignored.append({"pod": _ref(pod), "reason": "not unschedulable for its MIG devices: %s"
                            % (message or "not marked Unschedulable by the scheduler (yet)")})
            continue
        requests.append({"pod": _ref(pod), "profiles": profiles, "node_selector": spec.get("nodeSelector") or {}})
    return requests, ignored


class _Node(object):
    """One node's devices, counters and what is taken on it."""

    def __init__(self, name, slices, labels):
        self.name = name
        self.labels = labels or {}
        self.devices, self.sets = gpu_dra_dynamic.slice_devices(slices)
        self.admit = gpu_dra_dynamic.admission(slices)
        self.where = dict((n, gpu_dra_dynamic.device_placement(d)) for n, d in self.devices.items())
        self.gpus = sorted(set(p["gpu"] for p in self.where.values() if p["gpu"] is not None))
        self.mig = dict((g, sorted((n for n, p in self.where.items() if p["gpu"] == g and p["profile"]),
                                   key=lambda n: self.where[n]["start"])) for g in self.gpus)
        self.cost = dict((n, dict((c["counterSet"], gpu_dra_dynamic._qty_int(c["counters"]["multiprocessors"]["value"]))
                                  for c in d.get("consumesCounters") or [] if "multiprocessors" in c["counters"]))
                         for n, d in self.devices.items())
        self.taken: List[str] = []

    def mp_left(self, gpu, taken):
        sets = set(cs for n in self.mig.get(gpu, []) for cs in self.cost[n])
        total = sum(self.sets.get(cs, {}).get("multiprocessors", 0) for cs in sets)
        return total - sum(v for n in taken if self.where[n]["gpu"] == gpu for cs, v in self.cost[n].items())

    def best(self, profile, taken):
        """``(score, device)`` of the best placement of ``profile`` beside ``taken``, or None."""
        out = None
        for gpu in self.gpus:
            for name in self.mig[gpu]:
                if self.where[name]["profile"] != profile or not self.admit(taken + [name]):
                    continue
                after = taken + [name]
                options = sum(1 for other in self.mig[gpu] if other not in after and self.admit(after + [other]))
                score = (self.mp_left(gpu, after), -options, gpu, self.where[name]["start"])
                if out is None or score < out[0]:
                    out = (score, name)
        return out


def _size(profiles):
    def one(p):
        parsed = re.match(r"^(\d+)g\.(\d+)gb", p)
        return (int(parsed.group(2)), int(parsed.group(1))) if parsed else (0, 0)
    sizes = [one(p) for p in profiles]
    return (sum(s[0] for s in sizes), sum(s[1] for s in sizes))


def open_placements(slices: Any, claims: Any = None, pods: Any = None, nodes: Any = None, k8s_nodes: Any = None,
                    classes: Any = None, close_idle: bool = False) -> Dict[str, Any]:
    """The placements to keep open on each ``dra-dynamic`` node.

    ``slices``: ResourceSlices (k8s_info; those of driver gpu.nvidia.com whose pool is one of ``nodes`` count);
    ``claims``: ResourceClaims (all namespaces); ``pods``: pods (the pending ones are the demand); ``nodes``: the
    names of the dra-dynamic nodes (default every pool of the slices); ``k8s_nodes``: Node resources (their labels
    against the pods' nodeSelector); ``classes``: DeviceClasses (which profile a claim's class selects).

    Returns ``{nodes: {node: {open, in_use, placed, gpus}}, unplaced, ignored, skipped, summary}`` (summary: lines
    for the log).
    """
    if not isinstance(slices, list):
        raise GpuOpsError("slices must be a list of ResourceSlices (kubernetes.core.k8s_info), got %s"
                          % type(slices).__name__)
    if claims is not None and not isinstance(claims, list):
        raise GpuOpsError("claims must be a list of ResourceClaims, got %s" % type(claims).__name__)
    by_pool: Dict[str, List[Any]] = {}
    for s in slices:
        spec = (s or {}).get("spec") or {}
        if spec.get("driver") == gpu_dra.DRIVER:
            by_pool.setdefault(str((spec.get("pool") or {}).get("name")), []).append(s)
    names = sorted(by_pool) if nodes is None else sorted(set(str(n) for n in nodes))
    labels = dict((str(_meta(n).get("name")), _meta(n).get("labels") or {}) for n in k8s_nodes or [])
    skipped = [{"node": n, "reason": "no ResourceSlices of driver %s (is the DRA driver running there?)"
                % gpu_dra.DRIVER} for n in names if n not in by_pool]
    state = dict((n, _Node(n, by_pool[n], labels.get(n))) for n in names if n in by_pool)

    out: Dict[str, Any] = {}
    for n, node in state.items():
        out[n] = {"open": {}, "in_use": [], "placed": [], "gpus": node.gpus}
    whole = set()
    for a in gpu_dra_dynamic.claim_allocations(claims):
        if str(a["pool"]) not in state:
            continue
        node = state[str(a["pool"])]
        if a["device"] not in node.devices:
            raise GpuOpsError("claim %s holds device %s of pool %s, which its ResourceSlices do not publish: the "
                              "slices are stale or the driver renamed its devices; re-publish them before steering"
                              % (a["claim"], a["device"], node.name))
        where = node.where[a["device"]]
        if a["device"] not in node.taken:
            node.taken.append(a["device"])
        if where["profile"] is None:
            whole.add((node.name, where["gpu"]))
        out[node.name]["in_use"].append(dict(where, device=a["device"], claim=a["claim"]))

    requests, ignored = pending_requests(pods, claims, classes)
    unplaced = []
    for req in sorted(requests, key=lambda r: (tuple(-x for x in _size(r["profiles"])), r["pod"])):
        profiles = sorted(req["profiles"], key=lambda p: tuple(-x for x in _size([p])) + (p,))
        best: Optional[Tuple[Any, _Node, List[str]]] = None
        for node in state.values():
            if any(node.labels.get(k) != str(v) for k, v in req["node_selector"].items()):
                continue  # a node whose labels are unknown (no k8s_nodes) matches no nodeSelector
            taken, picks, first = list(node.taken), [], None  # type: List[str], List[str], Any
            for p in profiles:
                got = node.best(p, taken)
                if got is None:
                    break
                first = got[0] if first is None else first
                taken.append(got[1])
                picks.append(got[1])
            if len(picks) == len(profiles) and (best is None or first < best[0]):
                best = (first, node, picks)
        if best is None:
            unplaced.append({"pod": req["pod"], "profiles": req["profiles"],
                             "reason": "no dra-dynamic node matching its nodeSelector has room for %s beside the "
                                       "devices in use" % " + ".join(req["profiles"])})
            continue
        node = best[1]
        node.taken.extend(best[2])
        for name in best[2]:
            out[node.name]["placed"].append(dict(node.where[name], device=name, pod=req["pod"]))

    for n, node in state.items():
        for gpu in node.gpus:
            if (n, gpu) in whole or not node.mig.get(gpu):
                continue
            keep = sorted(set((node.where[d]["profile"], node.where[d]["start"]) for d in node.taken
                              if node.where[d]["gpu"] == gpu and node.where[d]["profile"]), key=lambda x: (x[1], x[0]))
            if keep or close_idle:
                out[n]["open"][str(gpu)] = [{"profile": p, "start": s} for p, s in keep]
    return {"nodes": out, "unplaced": unplaced, "ignored": ignored, "skipped": skipped,
            "summary": _summary(out, unplaced, skipped)}


def _summary(out, unplaced, skipped):
    lines = []
    for n, plan in sorted(out.items()):
        used = set(u["device"] for u in plan["in_use"])
        new = set(p["device"] for p in plan["placed"])
        lines.append("%s: %d device(s) in use, %d placed for pending pods (%s)" % (
            n, len(used), len(new), ", ".join(sorted(new)) or "none"))
        for gpu in plan["gpus"]:
            if str(gpu) in plan["open"]:
                lines.append("%s GPU %d open: %s" % (n, gpu, ", ".join(
                    "%s@%d" % (e["profile"], e["start"]) for e in plan["open"][str(gpu)]) or "nothing (closed)"))
            else:
                lines.append("%s GPU %d: no rules (whole GPU in use, or idle and left open)" % (n, gpu))
    lines.extend("unplaced: %s: %s" % (u["pod"], u["reason"]) for u in unplaced)
    lines.extend("skipped: %s: %s" % (s["node"], s["reason"]) for s in skipped)
    return lines
