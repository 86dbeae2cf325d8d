# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU pods the scheduler cannot place, turned into planner demand (the closed loop, docs/closed-loop.md).

:func:`pending_demand` reads pods as ``kubernetes.core.k8s_info`` returns them and finds those that wait for a GPU:
phase ``Pending``, condition ``PodScheduled`` False with reason ``Unschedulable``, a container requesting an NVIDIA
resource (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-<profile>[.shared]``) and the scheduler's
message naming it (``0/4 nodes are available: 4 Insufficient nvidia.com/mig-3g.40gb``: what its FailedScheduling
event says). A pod pending for anything else (CPU, a taint, an affinity, not yet seen by the scheduler) is left out,
with the reason.

Each such pod joins the demand:

* a pod of an item of ``demand`` (label ``gpuops.k8s/demand-item`` or namespace + workload, as plan/workloads.py
  maps pods) raises that item's ``replicas`` to its running plus pending pods, when that is more than declared;
* the other pods make new items, one per namespace, workload and resource: tenant = namespace, name = workload,
  replicas = its pending plus running pods (running GPU pods of no item are demand too: a re-plan that left them
  out would take their slices away), sized so that the planner picks the profile they ask for - ``mig-3g.40gb`` ->
  ``memory_gb: 40, compute: 3/7`` (rounded down), ``isolation: strict``; ``nvidia.com/gpu: N`` -> whole GPUs
  (``gpus_per_replica: N``); ``gpu.shared`` -> ``isolation: shared`` with ``shared_memory_gb``.

Nodes (k8s_info Node resources) say how much of each resource the schedulable nodes offer, so the report can say
"no node offers nvidia.com/mig-3g.40gb" or "all 4 offered are taken". Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import math
import re
import time as _time
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import (
    GPU_RESOURCE, MIG_PREFIX, SHARED_SUFFIX, is_plugin_resource)
from ansible_collections.gpuops.k8s.plugins.module_utils.common import validation
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import workloads
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.demand import parse_demand

_PROFILE = re.compile(r"^(\d+)g\.(\d+)gb$")
_NAME_BAD = re.compile(r"[^a-z0-9-]+")


def _ts(value):
    """Seconds since the epoch of a Kubernetes timestamp (``2026-12-06T12:00:00Z``); None when absent or unreadable."""
    if not value:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _meta(pod):
    return pod.get("metadata") or {}


def gpu_requests(pod: Mapping[str, Any]) -> Dict[str, int]:
    """``{resource: count}`` of the NVIDIA resources a pod's containers request (limits when no request)."""
    out: Dict[str, int] = {}
    spec = pod.get("spec") or {}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        asked = dict(res.get("limits") or {})
        asked.update(res.get("requests") or {})
        for key, value in asked.items():
            if is_plugin_resource(key):
                n = validation.quantity_int(value, "pod %s/%s container %s resource %s" % (
                    _meta(pod).get("namespace", ""), _meta(pod).get("name", ""), c.get("name", ""), key))
                if n:
                    out[key] = out.get(key, 0) + n
    return out


def unschedulable_condition(pod: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The pod's ``PodScheduled`` condition when it is False with reason Unschedulable, else None."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and str(cond.get("status")) == "False" \
                and cond.get("reason") == "Unschedulable":
            return cond
    return None


def classify(pod: Mapping[str, Any], now: Optional[float] = None, min_pending_s: float = 0) -> Tuple[bool, Any]:
    """``(True, facts)`` for a pod waiting for a GPU resource, ``(False, reason)`` for any other pod."""
    meta = _meta(pod)
    phase = (pod.get("status") or {}).get("phase")
    if phase != "Pending":
        return False, "phase %s" % phase
    asked = gpu_requests(pod)
    if not asked:
        return False, "requests no NVIDIA resource"
    if (pod.get("spec") or {}).get("nodeName"):
        return False, "bound to node %s (starting)" % pod["spec"]["nodeName"]
    cond = unschedulable_condition(pod)
    if cond is None:
        return False, "not marked Unschedulable by the scheduler (yet)"
    message = str(cond.get("message") or "")
    short = [r for r in asked if ("Insufficient " + r) in message]
    if not short:
        return False, "unschedulable for another reason than its GPU resource: %s" % (message or "no message")
    since = _ts(cond.get("lastTransitionTime")) or _ts(meta.get("creationTimestamp"))
    now = float(now if now is not None else _time.time())
    if since is not None and now - since < float(min_pending_s):
        return False, "pending only %.0f s (min_pending_s %s)" % (now - since, min_pending_s)
    owner = None
    refs = meta.get("ownerReferences") or []
    if refs:
        owner = {"kind": refs[0].get("kind"), "name": refs[0].get("name")}
    return True, {"namespace": str(meta.get("namespace", "")), "name": str(meta.get("name", "")),
                  "labels": meta.get("labels") or {}, "owner": owner, "resources": asked, "short": sorted(short),
                  "message": message, "since": since,
                  "priority": (pod.get("spec") or {}).get("priority")}


def offered(nodes: Optional[List[Dict[str, Any]]]) -> Dict[str, int]:
    """``{resource: count}`` the schedulable nodes advertise (allocatable), from k8s_info Node resources."""
    out: Dict[str, int] = {}
    for n in nodes or []:
        if (n.get("spec") or {}).get("unschedulable"):
            continue
        for key, value in ((n.get("status") or {}).get("allocatable") or {}).items():
            if is_plugin_resource(key):
                try:
                    out[key] = out.get(key, 0) + validation.quantity_int(value, "node allocatable " + key)
                except GpuOpsError:
                    continue
    return out


def _floor(x, digits=4):
    return math.floor(x * 10 ** digits) / 10.0 ** digits


def size_for(resource: str, count: int, shared_memory_gb: float) -> Dict[str, Any]:
    """Demand fields (memory_gb, compute, isolation, gpus_per_replica) that make the planner pick ``resource``."""
    base = resource[:-len(SHARED_SUFFIX)] if resource.endswith(SHARED_SUFFIX) else resource
    shared = resource.endswith(SHARED_SUFFIX)
    if base == GPU_RESOURCE:
        if shared:
            return {"memory_gb": float(shared_memory_gb), "isolation": "shared", "kind": "inference"}
        return {"memory_gb": 1.0, "compute": 1.0, "isolation": "strict", "kind": "inference", "gpus_per_replica": count}
    profile = base[len(MIG_PREFIX):]
    m = _PROFILE.match(profile)
    if not m:
        raise GpuOpsError("cannot size %s: the planner hands out MIG profiles <g>g.<gb>gb only" % resource)
    slices = int(m.group(1))
    totals = set(mod.compute_slices for mod in gpu_catalog.CATALOG.values()
                 if any(gpu_catalog.label_safe(p.name) == profile for p in mod.profiles) and mod.compute_slices)
    total = max(totals) if totals else 7
    return {"memory_gb": float(m.group(2)), "compute": _floor(slices / float(total)),
            "isolation": "shared" if shared else "strict", "kind": "inference"}


def _item_name(text):
    name = _NAME_BAD.sub("-", str(text).lower()).strip("-")[:63].strip("-")
    return name or "pending"


def _owner(meta):
    refs = meta.get("ownerReferences") or []
    return {"kind": refs[0].get("kind"), "name": refs[0].get("name")} if refs else None


def running_gpu_pods(pods: Optional[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """The running pods that hold NVIDIA resources: ``[{namespace, name, labels, owner, resources, node}]``."""
    out = []
    for pod in pods or []:
        if (pod.get("status") or {}).get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        asked = gpu_requests(pod)
        if asked:
            meta = _meta(pod)
            out.append({"namespace": str(meta.get("namespace", "")), "name": str(meta.get("name", "")),
                        "labels": meta.get("labels") or {}, "owner": _owner(meta), "resources": asked,
                        "node": (pod.get("spec") or {}).get("nodeName")})
    return out


def pending_demand(pods: Optional[List[Dict[str, Any]]], demand: Optional[List[Dict[str, Any]]] = None,
                   nodes: Optional[List[Dict[str, Any]]] = None, now: Optional[float] = None, min_pending_s: float = 0,
                   shared_memory_gb: float = 10) -> Dict[str, Any]:
    """The demand with the pending GPU pods in it: ``{demand, changes, pending, ignored, resources}``.

    ``pods``: k8s_info Pod resources (pending and running; running GPU pods count toward their item's replicas);
    ``demand``: gpu_plan's demand list (validated as gpu_plan validates it); ``nodes``: k8s_info Node resources.
    """
    if not isinstance(pods, list):
        raise GpuOpsError("pods must be a list of Pod resources (kubernetes.core.k8s_info's resources), got %s"
                          % type(pods).__name__)
    demand = list(demand or [])
    items = parse_demand(demand) if demand else []
    min_pending_s = validation.number(min_pending_s, "min_pending_s", 0)
    shared_memory_gb = validation.number(shared_memory_gb, "shared_memory_gb", 0, strict_min=True)
    keys = [(it.tenant, it.name) for it in items]
    by_key = dict(((it.tenant, it.name), i) for i, it in enumerate(items))
    offer = offered(nodes)

    pending, ignored = [], []
    for pod in pods:
        if not isinstance(pod, dict):
            raise GpuOpsError("pods: each entry must be a Pod resource (a mapping), got %s" % type(pod).__name__)
        ok, facts = classify(pod, now, min_pending_s)
        if not ok:
            if gpu_requests(pod) and (pod.get("status") or {}).get("phase") == "Pending":
                meta = _meta(pod)
                ignored.append({"namespace": meta.get("namespace"), "name": meta.get("name"), "reason": facts})
            continue
        facts["item"] = workloads.item_for_pod(facts["namespace"], facts["name"], keys, facts["labels"], facts["owner"])
        pending.append(facts)

    running: Dict[Any, int] = {}
    busy: Dict[str, int] = {}
    extra: Dict[Any, Any] = {}
    for r in running_gpu_pods(pods):
        if r["node"]:
            busy[r["node"]] = busy.get(r["node"], 0) + 1
        key = workloads.item_for_pod(r["namespace"], r["name"], keys, r["labels"], r["owner"])
        if key is not None:
            running[key] = running.get(key, 0) + 1
            continue
        workload = workloads.workload_of(r["name"], r["owner"])
        for res, count in sorted(r["resources"].items()):
            extra.setdefault((r["namespace"], workload, res, count), {"running": [], "pending": []})["running"].append(r)
    new_demand = [dict(d) for d in demand]
    changes = []
    per_item: Dict[Any, Any] = {}
    for p in pending:
        if p["item"] is not None:
            per_item[p["item"]] = per_item.get(p["item"], 0) + 1
            continue
        workload = workloads.workload_of(p["name"], p["owner"])
        for res, count in sorted(p["resources"].items()):
            ekey = (p["namespace"], workload, res, count)
            extra.setdefault(ekey, {"running": [], "pending": []})["pending"].append(p)
    for key, n in sorted(per_item.items()):
        i = by_key[key]
        want = running.get(key, 0) + n
        before = items[i].replicas
        reason = "%d pending pod(s) and %d running: %d replicas wanted, %d declared" % (n, running.get(key, 0), want, before)
        if want > before:
            new_demand[i]["replicas"] = want
            changes.append({"tenant": key[0], "name": key[1], "field": "replicas", "before": before, "after": want,
                            "reason": reason})
        for p in pending:
            if p["item"] == key:
                p["reason"] = reason if want > before else "item %s/%s declares %d replicas already: %s" % (
                    key[0], key[1], before, reason)
    used_names = set(keys)
    for (ns, workload, res, count), group in sorted(extra.items()):
        # running GPU pods of no item hold their slices: they are demand too, or a re-plan would take them away
        name = _item_name(workload)
        if len([k for k in extra if k[0] == ns and _item_name(k[1]) == name]) > 1:
            name = _item_name("%s-%s" % (workload, res.split("/")[-1].replace(".", "-")))
        while (ns, name) in used_names:
            name = _item_name(name + "-x")
        used_names.add((ns, name))
        size = size_for(res, count, shared_memory_gb)
        per = size.pop("gpus_per_replica", None)
        n_run, n_pend = len(group["running"]), len(group["pending"])
        entry = {"tenant": ns, "name": name, "replicas": n_run + n_pend}
        entry.update(size)
        entry["resource"] = res
        if per and per > 1:
            entry["gpus_per_replica"] = per
        prios = [p["priority"] for p in group["pending"] if isinstance(p.get("priority"), int)]
        if prios and max(prios):
            entry["priority"] = max(prios)
        new_demand.append(entry)
        reason = "%d running and %d pending pod(s) of %s/%s (no demand item) ask for %s x%d: new item %s/%s" % (
            n_run, n_pend, ns, workload, res, count, ns, name)
        changes.append({"tenant": ns, "name": name, "field": "item", "before": None, "after": entry, "reason": reason})
        for p in group["pending"]:
            p["reason"] = reason
            p["item"] = (ns, name)

    resources: Dict[str, Any] = {}
    for p in pending:
        for res, count in p["resources"].items():
            r = resources.setdefault(res, {"pending_pods": 0, "requested": 0, "offered": offer.get(res, 0)})
            r["pending_pods"] += 1
            r["requested"] += count
    for res, r in resources.items():
        r["why"] = ("no schedulable node offers %s" % res) if not r["offered"] else (
            "the %d %s the schedulable nodes offer are taken" % (r["offered"], res))
    if new_demand:
        parse_demand(new_demand)  # what gpu_plan will be given is valid demand
    out_pending = [{"namespace": p["namespace"], "name": p["name"], "resources": p["resources"],
                    "item": {"tenant": p["item"][0], "name": p["item"][1]}, "reason": p.get("reason", ""),
                    "message": p["message"], "since": p["since"]} for p in pending]
    return {"demand": new_demand, "changes": changes, "pending": out_pending, "ignored": ignored,
            "resources": resources, "busy_nodes": busy, "changed": bool(changes)}
