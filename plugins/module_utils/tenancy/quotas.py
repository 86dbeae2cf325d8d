# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tenants: namespaces with GPU ResourceQuotas (full GPUs, shared GPUs, MIG slices), LimitRanges, PriorityClasses
with preemption, and the capacity check of quotas against the cluster's allocatable GPUs (roles gpu_tenancy and
gpu_queueing).

Pure Python, no Kubernetes client, Python 3.9 compatible. Input the cluster would silently ignore (for example a
``limits.nvidia.com/gpu`` quota key) comes back corrected, with a warning; facts follow
shared/reference/k8s-gpu-stack.md.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import check_gpu_resource, is_gpu_resource_key
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import (
    DNS1123_LABEL_RE, DNS1123_SUBDOMAIN_RE, LABEL_VALUE_RE, check_keys, choice, fmt, integer, quantity_int)

MAX_USER_PRIORITY = 1000000000
MIN_PRIORITY = -2147483648
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
CAPACITY_POLICIES = ("fail", "warn", "ignore")
PRIORITY_CHANGE_POLICIES = ("fail", "replace")


def normalize_quota_hard(hard: Optional[Dict[str, Any]], where: str = "quota") -> Tuple[Any, ...]:
    """Normalize ``spec.hard`` of a ResourceQuota.

    GPU keys (anything with ``nvidia.com/``) must be ``requests.<resource>``: Kubernetes only
    enforces that form for extended resources. ``limits.<resource>`` and the bare ``<resource>``
    are accepted by the API but never enforced, so they are converted with a warning. MIG
    resource names are checked against the GPU catalog. Other keys are left as they are.
    Returns ``(hard, warnings)``.
    """
    if hard is None:
        return {}, []
    if not isinstance(hard, dict):
        raise GpuOpsError("%s: 'hard' must be a mapping of resource -> quantity" % where)
    out = {}
    origin = {}
    warnings = []
    for key in sorted(hard, key=str):
        value = hard[key]
        skey = str(key)
        if not is_gpu_resource_key(skey):
            out[skey] = value if isinstance(value, str) else str(value)
            continue
        if skey.startswith("requests."):
            resource = skey[len("requests."):]
        elif skey.startswith("limits."):
            resource = skey[len("limits."):]
            warnings.append("%s: %s is never enforced by Kubernetes for extended resources (only requests.* "
                            "counts); converted to requests.%s" % (where, skey, resource))
        else:
            resource = skey
            warnings.append("%s: a bare %s quota key is never enforced (only requests.* counts); converted to "
                            "requests.%s" % (where, skey, resource))
        check_gpu_resource(resource, where)
        qty = quantity_int(value, "%s %s" % (where, skey))
        new_key = "requests." + resource
        if new_key in out and out[new_key] != str(qty):
            raise GpuOpsError("%s: %s and %s give different values (%s and %s) for the same resource; keep only "
                              "requests.%s" % (where, origin[new_key], skey, out[new_key], qty, resource))
        out[new_key] = str(qty)
        origin[new_key] = skey
    return out, warnings


def gpu_quota_totals(hard: Dict[str, Any]) -> Dict[str, Any]:
    """``{resource: int}`` for the GPU keys of a normalized ``hard``."""
    totals = {}
    for key, value in (hard or {}).items():
        if key.startswith("requests.") and is_gpu_resource_key(key):
            totals[key[len("requests."):]] = int(value)
    return totals


def _validate_limit_range(tenant, limits, gpu_only):
    """LimitRanges only where safe (see reference 4.4)."""
    where = "tenant %s limit_range" % tenant
    if not isinstance(limits, list):
        raise GpuOpsError("%s must be a list of LimitRange items" % where)
    for i, item in enumerate(limits):
        iwhere = "%s[%d]" % (where, i)
        check_keys(item, ("type", "max", "min", "default", "defaultRequest", "maxLimitRequestRatio"), iwhere)
        ltype = choice(item.get("type", "Container"), ("Container", "Pod", "PersistentVolumeClaim"), iwhere + " type")
        for field in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            for res in (item.get(field) or {}):
                if not is_gpu_resource_key(res):
                    continue
                check_gpu_resource(res, iwhere)
                if not gpu_only:
                    raise GpuOpsError(
                        "%s: GPU entries in a LimitRange are unsafe in a namespace that also runs non-GPU pods (a "
                        "Container max/min becomes a default that injects %s into every container; a Pod max rejects "
                        "pods without a GPU limit). Cap GPUs with the quota, or set gpu_only: true for a GPU-only "
                        "namespace" % (iwhere, res))
                if ltype == "Pod" and field in ("default", "defaultRequest"):
                    raise GpuOpsError("%s: a Pod LimitRange may not set %s" % (iwhere, field))
                if field == "maxLimitRequestRatio":
                    raise GpuOpsError("%s: maxLimitRequestRatio makes no sense for %s (GPU requests must equal "
                                      "limits)" % (iwhere, res))
        dflt = item.get("default") or {}
        dreq = item.get("defaultRequest") or {}
        for res in set(dflt) | set(dreq):
            if is_gpu_resource_key(res) and res in dflt and res in dreq and str(dflt[res]) != str(dreq[res]):
                raise GpuOpsError("%s: default %s must equal defaultRequest %s for %s (GPUs cannot be overcommitted)"
                                  % (iwhere, dflt[res], dreq[res], res))
    return limits


def validate_priority_classes(classes: Dict[str, Any]) -> Dict[str, Any]:
    """Validate the PriorityClass definitions (name -> {value, preemption_policy, description, global_default})."""
    if not isinstance(classes, dict):
        raise GpuOpsError("priority classes must be a mapping of name -> {value, preemption_policy, description}")
    out = {}
    defaults = []
    for name in sorted(classes):
        spec = classes[name] or {}
        where = "priority class %r" % name
        if not DNS1123_SUBDOMAIN_RE.match(name) or len(name) > 253:
            raise GpuOpsError("%s: the name must be a DNS-1123 subdomain (lower case letters, digits, '-', '.')" % where)
        if name.startswith("system-"):
            raise GpuOpsError("%s: names starting with 'system-' are reserved for Kubernetes" % where)
        check_keys(spec, ("value", "preemption_policy", "description", "global_default"), where)
        if "value" not in spec:
            raise GpuOpsError("%s: 'value' is required (an integer from %d to %d)" % (where, MIN_PRIORITY, MAX_USER_PRIORITY))
        value = integer(spec["value"], where + " value", MIN_PRIORITY, MAX_USER_PRIORITY)
        policy = choice(spec.get("preemption_policy", "PreemptLowerPriority"), PREEMPTION_POLICIES,
                        where + " preemption_policy")
        if spec.get("global_default"):
            defaults.append(name)
        out[name] = {"value": value, "preemption_policy": policy, "description": spec.get("description") or "",
                     "global_default": bool(spec.get("global_default"))}
    if len(defaults) > 1:
        raise GpuOpsError("only one priority class may be the global default; got %s" % fmt(defaults))
    return out


def plan_priority_classes(desired: Dict[str, Any], existing: List[Dict[str, Any]],
                          policy: str = "fail") -> Dict[str, Any]:
    """Compare desired classes with the existing objects (PriorityClass dicts from the API).

    ``value`` and ``preemptionPolicy`` are immutable. ``policy`` ``fail`` raises naming each
    changed class; ``replace`` returns them in ``replace`` (delete, then create again: running pods
    keep the priority they were admitted with). Returns ``{"replace": [names], "unchanged": [...],
    "create": [...]}``.
    """
    choice(policy, PRIORITY_CHANGE_POLICIES, "priority class change policy")
    current = {}
    obj: Optional[Dict[str, Any]]
    for obj in existing or []:
        meta = obj.get("metadata") or {}
        current[meta.get("name")] = obj
    plan: Dict[str, Any] = {"replace": [], "create": [], "update": [], "changes": {}}
    for name, spec in sorted(desired.items()):
        obj = current.get(name)
        if obj is None:
            plan["create"].append(name)
            continue
        changes = {}
        if int(obj.get("value", 0)) != spec["value"]:
            changes["value"] = {"before": int(obj.get("value", 0)), "after": spec["value"]}
        if (obj.get("preemptionPolicy") or "PreemptLowerPriority") != spec["preemption_policy"]:
            changes["preemptionPolicy"] = {"before": obj.get("preemptionPolicy") or "PreemptLowerPriority",
                                           "after": spec["preemption_policy"]}
        if changes:
            plan["replace"].append(name)
            plan["changes"][name] = changes
        else:
            plan["update"].append(name)
    if plan["replace"] and policy == "fail":
        parts = []
        for n in plan["replace"]:
            fields = sorted(plan["changes"][n].items())
            parts.append("%s: %s" % (n, ", ".join("%s %s -> %s" % (f, c["before"], c["after"]) for f, c in fields)))
        text = "; ".join(parts)
        raise GpuOpsError(
            "PriorityClass value and preemptionPolicy are immutable and would change (%s). Nothing was changed. Set "
            "gpu_tenancy_priority_class_change_policy: replace to delete and re-create these classes (running pods keep "
            "their current priority; new pods get the new value), or keep the existing values" % text,
            changes=plan["changes"])
    return plan


def validate_tenants(tenants: List[Dict[str, Any]],
                     priority_classes: Optional[Dict[str, Any]] = None) -> Tuple[Any, ...]:
    """Validate tenants and return their normalized quota objects.

    A tenant: ``{name, labels, annotations, pod_security, quota: {hard}, priority_quotas:
    {<class>: {hard}}, limit_range: [...], gpu_only, groups: {admin: [...], edit: [...], view: [...]}}``.
    Returns ``(tenants, warnings)`` with every ``hard`` normalized.
    """
    if not isinstance(tenants, list):
        raise GpuOpsError("tenants must be a list of {name, quota, ...}")
    known_classes = set(priority_classes or {}) | {"system-node-critical", "system-cluster-critical"}
    out = []
    warnings = []
    seen = set()
    valid_keys = ("name", "labels", "annotations", "pod_security", "pod_security_version", "quota",
                  "priority_quotas", "limit_range", "gpu_only", "groups", "queueing")
    for i, tenant in enumerate(tenants):
        if not isinstance(tenant, dict) or not tenant.get("name"):
            raise GpuOpsError("tenants[%d]: 'name' is required" % i)
        name = str(tenant["name"])
        where = "tenant %s" % name
        check_keys(tenant, valid_keys, where)
        if not DNS1123_LABEL_RE.match(name) or len(name) > 63:
            raise GpuOpsError("%s: the name must be a DNS-1123 label (namespace name)" % where)
        if name in seen:
            raise GpuOpsError("%s is defined twice" % where)
        seen.add(name)
        t = copy.deepcopy(tenant)
        t["pod_security"] = choice(t.get("pod_security", "baseline"), POD_SECURITY_LEVELS, where + " pod_security")
        t.setdefault("pod_security_version", "latest")
        hard, warns = normalize_quota_hard((t.get("quota") or {}).get("hard"), where + " quota")
        warnings.extend(warns)
        t["quota"] = {"hard": hard}
        pq = {}
        for pclass, spec in sorted((t.get("priority_quotas") or {}).items()):
            if pclass not in known_classes:
                raise GpuOpsError("%s priority_quotas: priority class %r is not defined; valid: %s"
                                  % (where, pclass, fmt(sorted(known_classes))), valid_classes=sorted(known_classes))
            phard, warns = normalize_quota_hard((spec or {}).get("hard"), "%s priority_quotas[%s]" % (where, pclass))
            warnings.extend(warns)
            if not phard:
                raise GpuOpsError("%s priority_quotas[%s]: 'hard' must list at least one resource" % (where, pclass))
            pq[pclass] = {"hard": phard}
        t["priority_quotas"] = pq
        t["gpu_only"] = bool(t.get("gpu_only", False))
        if t.get("limit_range"):
            _validate_limit_range(name, t["limit_range"], t["gpu_only"])
        else:
            t["limit_range"] = []
        groups = t.get("groups") or {}
        check_keys(groups, ("admin", "edit", "view"), where + " groups")
        t["groups"] = dict((role, list(groups.get(role) or [])) for role in ("admin", "edit", "view"))
        t["labels"] = dict(t.get("labels") or {})
        t["annotations"] = dict(t.get("annotations") or {})
        for lk, lv in t["labels"].items():
            if not LABEL_VALUE_RE.match(str(lv)) or len(str(lv)) > 63:
                raise GpuOpsError("%s label %s: %r is not a valid label value" % (where, lk, lv))
        out.append(t)
    return out, warnings


def tenant_gpu_caps(tenant: Dict[str, Any]) -> Tuple[Any, ...]:
    """The most of each GPU resource a tenant can hold, from its quotas.

    The unscoped quota caps every pod of the namespace. Without it, the tenant can hold the sum of
    its PriorityClass-scoped quotas (pods of other classes are then uncapped; ``uncapped`` says so).
    """
    caps = gpu_quota_totals(tenant["quota"]["hard"])
    scoped = {}
    for spec in tenant.get("priority_quotas", {}).values():
        for res, qty in gpu_quota_totals(spec["hard"]).items():
            scoped[res] = scoped.get(res, 0) + qty
    uncapped = []
    for res, qty in scoped.items():
        if res not in caps:
            caps[res] = qty
            uncapped.append(res)
    return caps, sorted(uncapped)


def cluster_gpu_allocatable(nodes: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Sum the GPU extended resources of Node objects' ``status.allocatable`` (unschedulable nodes excluded)."""
    totals = {}
    per_node = {}
    for node in nodes or []:
        meta = node.get("metadata") or {}
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        alloc = (node.get("status") or {}).get("allocatable") or {}
        for res, qty in alloc.items():
            if not str(res).startswith("nvidia.com/"):
                continue
            try:
                n = quantity_int(qty, "node %s %s" % (meta.get("name"), res))
            except GpuOpsError:
                continue
            totals[res] = totals.get(res, 0) + n
            per_node.setdefault(meta.get("name"), {})[res] = n
    return totals, per_node


def capacity_check(tenants: List[Dict[str, Any]], nodes: List[Dict[str, Any]], policy: str = "fail") -> Dict[str, Any]:
    """Sum of tenant GPU quotas per resource vs the cluster's allocatable GPUs and MIG slices.

    ``policy``: ``fail`` raises on overcommit, ``warn`` returns warnings, ``ignore`` only reports.
    Returns ``{"resources": {res: {"quota", "allocatable", "overcommitted", "tenants"}}, "overcommitted": [...],
    "warnings": [...]}``.
    """
    choice(policy, CAPACITY_POLICIES, "capacity policy")
    allocatable, _per_node = cluster_gpu_allocatable(nodes)
    report = {}
    warnings = []
    for tenant in tenants:
        caps, uncapped = tenant_gpu_caps(tenant)
        for res, qty in caps.items():
            entry = report.setdefault(res, {"quota": 0, "allocatable": allocatable.get(res, 0), "tenants": {}})
            entry["quota"] += qty
            entry["tenants"][tenant["name"]] = qty
        for res in uncapped:
            warnings.append("tenant %s has only PriorityClass-scoped quotas for %s: pods of other priority classes "
                            "are not capped" % (tenant["name"], res))
    over = []
    for res, entry in sorted(report.items()):
        entry["overcommitted"] = entry["quota"] > entry["allocatable"]
        if entry["overcommitted"]:
            over.append(res)
    result = {"resources": report, "allocatable": allocatable, "overcommitted": over, "warnings": warnings}
    if over:
        lines = ["%s: tenant quotas %d > allocatable %d (%s)" % (
            res, report[res]["quota"], report[res]["allocatable"],
            ", ".join("%s=%d" % kv for kv in sorted(report[res]["tenants"].items()))) for res in over]
        msg = ("GPU quota overcommit: " + "; ".join(lines) + ". Lower the quotas, add capacity, or set "
               "gpu_tenancy_capacity_policy: warn to accept the overcommit")
        if policy == "fail":
            raise GpuOpsError(msg, capacity=report, allocatable=allocatable)
        if policy == "warn":
            warnings.append(msg)
    return result
