# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of a re-plan's changed nodes can roll now (playbooks/replan.yml, docs/closed-loop.md).

A node whose MIG layout the plan changes is drained before the change (tasks/mig_node.yml: kubernetes.core.k8s_drain,
PodDisruptionBudgets honoured). :func:`rollout_guard` looks at the pods on each such node before the rollout starts
and leaves a node for the next round, with the reason, when its drain could not finish within the budgets:

* a pod no controller owns (a bare pod): the drain would have to delete it, not evict it;
* a pod covered by a PodDisruptionBudget whose ``status.disruptionsAllowed`` is smaller than the number of that
  budget's pods on the node.

DaemonSet pods, finished pods and pods being deleted do not count (the drain skips them). The nodes left are rolled;
the GPUs of a deferred node keep their layout, so its MIG instances and the pods in them are untouched. Pure Python.
"""

from __future__ import annotations
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def _selector_matches(selector, labels):
    """Kubernetes label selector semantics (matchLabels and matchExpressions); an empty selector matches all."""
    if selector is None:
        return False  # a PDB without a selector selects nothing (policy/v1)
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _counts(pod):
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    owners = meta.get("ownerReferences") or []
    return not any(o.get("kind") == "DaemonSet" for o in owners)


def changed_nodes(plan: Any) -> Dict[str, str]:
    """Nodes whose MIG layout the plan changes: ``{node: mig_config}``."""
    p = plan.get("plan") if isinstance(plan, dict) and isinstance(plan.get("plan"), dict) else plan
    if not isinstance(p, dict) or not isinstance(p.get("node_configs"), list):
        raise GpuOpsError("plan must be a gpu_plan result (or its 'plan') with node_configs")
    return dict((n["node"], n["mig_config"]) for n in p["node_configs"] if n.get("mig_config") and n.get("mig_config_changed"))


def rollout_guard(plan: Any, pods: Any, pdbs: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """``{roll, deferred, changed}``: the changed nodes that can be drained now, and the others with the reason."""
    changed = changed_nodes(plan)
    if not isinstance(pods, list):
        raise GpuOpsError("pods must be a list of Pod resources (k8s_info), got %s" % type(pods).__name__)
    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in changed and _counts(pod):
            by_node.setdefault(node, []).append(pod)
    roll, deferred = [], []
    for node in sorted(changed):
        reasons = []
        need: Dict[Any, Any] = {}
        for pod in by_node.get(node, []):
            meta = pod.get("metadata") or {}
            ref = "%s/%s" % (meta.get("namespace"), meta.get("name"))
            if not meta.get("ownerReferences"):
                reasons.append("pod %s has no controller: the drain would delete it, not evict it" % ref)
                continue
            for pdb in pdbs or []:
                pm = pdb.get("metadata") or {}
                if pm.get("namespace") != meta.get("namespace"):
                    continue
                if _selector_matches((pdb.get("spec") or {}).get("selector"), meta.get("labels")):
                    key = (pm.get("namespace"), pm.get("name"))
                    need.setdefault(key, [pdb, []])[1].append(ref)
        for (ns, name), (pdb, refs) in sorted(need.items()):
            allowed = int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)
            if allowed < len(refs):
                reasons.append("PodDisruptionBudget %s/%s allows %d disruption(s); the drain would evict %d of its pods "
                               "(%s)" % (ns, name, allowed, len(refs), ", ".join(sorted(refs))))
        if reasons:
            deferred.append({"node": node, "mig_config": changed[node],
                             "reason": "left for the next round: " + "; ".join(reasons)})
        else:
            roll.append(node)
    return {"roll": roll, "deferred": deferred, "changed": changed}


MIG_CONFIG_LABEL = "nvidia.com/mig.config"


def planner_nodes(nodes: Any, k8s_nodes: Optional[List[Dict[str, Any]]] = None,
                  busy: Optional[Mapping[Any, int]] = None) -> List[Dict[str, Any]]:
    """The planner's node list for a re-plan: each node's ``current`` from its live ``nvidia.com/mig.config`` label
    (the inventory may be older than the last rollout) and ``busy``, its running GPU pods (on equal cost the planner
    keeps busy nodes' layouts and changes idle nodes first).

    A node with neither a label nor a ``current`` is taken at ``all-disabled``: no plan has set its MIG layout, so it
    runs its GPUs whole (the GPU Operator's default), and a plan that splits them counts them against the disruption
    budget (unknown layouts would be free to change)."""
    if not isinstance(nodes, list):
        raise GpuOpsError("nodes must be gpu_plan's node list, got %s" % type(nodes).__name__)
    live = {}
    for n in k8s_nodes or []:
        meta = n.get("metadata") or {}
        label = (meta.get("labels") or {}).get(MIG_CONFIG_LABEL)
        if label:
            live[meta.get("name")] = label
    busy = busy or {}
    out = []
    for n in nodes:
        n = dict(n)
        if n.get("name") in live:
            n["current"] = live[n["name"]]
        elif n.get("current") is None:
            n["current"] = "all-disabled"
        n["busy"] = int((busy or {}).get(n.get("name"), 0))
        out.append(n)
    return out
