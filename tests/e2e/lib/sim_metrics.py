# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated lab's metric plumbing (lab code, never shipped): which simulated device serves which pod,
and the Prometheus scrape job a dcgm_exporter ServiceMonitor stands for.

``allocate`` is what the device plugin and the kubelet's pod-resources API do on a real node; the simulated
DCGM exporter (sim_dcgm_exporter.py) labels each device with the pod it returns.

``scrape_config``: the Prometheus Operator turns the ServiceMonitor's endpoint into a scrape job whose targets
carry the exporter pod's own ``namespace``, ``pod``, ``service``, ``container`` and ``endpoint`` labels plus the
endpoint's relabelings (``node`` from the pod's node name). Without ``honor_labels`` the exporter's workload
labels ``namespace`` / ``pod`` / ``container`` collide with those and arrive as ``exported_*``, which is what
the role's prometheus-adapter rules read. Where no operator and no pods exist (the simulated lab), the same
job is written with static targets that carry the same labels (metrics_lab.py, sim_dcgm_exporter.py).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# gpu_nodes puts the collection on sys.path
import gpu_nodes  # noqa: E402,F401 pylint: disable=unused-import
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import GPU_RESOURCE, MIG_PREFIX  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError  # noqa: E402


def allocate(devices, pods, previous=None):
    """Which device serves which pod: ``{device key: {namespace, pod, container}}``.

    ``devices``: ``dcgm.node_devices`` of the node; ``pods``: ``[{namespace, name, container, requests:
    {resource: count}}]`` bound to the node, oldest first. Devices keep the pod they had in ``previous``
    while that pod is listed; new pods take the first free devices of the resource they request (as the
    device plugin hands out IDs).
    """
    previous = previous or {}
    wanted = dict(((p["namespace"], p["name"]), p) for p in pods)
    alloc = {}
    for key, owner in previous.items():
        if (owner["namespace"], owner["pod"]) in wanted and any(d["key"] == key for d in devices):
            alloc[key] = owner
    for p in pods:
        for res, count in sorted((p.get("requests") or {}).items()):
            if res != GPU_RESOURCE and not res.startswith(MIG_PREFIX):
                continue
            mine = (p["namespace"], p["name"])
            have = sum(1 for k, o in alloc.items() if (o["namespace"], o["pod"]) == mine and k.startswith(res + "/"))
            free = [d["key"] for d in devices if d["resource"] == res and d["key"] not in alloc]
            for key in free[:max(0, int(count) - have)]:
                alloc[key] = {"namespace": p["namespace"], "pod": p["name"], "container": p.get("container") or ""}
    return alloc


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
