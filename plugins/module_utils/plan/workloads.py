# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which demand item a pod belongs to: the one rule the right-sizer (DCGM series carry ``namespace`` and ``pod``),
the re-plan (pending pods) and the plan's placements share.

A demand item is ``(tenant, name)``; a tenant is a namespace (gpu_tenancy). A pod belongs to an item when

1. it carries the labels the plan's placements name (``pod_labels``): ``gpuops.k8s/demand-item: <name>`` in the
   tenant's namespace (``gpuops.k8s/tenant`` is informative); or, without that label,
2. its workload is named like the item: the pod of a Deployment ``<name>-<pod-template-hash>-<suffix>``, of a
   StatefulSet ``<name>-<ordinal>``, of a Job or DaemonSet ``<name>-<suffix>``, or a bare pod ``<name>``. When the
   pod's owner is known (``owner``: the ``ownerReferences`` kind and name), the owner decides.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Tuple

ITEM_LABEL = "gpuops.k8s/demand-item"
TENANT_LABEL = "gpuops.k8s/tenant"

ItemKey = Tuple[str, str]

# kube-controller-manager's generated suffixes: 5 characters of [bcdfghjklmnpqrstvwxz2456789] (rand.String), the
# pod-template-hash of a ReplicaSet (a SafeEncodeString'd hash, up to 10 of those characters), a StatefulSet ordinal.
_SUFFIX = r"[bcdfghjklmnpqrstvwxz2456789]{5}"
_HASH = r"[bcdfghjklmnpqrstvwxz2456789]{1,10}"
_GENERATED = re.compile(r"^(?:%s-%s|%s|\d+)$" % (_HASH, _SUFFIX, _SUFFIX))
_RS_HASH = re.compile(r"^(.+)-%s$" % _HASH)


def pod_labels(tenant: str, name: str) -> Dict[str, str]:
    """The labels a workload of demand item ``(tenant, name)`` carries so that its pods map to the item."""
    return {TENANT_LABEL: str(tenant), ITEM_LABEL: str(name)}


def workload_of(pod_name: str, owner: Optional[Dict[str, str]] = None) -> str:
    """The workload a pod belongs to: its owner's name (a ReplicaSet's Deployment), else the pod name less the
    suffix the controllers generate; a bare pod is its own workload."""
    if owner and owner.get("name"):
        if owner.get("kind") == "ReplicaSet":
            m = _RS_HASH.match(owner["name"])
            return m.group(1) if m else owner["name"]
        return owner["name"]
    parts = str(pod_name).split("-")
    for cut in (2, 1):
        if len(parts) > cut and _GENERATED.match("-".join(parts[-cut:])):
            return "-".join(parts[:-cut])
    return str(pod_name)


def item_for_pod(namespace: str, pod_name: str, items: Iterable[ItemKey], labels: Optional[Dict[str, str]] = None,
                 owner: Optional[Dict[str, str]] = None) -> Optional[ItemKey]:
    """The ``(tenant, name)`` of ``items`` the pod belongs to, or None (see the module docstring for the rule)."""
    keys = set((str(t), str(n)) for t, n in items)
    label = (labels or {}).get(ITEM_LABEL)
    if label:
        key = (str(namespace), str(label))
        return key if key in keys else None
    key = (str(namespace), workload_of(pod_name, owner))
    return key if key in keys else None


def group_pods(pods: Iterable[Dict], items: Iterable[ItemKey]) -> Tuple[Dict[ItemKey, List[Dict]], List[Dict]]:
    """``({item: [pod, ...]}, [pods of no item])`` for pods given as ``{namespace, name, labels?, owner?}``."""
    keys = list(items)
    out: Dict[ItemKey, List[Dict]] = {}
    other: List[Dict] = []
    for pod in pods:
        key = item_for_pod(pod.get("namespace", ""), pod.get("name", ""), keys, pod.get("labels"), pod.get("owner"))
        if key is None:
            other.append(pod)
        else:
            out.setdefault(key, []).append(pod)
    return out, other
