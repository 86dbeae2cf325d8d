# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus scrape config a dcgm_exporter ServiceMonitor stands for.

The Prometheus Operator turns the ServiceMonitor's endpoint into a scrape job whose targets carry the
exporter pod's own ``namespace``, ``pod``, ``service``, ``container`` and ``endpoint`` labels plus the
endpoint's relabelings (``node`` from the pod's node name). Without ``honor_labels`` the exporter's
workload labels ``namespace`` / ``pod`` / ``container`` collide with those and arrive as ``exported_*``,
which is what the role's prometheus-adapter rules read. Where no operator and no pods exist (the
simulated lab), the same job is written with static targets that carry the same labels.
"""
from __future__ import annotations

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def scrape_config(service_monitor, targets):
    """A Prometheus ``scrape_configs`` entry equivalent to ``service_monitor`` (the rendered manifest).

    ``targets``: ``[{address, node, pod, metrics_path}]``, one per exporter (node). Returns the dict.
    """
    if not isinstance(service_monitor, dict) or service_monitor.get("kind") != "ServiceMonitor":
        raise GpuOpsError("expected a ServiceMonitor manifest, got %r" % (service_monitor or {}).get("kind"))
    meta = service_monitor.get("metadata") or {}
    endpoints = (service_monitor.get("spec") or {}).get("endpoints") or []
    if len(endpoints) != 1:
        raise GpuOpsError("ServiceMonitor %s: expected one endpoint, found %d" % (meta.get("name"), len(endpoints)))
    ep = endpoints[0]
    node_relabel = any(r.get("targetLabel") == "node" and "__meta_kubernetes_pod_node_name" in (r.get("sourceLabels") or [])
                       for r in ep.get("relabelings") or [])
    static = []
    for t in targets:
        labels = {"namespace": meta.get("namespace", "default"), "service": meta.get("name"),
                  "endpoint": ep.get("port", "metrics"), "pod": t["pod"], "container": "exporter"}
        if node_relabel:
            labels["node"] = t["node"]
        if t.get("metrics_path") and t["metrics_path"] != ep.get("path", "/metrics"):
            labels["__metrics_path__"] = t["metrics_path"]
        static.append({"targets": [t["address"]], "labels": labels})
    return {
        "job_name": "serviceMonitor/%s/%s/0" % (meta.get("namespace", "default"), meta.get("name")),
        "honor_labels": bool(ep.get("honorLabels", False)),
        "scrape_interval": ep.get("interval", "30s"),
        "scrape_timeout": ep.get("scrapeTimeout", "10s"),
        "metrics_path": ep.get("path", "/metrics"),
        "static_configs": static,
    }
