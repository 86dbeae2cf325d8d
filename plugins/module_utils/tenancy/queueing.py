# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kueue objects for GPU tenants: ResourceFlavors, ClusterQueues in one cohort, LocalQueues and
WorkloadPriorityClasses, from the same tenant spec as ``gpu_tenancy`` (validated by
``quotas.validate_tenants``) and the cluster's Node objects.

Pure Python, Python 3.9 compatible. Facts (sigs.k8s.io/kueue v0.17, API ``kueue.x-k8s.io/v1beta2``):

* A ResourceFlavor's ``nodeLabels`` become the admitted pods' node selector, its ``tolerations`` are
  added to them. One flavor per GPU product for ``nvidia.com/gpu`` (``gpu-<product>``, node label
  ``nvidia.com/gpu.product``) and one per MIG profile for ``nvidia.com/mig-<profile>`` (``mig-<profile>``,
  node label ``nvidia.com/mig.strategy: mixed``: the resource name already names the profile).
* A ClusterQueue lists resource groups: each resource in exactly one group, flavors tried in order.
  Quota can only be borrowed for [flavor, resource] pairs the queue lists, so every tenant's queue
  lists every flavor the nodes offer, with ``nominalQuota`` 0 where the tenant has none.
* ``cohortName`` links the queues; ``borrowingLimit`` caps what a queue takes beyond its nominal
  quota, ``lendingLimit`` what it lends of it.
* ``preemption.withinClusterQueue`` (Never | LowerPriority | LowerOrNewerEqualPriority) and
  ``reclaimWithinCohort`` (Never | LowerPriority | Any): mapped from the PriorityClasses - a class
  with ``PreemptLowerPriority`` makes ``LowerPriority`` inside a queue, and a queue takes back what it
  lent from any borrower (``Any``); with no preempting class both are ``Never``.
* WorkloadPriorityClasses carry the PriorityClasses' names and values
  (label ``kueue.x-k8s.io/priority-class`` on a Job).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import resources
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import GPU_RESOURCE, MIG_PREFIX
from ansible_collections.gpuops.k8s.plugins.module_utils.common import validation
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import quotas

KUEUE_API = "kueue.x-k8s.io/v1beta2"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
WITHIN_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
TENANT_QUEUEING_KEYS = ("flavors", "borrowing_limit", "lending_limit")
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def product_flavor(product: str) -> str:
    """``NVIDIA-A100-SXM4-80GB`` -> ``gpu-nvidia-a100-sxm4-80gb`` (a DNS subdomain)."""
    name = re.sub(r"[^a-z0-9.-]+", "-", str(product).lower()).strip("-.")
    return "gpu-" + name


def mig_flavor(resource: str) -> str:
    """``nvidia.com/mig-1g.10gb`` -> ``mig-1g.10gb``."""
    return "mig-" + resource[len(MIG_PREFIX):]


def node_flavors(nodes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """What the nodes offer per flavor: ``{flavor: {"resource", "node_labels", "quantity", "nodes"}}``.

    Unschedulable nodes are left out (as the quota capacity check does). ``.shared`` resources
    (time-slicing/MPS renamed) are left out: Kueue would count replicas as GPUs.
    """
    flavors = {}
    for node in nodes or []:
        meta = node.get("metadata") or {}
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        labels = meta.get("labels") or {}
        alloc = (node.get("status") or {}).get("allocatable") or {}
        for res, qty in sorted(alloc.items()):
            res = str(res)
            if res.endswith(resources.SHARED_SUFFIX):
                continue
            try:
                n = int(str(qty))
            except ValueError:
                continue
            if n <= 0:
                continue
            if res == GPU_RESOURCE:
                product = labels.get(PRODUCT_LABEL)
                if not product:
                    continue
                name, node_labels = product_flavor(product), {PRODUCT_LABEL: product}
            elif res.startswith(MIG_PREFIX):
                name, node_labels = mig_flavor(res), {MIG_STRATEGY_LABEL: "mixed"}
            else:
                continue
            entry = flavors.setdefault(name, {"resource": res, "node_labels": node_labels, "quantity": 0,
                                              "nodes": {}})
            entry["quantity"] += n
            entry["nodes"][meta.get("name")] = n
    return flavors


def preemption_from_classes(priority_classes: Optional[Dict[str, Any]], within: Any = None,
                            reclaim: Optional[str] = None) -> Dict[str, Any]:
    """``{withinClusterQueue, reclaimWithinCohort}`` from the PriorityClasses unless given."""
    preempts = any((spec or {}).get("preemption_policy", "PreemptLowerPriority") == "PreemptLowerPriority"
                   for spec in (priority_classes or {}).values())
    out = {"withinClusterQueue": within or ("LowerPriority" if preempts else "Never"),
           "reclaimWithinCohort": reclaim or ("Any" if preempts else "Never")}
    validation.choice(out["withinClusterQueue"], WITHIN_POLICIES, "within_cluster_queue")
    validation.choice(out["reclaimWithinCohort"], RECLAIM_POLICIES, "reclaim_within_cohort")
    return out


def _limits(tenant, key, where):
    spec = (tenant.get("queueing") or {}).get(key) or {}
    if not isinstance(spec, dict):
        raise GpuOpsError("%s queueing.%s must be a mapping of resource -> count" % (where, key))
    out = {}
    for res, qty in spec.items():
        res = str(res)
        if res.startswith("requests."):
            res = res[len("requests."):]
        resources.check_gpu_resource(res, "%s queueing.%s" % (where, key))
        out[res] = validation.integer(qty, "%s queueing.%s[%s]" % (where, key, res), minimum=0)
    return out


def tenant_nominal(tenant: Dict[str, Any], flavors: Dict[str, Any]) -> Dict[str, Any]:
    """``{flavor: quantity}`` for one tenant: MIG quotas go to their profile's flavor, ``nvidia.com/gpu``
    to the only GPU product flavor or as ``queueing.flavors`` splits it."""
    where = "tenant %s" % tenant["name"]
    queueing = tenant.get("queueing") or {}
    if not isinstance(queueing, dict):
        raise GpuOpsError("%s: queueing must be a mapping with keys %s" % (where, ", ".join(TENANT_QUEUEING_KEYS)))
    validation.check_keys(queueing, TENANT_QUEUEING_KEYS, where + " queueing")
    caps, _uncapped = quotas.tenant_gpu_caps(tenant)
    explicit = queueing.get("flavors") or {}
    if not isinstance(explicit, dict):
        raise GpuOpsError("%s queueing.flavors must be a mapping of flavor -> count" % where)
    nominal = {}
    for flavor, qty in explicit.items():
        if flavor not in flavors:
            raise GpuOpsError("%s queueing.flavors: no node offers flavor %r; flavors of the nodes: %s"
                              % (where, flavor, ", ".join(sorted(flavors)) or "none"),
                              valid_flavors=sorted(flavors))
        nominal[flavor] = validation.integer(qty, "%s queueing.flavors[%s]" % (where, flavor), minimum=0)
    by_resource = {}
    for name, entry in flavors.items():
        by_resource.setdefault(entry["resource"], []).append(name)
    for res, qty in sorted(caps.items()):
        if res.endswith(resources.SHARED_SUFFIX):
            continue
        candidates = sorted(by_resource.get(res, []))
        given = sum(nominal.get(f, 0) for f in candidates if f in explicit)
        if any(f in explicit for f in candidates):
            if given != qty:
                raise GpuOpsError("%s: queueing.flavors give %d of %s (%s) but the quota says %d"
                                  % (where, given, res, ", ".join(f for f in candidates if f in explicit), qty))
            continue
        if not candidates:
            raise GpuOpsError("%s: quota %s=%d but no node offers %s; resources the nodes offer: %s"
                              % (where, res, qty, res, ", ".join(sorted(by_resource)) or "none"),
                              valid_resources=sorted(by_resource))
        if len(candidates) > 1:
            raise GpuOpsError("%s: %d GPUs (%s) can come from %d flavors (%s): split them with queueing.flavors, "
                              "e.g. {%s: %d}" % (where, qty, res, len(candidates), ", ".join(candidates),
                                                 candidates[0], qty), valid_flavors=candidates)
        nominal[candidates[0]] = qty
    return nominal


def capacity_check(nominals: Dict[str, Any], flavors: Dict[str, Any], policy: str = "fail") -> Tuple[Any, ...]:
    """Per flavor: the tenants' nominal quotas never exceed what the flavor's nodes offer."""
    validation.choice(policy, quotas.CAPACITY_POLICIES, "capacity policy")
    report = {}
    for name, entry in sorted(flavors.items()):
        tenants = dict((t, n[name]) for t, n in nominals.items() if n.get(name))
        quota = sum(tenants.values())
        report[name] = {"resource": entry["resource"], "quota": quota, "offered": entry["quantity"],
                        "tenants": tenants, "overcommitted": quota > entry["quantity"]}
    over = [f for f, e in sorted(report.items()) if e["overcommitted"]]
    warnings = []
    if over:
        msg = "Kueue nominal quota over capacity: " + "; ".join(
            "%s (%s): tenants %d > nodes offer %d (%s)" % (
                f, report[f]["resource"], report[f]["quota"], report[f]["offered"],
                ", ".join("%s=%d" % kv for kv in sorted(report[f]["tenants"].items()))) for f in over)
        msg += ". Lower the quotas, add capacity, or set gpu_queueing_capacity_policy: warn"
        if policy == "fail":
            raise GpuOpsError(msg, capacity=report)
        if policy == "warn":
            warnings.append(msg)
    return {"flavors": report, "overcommitted": over}, warnings


def plan(tenants: List[Dict[str, Any]], nodes: List[Dict[str, Any]], priority_classes: Optional[Dict[str, Any]] = None,
         cohort: str = "gpu-tenants", within: Any = None, reclaim: Any = None,
         tolerations: Optional[List[Dict[str, Any]]] = None, capacity_policy: str = "fail",
         queue_name: str = "gpu") -> Tuple[Any, ...]:
    """Every Kueue object for ``tenants`` (already validated) on ``nodes``.

    Returns ``(result, warnings)``; ``result``: ``flavors``, ``cluster_queues``, ``local_queues``,
    ``priority_classes`` (lists of manifests), ``capacity`` and ``preemption``.
    """
    if not validation.DNS1123_SUBDOMAIN_RE.match(str(cohort)):
        raise GpuOpsError("cohort %r must be a DNS-1123 subdomain (lower case, digits, '-' and '.')" % (cohort,))
    if not validation.DNS1123_LABEL_RE.match(str(queue_name)):
        raise GpuOpsError("queue name %r must be a DNS-1123 label" % (queue_name,))
    if tolerations is not None and not isinstance(tolerations, list):
        raise GpuOpsError("tolerations must be a list of Kubernetes tolerations")
    flavors = node_flavors(nodes)
    preemption = preemption_from_classes(priority_classes, within, reclaim)
    nominals = {}
    borrow = {}
    lend = {}
    for t in tenants:
        nominals[t["name"]] = tenant_nominal(t, flavors)
        borrow[t["name"]] = _limits(t, "borrowing_limit", "tenant %s" % t["name"])
        lend[t["name"]] = _limits(t, "lending_limit", "tenant %s" % t["name"])
    capacity, warnings = capacity_check(nominals, flavors, capacity_policy)

    flavor_objs = []
    for name, entry in sorted(flavors.items()):
        spec: Dict[str, Any] = {"nodeLabels": dict(entry["node_labels"])}
        if tolerations:
            spec["tolerations"] = copy.deepcopy(tolerations)
        flavor_objs.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name},
                            "spec": spec})
    groups = {}
    for name, entry in sorted(flavors.items(), key=lambda kv: (kv[1]["resource"], kv[0])):
        groups.setdefault(entry["resource"], []).append(name)

    cqs = []
    lqs = []
    for t in tenants:
        tname = t["name"]
        resource_groups = []
        for res in sorted(groups):
            fl = []
            for fname in groups[res]:
                # quantities as strings, as the API server and Kueue write them back (a number would differ
                # from the stored object after Kueue's first update and make the next apply a change)
                nominal = nominals[tname].get(fname, 0)
                r = {"name": res, "nominalQuota": str(nominal)}
                if res in borrow[tname]:
                    r["borrowingLimit"] = str(borrow[tname][res])
                if res in lend[tname]:
                    r["lendingLimit"] = str(min(lend[tname][res], nominal))
                fl.append({"name": fname, "resources": [r]})
            resource_groups.append({"coveredResources": [res], "flavors": fl})
        cqs.append({
            "apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": {"name": tname, "labels": {"gpuops.k8s/tenant": tname}},
            "spec": {
                "cohortName": cohort,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": tname}},
                "queueingStrategy": "BestEffortFIFO",
                "preemption": dict(preemption),
                "resourceGroups": resource_groups,
            },
        })
        lqs.append({"apiVersion": KUEUE_API, "kind": "LocalQueue",
                    "metadata": {"name": queue_name, "namespace": tname, "labels": {"gpuops.k8s/tenant": tname}},
                    "spec": {"clusterQueue": tname}})
    wpcs = []
    for name, spec in sorted((priority_classes or {}).items()):
        obj = {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
               "value": int(spec["value"])}
        if spec.get("description"):
            obj["description"] = str(spec["description"])
        wpcs.append(obj)
    if not flavors and tenants:
        warnings.append("no node offers nvidia.com/gpu (with a %s label) or nvidia.com/mig-*: the ClusterQueues "
                        "have no resource groups and admit nothing" % PRODUCT_LABEL)
    return {"flavors": flavor_objs, "cluster_queues": cqs, "local_queues": lqs, "priority_classes": wpcs,
            "capacity": capacity, "preemption": preemption, "cohort": cohort, "queue_name": queue_name,
            "nominal": nominals}, warnings
