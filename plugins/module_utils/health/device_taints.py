# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health per device on ``dra-dynamic`` nodes: DeviceTaintRules instead of a node cordon.

Pure Python, Python 3.9 compatible. :func:`plan_with_device_taints` runs :func:`checks.plan_actions` (the same
hysteresis, circuit breaker, alerts and audit annotations) and, for the nodes that hand out their GPUs through
NVIDIA's DRA driver with DynamicMIG, turns each quarantine into ``DeviceTaintRule`` objects (``resource.k8s.io/v1``:
``spec.deviceSelector{driver, pool, device}``, ``spec.taint{key, value, effect}``) on every device of the failing
GPU - its whole-GPU device and every MIG device of it, as the node's ResourceSlices publish them - instead of
``spec.unschedulable`` and the node taint. The other GPUs of the node keep serving.

* effect per GPU: ``NoExecute`` (the kube-controller-manager's device taint eviction deletes the pods whose claims
  use the device) for an uncorrectable ECC error or any problem whose remediation is a GPU reset or a reboot
  (fatal Xids 48, 79, 94, 95, 119, ..., retired pages pending, row remap failure); ``NoSchedule`` (running pods
  stay, no new claim gets the device) for a warning: temperature, an Xid whose action is ``drain``. A GPU's rules
  never weaken while the node stays quarantined (a NoExecute rule is not turned back into NoSchedule);
* the rules carry ``gpuops.k8s/health-node`` (and ``-gpu``) labels; recovery (the plan's ``uncordon``, after
  ``uncordon_after`` healthy checks in a row) deletes every rule labelled with the node;
* a problem no GPU can be named for (GPUs missing, an Xid on an unknown PCI bus) or a failing GPU the node's slices
  lack falls back to the node cordon of the other modes, together with the rules of the GPUs that can be named.

The taint key ``gpuops.k8s/gpu-health`` differs from the steering rules' ``gpuops.k8s/steering``: health and
the planner's steering never undo each other's rules.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.health import checks as health_checks
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra

HEALTH_TAINT_KEY = "gpuops.k8s/gpu-health"
LABEL_NODE = "gpuops.k8s/health-node"
LABEL_GPU = "gpuops.k8s/health-gpu"
RULE_PREFIX = "gpuops-health-"
FATAL_ACTIONS = ("reset_gpu", "reboot")
EFFECT_RANK = {"NoSchedule": 1, "NoExecute": 2}
TAINT_VALUES = {"NoSchedule": "warning", "NoExecute": "fatal"}


def problem_effect(problem: Dict[str, Any]) -> str:
    """``NoExecute`` for an uncorrectable ECC error or a problem needing a GPU reset or a reboot, else ``NoSchedule``."""
    if problem.get("check") == "ecc_uncorrected" or problem.get("action") in FATAL_ACTIONS:
        return "NoExecute"
    return "NoSchedule"


def gpu_effects(problems: Sequence[Dict[str, Any]]) -> Tuple[Dict[int, str], List[Dict[str, Any]]]:
    """``({gpu index: strongest effect}, [problems that name no GPU])``."""
    effects: Dict[int, str] = {}
    node_level = []
    for p in problems or []:
        gpu = p.get("gpu")
        if gpu is None or isinstance(gpu, bool):
            node_level.append(p)
            continue
        gpu = int(gpu)
        effect = problem_effect(p)
        if EFFECT_RANK[effect] > EFFECT_RANK.get(effects.get(gpu, ""), 0):
            effects[gpu] = effect
    return effects, node_level


def _label_value(text: Any) -> str:
    return str(text)[:63].rstrip("-._")


def node_gpu_devices(slices: Sequence[Any], node: str) -> Tuple[Optional[str], Optional[str], Dict[int, List[str]]]:
    """``(driver, pool, {gpu index: [device names]})`` of the GPU devices ``node``'s slices publish: the whole GPU
    (attribute ``index``) and its MIG devices (attribute ``parentIndex``)."""
    driver = pool = None
    out: Dict[int, List[str]] = {}
    for s in slices or []:
        spec = (s or {}).get("spec") or {}
        if spec.get("nodeName") != node or spec.get("driver") != gpu_dra.DRIVER or not spec.get("devices"):
            continue
        driver, pool = spec["driver"], (spec.get("pool") or {}).get("name")
        for d in spec["devices"]:
            attrs = d.get("attributes") or {}
            index = (attrs.get("parentIndex") or attrs.get("index") or {}).get("int")
            if index is not None:
                out.setdefault(int(index), []).append(d["name"])
    for names in out.values():
        names.sort()
    return driver, pool, out


def rule_name(pool: str, device: str) -> str:
    return (RULE_PREFIX + "%s-%s" % (pool, device))[:253].rstrip("-.")


def health_rules(node: str, slices: Sequence[Any], effects: Dict[int, str],
                 reason: str = "") -> Tuple[List[Dict[str, Any]], List[int]]:
    """``(DeviceTaintRules, [failing GPU indexes the slices lack])``: one rule per device of each GPU of
    ``effects`` (``{gpu index: NoSchedule | NoExecute}``) on ``node``."""
    driver, pool, by_gpu = node_gpu_devices(slices, node)
    rules = []
    missing = []
    for gpu in sorted(effects):
        effect = effects[gpu]
        if effect not in EFFECT_RANK:
            raise GpuOpsError("effect must be one of NoSchedule, NoExecute, not %r" % (effect,))
        if gpu not in by_gpu:
            missing.append(gpu)
            continue
        for device in by_gpu[gpu]:
            rules.append({
                "apiVersion": gpu_dra.DRA_API, "kind": "DeviceTaintRule",
                "metadata": {"name": rule_name(str(pool), device),
                             "labels": {"app.kubernetes.io/managed-by": "gpuops.k8s",
                                        LABEL_NODE: _label_value(node), LABEL_GPU: str(gpu)},
                             "annotations": {health_checks.ANN_REASON: reason} if reason else {}},
                "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": device},
                         "taint": {"key": HEALTH_TAINT_KEY, "value": TAINT_VALUES[effect], "effect": effect}}})
    return rules, missing


def _rule_effect(rule):
    return ((rule.get("spec") or {}).get("taint") or {}).get("effect")


def _rules_of(existing, node):
    return [r for r in existing or []
            if ((r.get("metadata") or {}).get("labels") or {}).get(LABEL_NODE) == _label_value(node)]


def _node_taint(node_obj, taint):
    return bool(taint) and any(t.get("key") == taint.get("key") and t.get("effect") == taint.get("effect")
                               for t in ((node_obj or {}).get("spec") or {}).get("taints") or [])


def _same(rule, old):
    if old is None or old.get("spec") != rule["spec"]:
        return False
    labels = (old.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in rule["metadata"]["labels"].items())


def plan_with_device_taints(verdicts: Dict[str, Any], nodes: List[Dict[str, Any]],
                            policy: Optional[Dict[str, Any]] = None, now: Optional[str] = None,
                            alerts: Optional[Dict[str, Any]] = None, dra_dynamic_nodes: Sequence[str] = (),
                            resource_slices: Sequence[Any] = (),
                            device_taint_rules: Sequence[Any] = ()) -> Dict[str, Any]:
    """:func:`checks.plan_actions`, with the nodes of ``dra_dynamic_nodes`` quarantined per GPU device.

    ``resource_slices``: the ResourceSlices of the cluster (or of those nodes); ``device_taint_rules``: the
    DeviceTaintRules labelled ``gpuops.k8s/health-node`` that exist now. Adds to each action of a dra-dynamic node
    ``scope`` (``devices`` or ``node``) and ``device_taint_rules`` (``{gpu index: effect}`` wanted), and to the result
    ``device_taint_rules``: ``{"apply": [rules to create or update], "delete": [rules to delete: apiVersion, kind,
    metadata.name]}`` - empty under dry run (one kubernetes.core.k8s call each).
    """
    policy = dict(policy or {})
    dry_run = bool(policy.get("dry_run", True))
    taint = policy.get("taint", health_checks.DEFAULT_TAINT)
    dra = set(dra_dynamic_nodes or [])
    node_objs = dict(((n.get("metadata") or {}).get("name"), n) for n in nodes or [])
    unknown = sorted(dra - set(node_objs))
    if unknown:
        raise GpuOpsError("dra_dynamic_nodes name nodes that are not in the node list: %s" % ", ".join(unknown),
                          nodes=sorted(n for n in node_objs if n))
    result = health_checks.plan_actions(verdicts, nodes, policy, now=now, alerts=alerts)
    apply_rules: List[Dict[str, Any]] = []
    delete: List[Dict[str, Any]] = []
    for action in result["actions"]:
        name = action["node"]
        if name not in dra:
            continue
        node_obj = node_objs[name]
        existing = dict(((r.get("metadata") or {}).get("name"), r) for r in _rules_of(device_taint_rules, name))
        action["scope"] = "devices"
        action["device_taint_rules"] = {}
        kind = action["action"]
        if kind in ("cordon", "keep"):
            effects, node_level = gpu_effects(action.get("problems") or [])
            rules, missing = health_rules(name, resource_slices, effects, action.get("reason", ""))
            for rule in rules:  # never weaken a GPU's rule while the node stays quarantined
                old = existing.get(rule["metadata"]["name"])
                if old is not None and EFFECT_RANK.get(_rule_effect(old), 0) > EFFECT_RANK[_rule_effect(rule)]:
                    rule["spec"]["taint"] = dict(old["spec"]["taint"])
            action["device_taint_rules"] = dict((gpu, effects[gpu]) for gpu in sorted(effects) if gpu not in missing)
            whole_node = bool(node_level or missing)
            if missing:
                action["reason"] += "; GPU %s: no devices in the node's ResourceSlices, the node is cordoned" % (
                    ", ".join(str(g) for g in missing))
            if whole_node:
                action["scope"] = "node"
                if kind == "keep" and not (node_obj.get("spec") or {}).get("unschedulable"):
                    taints = list((node_obj.get("spec") or {}).get("taints") or [])
                    if taint and not _node_taint(node_obj, taint):
                        taints.append(dict(taint))
                    patch = action.get("patch") or {}
                    patch["spec"] = {"unschedulable": True, "taints": taints}
                    action["patch"] = patch
                    action["applied"] = not dry_run
            elif kind == "cordon" and action.get("patch"):
                del action["patch"]["spec"]  # annotations and the fault label only: the node keeps serving
            changed = [r for r in rules if not _same(r, existing.get(r["metadata"]["name"]))]
            if not dry_run:
                apply_rules.extend(changed)
        elif kind == "uncordon":
            cordoned = _node_taint(node_obj, taint) or (not taint and (node_obj.get("spec") or {}).get("unschedulable"))
            if action.get("patch") and not cordoned:
                del action["patch"]["spec"]  # quarantined per device: the node's spec is not ours to undo
            if not dry_run:
                delete.extend({"apiVersion": gpu_dra.DRA_API, "kind": "DeviceTaintRule", "metadata": {"name": str(k)}}
                              for k in sorted(str(k) for k in existing))
    result["device_taint_rules"] = {"apply": apply_rules, "delete": delete}
    result["changed"] = bool(result.get("changed") or apply_rules or delete)
    return result
