# -*- coding: utf-8 -*-
"""The Grafana dashboard (metrics/dashboard.py), its committed JSON file, and the recording rules it reads
(roles/dcgm_exporter/templates/recording-rules.yml.j2)."""
import json
import os
import re

import jinja2
import yaml

from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dashboard

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))
ROLE = os.path.join(TOP, "roles", "dcgm_exporter")


def _rules(honor_labels):
    env = jinja2.Environment()
    env.filters["to_json"] = json.dumps
    env.filters["combine"] = lambda *ds: dict((k, v) for d in ds for k, v in d.items())
    with open(os.path.join(ROLE, "templates", "recording-rules.yml.j2")) as f:
        text = env.from_string(f.read()).render(
            __dcgm_exporter_pod_label="pod" if honor_labels else "exported_pod",
            __dcgm_exporter_ns_label="namespace" if honor_labels else "exported_namespace",
            __dcgm_exporter_common_labels={}, dcgm_exporter_labels={}, dcgm_exporter_prometheus_rule_labels={},
            dcgm_exporter_name="dcgm-exporter", dcgm_exporter_namespace="gpu-monitoring")
    doc = [d for d in yaml.safe_load_all(text) if d][0]
    return dict((r["record"], r["expr"]) for r in doc["spec"]["groups"][0]["rules"])


def test_the_committed_json_is_the_generators_output():
    with open(os.path.join(ROLE, "files", "gpuops-gpu-dashboard.json")) as f:
        assert f.read() == dashboard.render(), (
            "regenerate: python -c 'from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dashboard; "
            "print(dashboard.render(), end=\"\")' > roles/dcgm_exporter/files/gpuops-gpu-dashboard.json")


def test_panels_have_queries_ids_and_the_views_the_issue_names():
    doc = dashboard.dashboard()
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    rows = [p["title"] for p in doc["panels"] if p["type"] == "row"]
    assert rows == ["Tenants (namespaces)", "MIG profiles", "Nodes", "Pods", "Health and alerts"]
    panels = [p for p in doc["panels"] if p["type"] != "row"]
    assert all(p["targets"] and all(t["expr"] and t["datasource"]["uid"] == "${datasource}" for t in p["targets"])
               for p in panels)
    cells = set()
    for p in panels:  # no two panels on the same grid cell
        g = p["gridPos"]
        cell = (g["x"], g["y"])
        assert cell not in cells, p["title"]
        cells.add(cell)
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    for needed in ("GPU_I_PROFILE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ALERTS{",
                   "gpuops:gpu_requests_pending:namespace", "by (node)", "namespace, pod"):
        assert needed in exprs, needed
    assert [v["name"] for v in doc["templating"]["list"]] == ["datasource", "namespace", "node"]


def test_every_recording_rule_the_dashboard_reads_is_recorded_and_used():
    for honor in (True, False):
        rules = _rules(honor)
        assert sorted(rules) == dashboard.recorded_names(dashboard.dashboard())
    renamed = _rules(False)["gpuops:gpu_engine_active:pod"]
    # honorLabels false: the pod's labels arrive as exported_*; the rule keeps namespace/pod of the pod
    assert 'exported_pod!=""' in renamed and '"namespace", "$1", "exported_namespace", "(.+)"' in renamed
    assert 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod=""}' in _rules(True)["gpuops:gpu_devices_free:node"]
    for expr in _rules(False).values():  # balanced brackets, at least
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), expr


def test_the_role_ships_the_dashboard_as_a_sidecar_configmap():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    assert defaults["dcgm_exporter_grafana_dashboard"] is True
    assert (defaults["dcgm_exporter_grafana_dashboard_label"], defaults["dcgm_exporter_grafana_dashboard_label_value"]) \
        == ("grafana_dashboard", "1")
    with open(os.path.join(ROLE, "templates", "grafana-dashboard.yml.j2")) as f:
        text = f.read()
    assert "kind: ConfigMap" in text and "lookup('ansible.builtin.file', 'gpuops-gpu-dashboard.json')" in text
    with open(os.path.join(ROLE, "tasks", "main.yml")) as f:
        tasks = f.read()
    assert re.search(r"\['grafana-dashboard'\] if dcgm_exporter_grafana_dashboard \| bool", tasks)
    assert "['prometheus-rule', 'recording-rules']" in tasks
