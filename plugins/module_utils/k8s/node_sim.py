# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runner of ``gpuops.k8s.sim_gpu_node``: publish a simulated host's GPUs on its kwok node as GFD and
the device plugin would (labels on the Node, capacity/allocatable through ``nodes/status``).

The Kubernetes access is an object with ``get_node(name) -> dict | None``, ``create_node(body)``,
``patch_node(name, body)``, ``patch_node_status(name, body)`` and ``delete_node(name)``;
``DynamicNodeApi`` adapts kubernetes.core's API client (``get_api_client``) to it, so the module
shares kubernetes.core's connection options and the unit tests use a fake.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import labels as gpu_labels
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
DEFAULT_RESOURCES = {"cpu": "128", "memory": "1Ti", "pods": "110", "ephemeral-storage": "2Ti"}
MERGE_PATCH = "application/merge-patch+json"


class DynamicNodeApi(object):
    """Nodes through kubernetes.core's K8SClient (module_utils.k8s.client.get_api_client).

    API errors become GpuOpsError naming the node, the HTTP status and the API server's reason.
    """

    def __init__(self, k8s_client: Any) -> None:
        self._client = k8s_client
        self._nodes = self._call("discover", "the Node API", lambda: k8s_client.resource("Node", "v1"))

    @staticmethod
    def _call(what, name, fn):
        from kubernetes.dynamic.exceptions import DynamicApiError
        try:
            return fn()
        except DynamicApiError as e:
            summary = e.summary() if hasattr(e, "summary") else e.reason
            raise GpuOpsError("Kubernetes API error while trying to %s %s: %s %s" % (what, name, e.status, summary),
                              status=e.status)

    def get_node(self, name: str) -> Optional[Dict[str, Any]]:
        from kubernetes.dynamic.exceptions import NotFoundError
        try:
            return self._nodes.get(name=name).to_dict()
        except NotFoundError:
            return None

    def create_node(self, body: Dict[str, Any]) -> Dict[str, Any]:
        return self._call("create node", body["metadata"]["name"], lambda: self._nodes.create(body=body).to_dict())

    def patch_node(self, name: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return self._call("patch node", name, lambda: self._client.client.patch(
            self._nodes, body=body, name=name, content_type=MERGE_PATCH).to_dict())

    def patch_node_status(self, name: str, body: Dict[str, Any]) -> Dict[str, Any]:
        status = self._nodes.subresources["status"]
        return self._call("patch the status of node", name, lambda: self._client.client.patch(
            status, body=body, name=name, content_type=MERGE_PATCH).to_dict())

    def delete_node(self, name: str) -> Any:
        return self._call("delete node", name, lambda: self._nodes.delete(name=name))


def _node_body(name, state, labels, resources):
    res = dict(DEFAULT_RESOURCES)
    res.update(resources or {})
    res.update(state["capacity"])
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "type": "kwok"}
    all_labels.update(labels or {})
    all_labels.update(state["labels"])
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": all_labels, "annotations": {KWOK_ANNOTATION: "fake"}},
            "spec": {}, "status": {"capacity": dict(res), "allocatable": dict(res)}}


def _view(node):
    """The part of a Node this module manages (for diff and return values)."""
    if node is None:
        return {}
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    return {
        "labels": dict((k, v) for k, v in (meta.get("labels") or {}).items() if gpu_labels.owned_label(k)),
        "capacity": dict((k, v) for k, v in (status.get("capacity") or {}).items()
                         if gpu_labels.owned_resource(k)),
        "allocatable": dict((k, v) for k, v in (status.get("allocatable") or {}).items()
                            if gpu_labels.owned_resource(k)),
    }


def run_sim_gpu_node(api: Any, params: Dict[str, Any], check_mode: bool = False) -> Dict[str, Any]:
    """Create, update or delete the kwok node ``params['name']``; returns the module result."""
    name = params["name"]
    state = params.get("state") or "present"
    if state not in ("present", "absent"):
        raise GpuOpsError("state must be present or absent, got %r" % (state,))
    current = api.get_node(name)
    result = {"changed": False, "name": name}
    if state == "absent":
        if current is not None:
            ann = (current.get("metadata") or {}).get("annotations") or {}
            if ann.get(KWOK_ANNOTATION) != "fake":
                raise GpuOpsError("node %s is not a kwok node (annotation %s=fake missing); refusing to delete a "
                                  "real node" % (name, KWOK_ANNOTATION))
            result["changed"] = True
            result["diff"] = {"before": _view(current), "after": {}}
            if not check_mode:
                api.delete_node(name)
        return result

    desired = gpu_labels.node_gpu_state(
        gpus=params.get("gpus"), mig_strategy=params.get("mig_strategy") or "none",
        mig_config=params.get("mig_config"), sharing=params.get("sharing"),
        gpu_facts=params.get("gpu_facts"), driver_version=params.get("driver_version"))
    extra_labels = params.get("labels") or {}
    result.update({"labels": desired["labels"], "capacity": desired["capacity"], "devices": desired["devices"]})

    if current is None:
        body = _node_body(name, desired, extra_labels, params.get("resources"))
        result["changed"] = True
        result["created"] = True
        result["diff"] = {"before": {}, "after": _view(body)}
        if not check_mode:
            api.create_node(body)
        return result

    want = {"labels": dict(extra_labels, **desired["labels"]), "capacity": desired["capacity"]}
    meta = current.get("metadata") or {}
    status = current.get("status") or {}
    changes = gpu_labels.node_changes(meta.get("labels"), status.get("capacity"), want)
    # allocatable follows capacity (the device plugin advertises healthy devices in both)
    alloc = gpu_labels.node_changes({}, status.get("allocatable"), want)["capacity"]
    after = copy.deepcopy(current)
    after.setdefault("metadata", {}).setdefault("labels", {})
    after.setdefault("status", {})
    for k, v in changes["labels"].items():
        if v is None:
            after["metadata"]["labels"].pop(k, None)
        else:
            after["metadata"]["labels"][k] = v
    for field, ch in (("capacity", changes["capacity"]), ("allocatable", alloc)):
        target = after["status"].setdefault(field, {}) or {}
        after["status"][field] = target
        for k, v in ch.items():
            if v is None:
                target.pop(k, None)
            else:
                target[k] = v
    result["changed"] = bool(changes["labels"] or changes["capacity"] or alloc)
    result["diff"] = {"before": _view(current), "after": _view(after)}
    if result["changed"] and not check_mode:
        if changes["labels"]:
            api.patch_node(name, {"metadata": {"labels": changes["labels"]}})
        if changes["capacity"] or alloc:
            api.patch_node_status(name, {"status": {"capacity": changes["capacity"], "allocatable": alloc}})
    return result
