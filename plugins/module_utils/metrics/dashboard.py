# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Grafana dashboard the dcgm_exporter role ships (roles/dcgm_exporter/files/gpuops-gpu-dashboard.json, a
ConfigMap labelled for kube-prometheus-stack's dashboard sidecar): views per tenant (namespace), MIG profile, node and
pod, GPU health (Xid, ECC, temperature) and the collection's alerts.

Pod-level panels read the role's recording rules (roles/dcgm_exporter/templates/recording-rules.yml.j2, names
``gpuops:...``), which carry the pod's ``namespace``/``pod`` whether the ServiceMonitor honours dcgm-exporter's labels
or renames them ``exported_``; the dashboard is therefore the same for both. ``render()`` writes the JSON file;
tests/unit/plugins/module_utils/metrics/test_dashboard.py checks the committed file is its output.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List

UID = "gpuops-gpu"
TITLE = "gpuops.k8s GPUs: tenants, MIG, nodes, pods, health"
DS = {"type": "prometheus", "uid": "${datasource}"}
NS = 'namespace=~"$namespace"'
NODE = 'node=~"$node"'

# (row title, [(panel title, kind, unit, [(expr, legend)])]); kind: timeseries, stat, table
ROWS = [
    ("Tenants (namespaces)", [
        ("GPU engine active by namespace (mean over its devices)", "timeseries", "percentunit",
         [("avg by (namespace) (gpuops:gpu_engine_active:pod{%s})" % NS, "{{namespace}}")]),
        ("GPU resources held by running pods", "timeseries", "short",
         [("sum by (namespace, resource) (gpuops:gpu_requests_running:namespace{%s})" % NS,
           "{{namespace}} {{resource}}")]),
        ("GPU resources requested by pending pods", "timeseries", "short",
         [("sum by (namespace, resource) (gpuops:gpu_requests_pending:namespace{%s})" % NS,
           "{{namespace}} {{resource}}")]),
        ("GPU memory used by namespace", "timeseries", "decmbytes",
         [("sum by (namespace) (gpuops:gpu_fb_used_mib:pod{%s})" % NS, "{{namespace}}")]),
    ]),
    ("MIG profiles", [
        ("Engine active by MIG profile", "timeseries", "percentunit",
         [('avg by (GPU_I_PROFILE) (gpuops:gpu_engine_active:pod{GPU_I_PROFILE!="", %s})' % NS,
           "{{GPU_I_PROFILE}}")]),
        ("Devices held vs free by profile", "timeseries", "short",
         [('count by (GPU_I_PROFILE) (gpuops:gpu_engine_active:pod{%s})' % NS, "held {{GPU_I_PROFILE}}"),
          ('sum by (GPU_I_PROFILE) (gpuops:gpu_devices_free:node{%s})' % NODE, "free {{GPU_I_PROFILE}}")]),
    ]),
    ("Nodes", [
        ("Free GPU devices by node (no pod on them)", "timeseries", "short",
         [("sum by (node) (gpuops:gpu_devices_free:node{%s})" % NODE, "{{node}}")]),
        ("Engine active by node", "timeseries", "percentunit",
         [("avg by (node) (gpuops:gpu_engine_active:pod{%s})" % NODE, "{{node}}")]),
    ]),
    ("Pods", [
        ("GPU pods: engine active and memory", "table", "none",
         [("max by (namespace, pod, node, GPU_I_PROFILE, modelName) (gpuops:gpu_engine_active:pod{%s, %s})"
           % (NS, NODE), "active"),
          ("max by (namespace, pod, node, GPU_I_PROFILE, modelName) (gpuops:gpu_fb_used_mib:pod{%s, %s})"
           % (NS, NODE), "memory MiB")]),
        ("Pods idle for the last hour (engine active under 5 %)", "table", "none",
         [("max_over_time(gpuops:gpu_engine_active:pod{%s}[1h]) < 0.05" % NS, "idle")]),
    ]),
    ("Health and alerts", [
        ("Last Xid error by GPU", "timeseries", "none",
         [("max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS{%s})" % NODE, "{{node}} GPU {{gpu}}")]),
        ("Uncorrected (double-bit) ECC errors", "timeseries", "none",
         [("max by (node, gpu) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s})" % NODE, "{{node}} GPU {{gpu}}")]),
        ("GPU temperature", "timeseries", "celsius",
         [("max by (node, gpu) (DCGM_FI_DEV_GPU_TEMP{%s})" % NODE, "{{node}} GPU {{gpu}}")]),
        ("Firing gpuops alerts", "table", "none",
         [('ALERTS{alertstate="firing", gpuops_check!=""}', "{{alertname}}")]),
    ]),
]

VARIABLES = [
    ("namespace", "label_values(gpuops:gpu_engine_active:pod, namespace)"),
    ("node", "label_values(DCGM_FI_DEV_GPU_TEMP, node)"),
]


def _panel(pid, title, kind, unit, targets, x, y):
    panel = {"id": pid, "type": kind, "title": title, "datasource": DS,
             "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
             "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
             "targets": [dict({"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": DS},
                              **({"format": "table", "instant": True} if kind == "table" else {}))
                         for i, (expr, legend) in enumerate(targets)]}
    if kind == "table":
        panel["transformations"] = [{"id": "merge", "options": {}}]
    return panel


def dashboard() -> Dict[str, Any]:
    """The dashboard as Grafana's JSON model (schemaVersion 39)."""
    panels = []  # type: List[Dict[str, Any]]
    pid, y = 1, 0
    for row_title, row_panels in ROWS:
        panels.append({"id": pid, "type": "row", "title": row_title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y = pid + 1, y + 1
        for i, (title, kind, unit, targets) in enumerate(row_panels):
            panels.append(_panel(pid, title, kind, unit, targets, 12 * (i % 2), y + 8 * (i // 2)))
            pid += 1
        y += 8 * ((len(row_panels) + 1) // 2)
    templating = [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus",
                   "current": {}, "hide": 0}]
    for name, query in VARIABLES:
        templating.append({"name": name, "type": "query", "datasource": DS, "query": {"query": query, "refId": name},
                           "definition": query, "includeAll": True, "multi": True, "allValue": ".*",
                           "current": {"text": "All", "value": "$__all"}, "refresh": 2, "sort": 1, "hide": 0})
    return {"uid": UID, "title": TITLE, "tags": ["gpuops", "gpu", "dcgm", "mig"], "timezone": "utc",
            "schemaVersion": 39, "version": 1, "editable": True, "refresh": "1m",
            "time": {"from": "now-6h", "to": "now"}, "templating": {"list": templating}, "panels": panels,
            "annotations": {"list": []}}


def render() -> str:
    """The JSON file's text."""
    return json.dumps(dashboard(), indent=1, sort_keys=True) + "\n"


def recorded_names(doc: Dict[str, Any]) -> List[str]:
    """The ``gpuops:`` recording rules a dashboard's queries and variables read."""
    text = json.dumps(doc)
    return sorted(set(re.findall(r"gpuops:[a-z0-9_:]+", text)))
