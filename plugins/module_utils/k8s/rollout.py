# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling MIG reconfiguration: which nodes change, in which order, and when to stop.

Pure planning for ``playbooks/mig_reconfigure.yml``: from the Node objects of a node group and
the target MIG config name, build the rollout - a canary batch first, then serial batches - with
the last good layout of each node (what a rollback restores) and the per-node steps. The labels
follow the GPU Operator's MIG manager so existing dashboards keep working:
``nvidia.com/mig.config`` (input) and ``nvidia.com/mig.config.state``
(``pending`` | ``success`` | ``failed``).

Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import is_plugin_resource
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import device_plugin
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import labels as gpu_labels

LABEL_CONFIG = "nvidia.com/mig.config"
LABEL_STATE = "nvidia.com/mig.config.state"
ANN_PREFIX = "gpuops.k8s/"
ANN_LAST_GOOD = ANN_PREFIX + "mig.config.last-good"
LABEL_ROLLOUT = ANN_PREFIX + "mig.rollout-id"  # a label, so failures are selectable
ANN_REASON = ANN_PREFIX + "mig.failure-reason"
ANN_TIMELINE = ANN_PREFIX + "mig.timeline"

STEPS = (
    "label nvidia.com/mig.config=<target>, nvidia.com/mig.config.state=pending",
    "cordon",
    "drain (PodDisruptionBudgets honoured, timeout)",
    "apply layout <target> (mig role)",
    "wait until the node advertises the new resources",
    "uncordon",
    "label nvidia.com/mig.config.state=success",
)


def _labels(node):
    return ((node.get("metadata") or {}).get("labels")) or {}


def _annotations(node):
    return ((node.get("metadata") or {}).get("annotations")) or {}


def last_good_config(node: Dict[str, Any], default: str = "all-disabled") -> str:
    """The layout a rollback restores: the current config label when it was applied
    successfully (or has no state yet), else the recorded last good one."""
    labels = _labels(node)
    current = labels.get(LABEL_CONFIG)
    state = labels.get(LABEL_STATE)
    if current and state in (None, "", "success"):
        return current
    return _annotations(node).get(ANN_LAST_GOOD) or default


def serial_batches(count: int, canary: int = 1, batch_size: int = 1) -> List[int]:
    """Ansible ``serial`` list for ``count`` hosts: ``[canary, batch_size]`` (canary 0: one size)."""
    if canary < 0 or batch_size < 1:
        raise GpuOpsError("canary must be >= 0 and batch_size >= 1, got canary=%s batch_size=%s"
                          % (canary, batch_size))
    if count == 0:
        return [batch_size]
    return [canary, batch_size] if canary else [batch_size]


def plan_rollout(hosts: List[str], nodes: Dict[str, Any], target: str, canary: int = 1, batch_size: int = 1,
                 failure_budget: int = 0, force: bool = False, default_config: str = "all-disabled",
                 known_configs: Optional[List[str]] = None,
                 inventory_configs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Plan a rollout of MIG config ``target`` over ``hosts`` (inventory order = rollout order).

    ``nodes``: ``{host: Node object or None}`` (None: the host has no Kubernetes node).
    ``known_configs``: config names the site's mig-parted file defines; when given, ``target``
    and the last good config of every node that changes (what its rollback restores) must be
    among them, else nothing is planned. ``force``: include nodes already at ``target``.
    ``inventory_configs``: ``{host: config}`` the hosts were set up with (gpuops_mig_config): the
    last good layout of a node whose labels and annotations record none (``default_config`` else).

    Returns ``{"target", "nodes": [names in order], "skipped": [{node, reason}], "batches",
    "serial", "failure_budget", "per_node": {name: {...}}}``.
    """
    if not target:
        raise GpuOpsError("a target MIG config name is required")
    if known_configs is not None and target not in known_configs:
        raise GpuOpsError("unknown MIG config %r; the config file defines: %s"
                          % (target, ", ".join(sorted(known_configs))), valid=sorted(known_configs))
    if failure_budget < 0:
        raise GpuOpsError("failure_budget must be >= 0, got %s" % failure_budget)
    serial_batches(len(hosts), canary, batch_size)  # validates canary and batch_size before any work
    missing = [h for h in hosts if nodes.get(h) is None]
    if missing:
        raise GpuOpsError("no Kubernetes node for host(s) %s: the rollout needs every host of the group "
                          "to be a node (names must match, or set gpuops_k8s_node_name)" % ", ".join(missing),
                          missing=missing)
    order = []
    skipped = []
    per_node = {}
    for host in hosts:
        node = nodes[host]
        labels = _labels(node)
        current = labels.get(LABEL_CONFIG)
        state = labels.get(LABEL_STATE)
        if current == target and state == "success" and not force:
            skipped.append({"node": host, "reason": "already at %s (state success)" % target})
            continue
        order.append(host)
        per_node[host] = {
            "current": current,
            "state": state,
            "last_good": last_good_config(node, (inventory_configs or {}).get(host) or default_config),
            "target": target,
            "cordoned_before": bool((node.get("spec") or {}).get("unschedulable")),
            "steps": [s.replace("<target>", target) for s in STEPS],
        }
    if known_configs is not None:
        # a node the rollout changes must be able to go back: its last good config must be in the file the
        # rollback reads (skipped nodes are not touched and need none)
        unknown = [h for h in order if per_node[h]["last_good"] not in known_configs]
        if unknown:
            raise GpuOpsError(
                "the config file does not define the last good config of %s, so a failed node could not be "
                "rolled back; it defines: %s. Roll out with a config file that holds them too (the site's, "
                "mig_reconfigure_config_file)"
                % (", ".join("node %s (%r)" % (h, per_node[h]["last_good"]) for h in unknown),
                   ", ".join(sorted(known_configs))),
                unknown_last_good=dict((h, per_node[h]["last_good"]) for h in unknown), valid=sorted(known_configs))
    batches = []
    rest = list(order)
    if canary and rest:
        batches.append(rest[:canary])
        rest = rest[canary:]
    while rest:
        batches.append(rest[:batch_size])
        rest = rest[batch_size:]
    for number, batch in enumerate(batches):
        for host in batch:
            per_node[host]["batch"] = number
            per_node[host]["canary"] = bool(canary) and number == 0
    return {
        "target": target,
        "nodes": order,
        "skipped": skipped,
        "batches": batches,
        "serial": serial_batches(len(order), canary, batch_size),
        "failure_budget": failure_budget,
        "per_node": per_node,
    }


def budget_left(nodes: List[Dict[str, Any]], rollout_id: str, failure_budget: int) -> Dict[str, Any]:
    """Failures of this rollout so far (nodes labelled failed with its id) against the budget.

    Returns ``{"failed": [names], "exhausted": bool}``; exhausted means stop the rollout.
    """
    failed: List[Any] = sorted(
        (n.get("metadata") or {}).get("name") for n in nodes
        if _labels(n).get(LABEL_STATE) == "failed" and _labels(n).get(LABEL_ROLLOUT) == rollout_id
    )
    return {"failed": failed, "exhausted": len(failed) > failure_budget}


# What a node advertises when no device plugin of this collection is deployed (nothing says otherwise): the
# mixed MIG strategy without sharing, as mig_partition's ``resources``.
DEFAULT_PLUGIN_EFFECT: Dict[str, Any] = {"mig_strategy": "mixed", "sharing": None}


def _node(node):
    """A Node object, or the first of a ``kubernetes.core.k8s_info`` ``resources`` list (None when empty)."""
    if isinstance(node, list):
        return node[0] if node else None
    return node or None


def advertised_resources(node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The device plugin's resources in the node's allocatable, as strings (zero counts included)."""
    alloc = (((_node(node) or {}).get("status") or {}).get("allocatable")) or {}
    return dict((k, str(v)) for k, v in sorted(alloc.items()) if is_plugin_resource(k))


def stale_resources(node: Optional[Dict[str, Any]], expected: Dict[str, Any]) -> Dict[str, Any]:
    """Device plugin resources the node advertises with a non-zero count that ``expected`` does not name."""
    return dict((k, v) for k, v in advertised_resources(node).items()
                if k not in (expected or {}) and v not in ("0", ""))


def expected_resources_met(node: Dict[str, Any], expected: Dict[str, Any]) -> bool:
    """True when the node's allocatable carries exactly ``expected`` for every MIG/GPU resource
    named there, and no other device plugin resource (``nvidia.com/mig-*``, ``nvidia.com/gpu``,
    ``nvidia.com/gpu.shared``) with a non-zero count."""
    alloc = (((_node(node) or {}).get("status") or {}).get("allocatable")) or {}
    for name, count in (expected or {}).items():
        if str(alloc.get(name, "0")) != str(count):
            return False
    return not stale_resources(node, expected)


def plugin_effect(node: Optional[Dict[str, Any]], plugin: Any) -> Dict[str, Any]:
    """``{"config", "mig_strategy", "sharing"}``: how the node's device plugin advertises its GPUs.

    ``plugin``: the device plugin deployed by gpuops.k8s.device_plugin, ``{"default": DEFAULT_CONFIG of its
    DaemonSet, "configs": {name: config}}`` (its ConfigMap), or None when it is not deployed. The node runs the
    config its ``nvidia.com/device-plugin.config`` label names, else the default (as the config-manager picks
    it). Without a plugin, or when neither names a config, the mixed strategy without sharing (config None).
    """
    name = device_plugin.node_device_plugin_config(_labels(_node(node) or {}), plugin)
    if name is None:
        return dict(DEFAULT_PLUGIN_EFFECT, config=None)
    return dict(device_plugin.device_plugin_config_effect(name, plugin["configs"][name]), config=name)


def layout_resources(gpus: List[Dict[str, Any]], effect: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The ``nvidia.com/*`` resources the device plugin advertises for ``gpus`` (the ``gpus`` list of
    ``mig_partition`` / ``gpu_info``) with ``effect`` (``{mig_strategy, sharing}``, default mixed without
    sharing). Lost GPUs are no devices (nor, in ``labels.node_gpu_state``, GPU instances without compute instance)."""
    effect = effect or DEFAULT_PLUGIN_EFFECT
    facts = [gpu for gpu in gpus or [] if not gpu.get("lost")]
    if not facts:
        return {}
    state = gpu_labels.node_gpu_state(gpu_facts=facts, mig_strategy=effect["mig_strategy"], sharing=effect["sharing"])
    return state["capacity"]


def _fmt_resources(resources):
    return ", ".join("%s=%s" % (k, v) for k, v in sorted(resources.items())) or "none"


def _fmt_effect(effect):
    if effect.get("config") is None:
        how = "no device plugin config of gpuops.k8s.device_plugin: migStrategy mixed, no sharing"
    else:
        how = "device plugin config '%s': migStrategy %s" % (effect["config"], effect["mig_strategy"])
        sharing = effect.get("sharing")
        if sharing:
            shared = sharing.get("resources") or {"every resource": sharing["replicas"]}
            how += ", %s %s%s" % (sharing["strategy"], ", ".join("x%s for %s" % (n, r) for r, n in sorted(shared.items())),
                                  " renamed .shared" if sharing.get("rename_by_default") else "")
        else:
            how += ", no sharing"
    return how


def resources_check(node: Any, gpus: List[Dict[str, Any]], plugin: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Does ``node`` advertise what the MIG layout ``gpus`` gives under its device plugin config?

    ``node``: the Node object (or a ``k8s_info`` ``resources`` list); ``gpus``: the ``gpus`` of the
    ``mig_partition`` result; ``plugin``: see ``plugin_effect``. Returns ``{"met", "expected", "advertised",
    "stale", "config", "mig_strategy", "sharing", "message"}``; message says what was expected and what the
    node advertises (empty when met).
    """
    found = _node(node)
    effect = plugin_effect(found, plugin)
    expected = layout_resources(gpus, effect)
    advertised = advertised_resources(found)
    stale = stale_resources(found, expected)
    met = found is not None and expected_resources_met(found, expected)
    message = ""
    if found is None:
        message = "the node is not there; expected %s (%s)" % (_fmt_resources(expected), _fmt_effect(effect))
    elif not met:
        message = "expected %s (%s), the node advertises %s" % (
            _fmt_resources(expected), _fmt_effect(effect), _fmt_resources(advertised))
        if stale:
            message += " (left over: %s)" % _fmt_resources(stale)
    return {"met": met, "expected": expected, "advertised": advertised, "stale": stale,
            "config": effect["config"], "mig_strategy": effect["mig_strategy"], "sharing": effect["sharing"],
            "message": message}


def inventory_drift(node: Optional[Dict[str, Any]], inventory_config: str, host: Optional[str] = None) -> str:
    """Why ``gpu_nodes.yml`` must not apply ``inventory_config`` to ``node``, or ``""`` when it may.

    ``gpu_nodes.yml`` applies the inventory's layout without draining the node. That is right for a
    node no rollout has touched (no ``nvidia.com/mig.config`` label) and for one whose label already
    says the inventory's config. It is wrong when a rollout (``mig_reconfigure.yml``, or the GPU
    Operator's MIG manager) is running on the node, or left it on another config: the host play would
    silently undo the rollout under running pods and leave the label lying about the layout.
    """
    labels = _labels(node or {})
    current = labels.get(LABEL_CONFIG)
    if not node or not current:
        return ""
    state = labels.get(LABEL_STATE) or ""
    name = ((node.get("metadata") or {}).get("name")) or host or "?"
    target = host or name
    if state == "pending":
        return ("node %s is in the middle of a MIG rollout to '%s' (nvidia.com/mig.config.state=pending%s): "
                "let it finish, or re-run mig_reconfigure.yml -e target=%s -e mig_reconfigure_config=%s "
                "to converge it; gpu_nodes.yml does not change a layout under a rollout "
                "(-e gpu_nodes_mig_guard=false overrides)"
                % (name, current, _rollout(labels), target, inventory_config))
    if current == inventory_config:
        return ""
    return ("node %s runs MIG config '%s' (nvidia.com/mig.config, state %s%s) but the inventory asks for '%s'. "
            "gpu_nodes.yml changes a layout without draining the node: roll the change out with "
            "mig_reconfigure.yml -e target=%s -e mig_reconfigure_config=%s, or, to keep '%s', set "
            "gpuops_mig_config: %s for this host or its pool (-e gpu_nodes_mig_guard=false overrides)"
            % (name, current, state or "unset", _rollout(labels), inventory_config, target, inventory_config,
               current, current))


def _rollout(labels):
    rid = labels.get(LABEL_ROLLOUT)
    return ", rollout %s" % rid if rid else ""
