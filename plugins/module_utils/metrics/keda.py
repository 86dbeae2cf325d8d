# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""KEDA ScaledObjects for the gpu_autoscaling role (``gpu_autoscaling_backend: keda``).

Each validated HPA (hpa.validate_hpa) becomes a ScaledObject (keda.sh/v1alpha1) with one
``prometheus`` trigger per metric, on the same PromQL as the dcgm_exporter role's prometheus-adapter
rules: per-pod GPU metrics become ``sum(avg(<series>{...}) by (<pod>))`` with ``metricType:
AverageValue`` (KEDA's HPA divides by the replicas, which is the Pods metric's per-pod average), the
latency metric ``histogram_quantile`` over the target's pods with ``metricType: Value``. The HPA KEDA
creates keeps the HPA's name and behavior (``advanced.horizontalPodAutoscalerConfig``).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import parse_quantity

# the per-pod metric name of the role's rules -> DCGM series (hpa.GPU_POD_METRICS)
METRIC_TYPES = ("AverageValue", "Value")
_URL_RE = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def pod_regex(target_name: str, kind: str = "Deployment") -> str:
    """The names of a workload's pods: Deployment ``<name>-<rs hash>-<suffix>``, else ``<name>-<suffix>``.

    Names are DNS-1123 subdomains: only ``.`` needs escaping, written ``\\\\.`` so that the PromQL string
    literal (Go escapes) hands ``\\.`` to the regex engine."""
    name = str(target_name).replace(".", "\\\\.")
    if kind == "Deployment":
        return "%s-[a-z0-9]+-[a-z0-9]+" % name
    return "%s-[a-z0-9-]+" % name


def gpu_query(series: str, namespace: str, pod_re: str, ns_label: str = "exported_namespace",
              pod_label: str = "exported_pod") -> str:
    """Sum over the target's pods of the per-pod value the adapter rule returns (avg by pod)."""
    return 'sum(avg(%s{%s="%s",%s=~"%s"}) by (%s))' % (series, ns_label, namespace, pod_label, pod_re, pod_label)


def latency_query(series: str, namespace: str, pod_re: str, quantile: float = 0.95, window: str = "2m") -> str:
    """The latency rule's quantile over all of the target's pods (app metrics keep namespace/pod)."""
    return ('histogram_quantile(%s, sum(rate(%s_bucket{namespace="%s",pod=~"%s"}[%s])) by (le))'
            % (quantile, series, namespace, pod_re, window))


def _threshold(text):
    value = parse_quantity(text, "threshold")
    return ("%.6f" % value).rstrip("0").rstrip(".")


def scaled_objects(hpas: List[Dict[str, Any]], pod_metrics: Dict[str, Any], prometheus_url: str,
                   latency_metrics: Optional[List[Dict[str, Any]]] = None, ns_label: str = "exported_namespace",
                   pod_label: str = "exported_pod", polling_interval: int = 15,
                   labels: Any = None) -> List[Dict[str, Any]]:
    """ScaledObjects for ``hpas`` (validated: hpa.validate_hpas output).

    ``pod_metrics``: ``{metric name: DCGM series}``; ``latency_metrics``: ``[{series, name, quantile,
    window}]`` (the dcgm_exporter role's ``dcgm_exporter_adapter_latency_metrics``). Metrics of other types
    than ``Pods`` on those names are refused with the names that are valid.
    """
    if not _URL_RE.match(str(prometheus_url or "")):
        raise GpuOpsError("gpu_autoscaling_keda_prometheus_url %r is not an http(s) URL" % (prometheus_url,))
    lat = dict((m["name"], m) for m in (latency_metrics or []))
    out = []
    for hpa in hpas:
        where = "HPA %s/%s" % (hpa["namespace"], hpa["name"])
        ref = hpa["scaleTargetRef"]
        pods = pod_regex(ref["name"], ref.get("kind", "Deployment"))
        triggers = []
        for m in hpa["metrics"]:
            if m.get("type") != "Pods":
                raise GpuOpsError("%s: the keda backend renders Pods metrics only (gpu_metric, latency_metric); "
                                  "%s metrics need gpu_autoscaling_backend: prometheus-adapter" % (where, m.get("type")))
            name = m["pods"]["metric"]["name"]
            target = m["pods"]["target"]["averageValue"]
            if name in pod_metrics:
                query, mtype = gpu_query(pod_metrics[name], hpa["namespace"], pods, ns_label, pod_label), "AverageValue"
            elif name in lat:
                spec = lat[name]
                query = latency_query(spec["series"], hpa["namespace"], pods, spec.get("quantile", 0.95),
                                      spec.get("window", "2m"))
                mtype = "Value"
            else:
                raise GpuOpsError("%s: metric %s has no query; valid: %s" % (where, name, ", ".join(sorted(pod_metrics) + sorted(lat))))
            triggers.append({"type": "prometheus", "name": name.replace("_", "-"), "metricType": mtype,
                             "metadata": {"serverAddress": prometheus_url, "query": query,
                                          "threshold": _threshold(target)}})
        spec = {"scaleTargetRef": {"apiVersion": ref["apiVersion"], "kind": ref["kind"], "name": ref["name"]},
                "minReplicaCount": hpa["minReplicas"], "maxReplicaCount": hpa["maxReplicas"],
                "pollingInterval": int(polling_interval), "triggers": triggers,
                "advanced": {"horizontalPodAutoscalerConfig": {"name": hpa["name"]}}}
        if hpa.get("behavior"):
            spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] = hpa["behavior"]
        out.append({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                    "metadata": {"name": hpa["name"], "namespace": hpa["namespace"],
                                 "labels": dict(labels or {}, **(hpa.get("labels") or {}))},
                    "spec": spec})
    return out
