"""Offline validation of every manifest the stack roles render (GitOps mode).

Each scenario in tests/stack/scenarios/ is rendered once through the real roles
(tests/stack/render.yml, ansible-playbook), then every document is validated against the
Kubernetes OpenAPI schema in strict mode (unknown fields are errors) for each supported
Kubernetes version, with kubernetes-validate. Custom resources that have no upstream schema
(ServiceMonitor) are checked structurally. The tests also pin the rules the roles exist to
get right (shared/reference/k8s-gpu-stack.md §8).
"""
import glob
import os
import re
import subprocess
import sys

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
SCENARIOS = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(HERE, "scenarios", "*.yml")))
# The last three Kubernetes minor versions kubernetes-validate ships schemas for.
K8S_VERSIONS = sorted({kubernetes_validate.utils.major_minor(v) for v in kubernetes_validate.utils.all_versions()},
                      key=lambda v: tuple(int(x) for x in v.split(".")))[-3:]
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}


def _render(scenario, out):
    env = dict(os.environ)
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
         os.path.join(HERE, "render.yml"), "-e", "@" + os.path.join(HERE, "scenarios", scenario + ".yml"),
         "-e", "stack_render_dir=%s" % out],
        cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc.stdout


@pytest.fixture(scope="module", params=SCENARIOS)
def rendered(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("render-" + request.param)
    log = _render(request.param, str(out))
    docs = []
    for path in sorted(glob.glob(os.path.join(str(out), "*", "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    docs.append((os.path.relpath(path, str(out)), doc))
    assert docs, "scenario %s rendered nothing" % request.param
    return request.param, docs, log


def _kinds(docs):
    return {doc["kind"] for _path, doc in docs}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_schema_strict(rendered, version):
    scenario, docs, _paths = rendered
    checked = 0
    for path, doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail("%s: %s %s/%s invalid for Kubernetes %s: %s" % (
                path, doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"], version, e.message))
        checked += 1
    assert checked >= 8, "only %d documents validated for %s" % (checked, scenario)


def test_service_monitor_shape(rendered):
    scenario, docs, _paths = rendered
    monitors = [d for _path, d in docs if d["kind"] == "ServiceMonitor"]
    if scenario != "full":
        assert monitors == []
        return
    assert len(monitors) == 1
    sm = monitors[0]
    assert set(sm) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(sm["spec"]) == {"selector", "namespaceSelector", "endpoints"}
    svc = [d for _path, d in docs if d["kind"] == "Service" and d["metadata"]["name"] == sm["metadata"]["name"]][0]
    assert sm["spec"]["selector"]["matchLabels"] == svc["spec"]["selector"]
    port_names = [p["name"] for p in svc["spec"]["ports"]]
    for ep in sm["spec"]["endpoints"]:
        assert set(ep) <= {"port", "path", "interval", "scrapeTimeout", "honorLabels", "relabelings",
                           "metricRelabelings"}
        assert ep["port"] in port_names


def test_prometheus_rule_alerts_on_what_gpu_health_checks(rendered):
    """One alert per gpu_health check, each keyed by node with the gpuops_check label gpu_alerts reads back, on
    metrics the exporter collects; the ServiceMonitor puts the node label there."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.health import alerts as gpu_alerts

    scenario, docs, _paths = rendered
    rules = [d for _path, d in docs if d["kind"] == "PrometheusRule"]
    if scenario != "full":
        assert rules == []
        return
    # the alerting rules, and the recording rules of the usage dashboard (<name>-gpu-usage: records only)
    alerting = [d for d in rules if any("alert" in r for g in d["spec"]["groups"] for r in g["rules"])]
    recording = [d for d in rules if d not in alerting]
    (rule,) = alerting
    assert [d["metadata"]["name"].endswith("-gpu-usage") for d in recording] == [True]
    assert all("record" in r for d in recording for g in d["spec"]["groups"] for r in g["rules"])
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert dict((a["alert"], a["labels"]["gpuops_check"]) for a in alerts) == gpu_alerts.ALERT_CHECKS
    csv = [d for _path, d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-metrics")][0]
    collected = set(line.split(",")[0].strip() for line in csv["data"]["dcgm-metrics.csv"].splitlines() if line.strip())
    for a in alerts:
        assert "by (node" in a["expr"], a
        assert re.findall(r"DCGM_FI_[A-Z_]+", a["expr"]) and set(re.findall(r"DCGM_FI_[A-Z_]+", a["expr"])) <= collected, a
        assert a["annotations"]["value"] == "{{ $value }}"
    xid = [a for a in alerts if a["alert"] == "GpuXidError"][0]
    assert xid["labels"]["xid"] == "{{ $value }}" and xid["expr"].endswith("!= 13 != 31 != 43 != 45 != 68 != 109")
    monitor = [d for _path, d in docs if d["kind"] == "ServiceMonitor"][0]
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"} \
        in monitor["spec"]["endpoints"][0]["relabelings"]


def test_pod_specs_pass_api_rules_the_schema_cannot_express(rendered):
    """Cross-field rules of the API server's validation (found on the real API server)."""
    _scenario, docs, _paths = rendered
    for path, doc in docs:
        if doc["kind"] != "DaemonSet":
            continue
        pod = doc["spec"]["template"]["spec"]
        assert not (pod.get("hostPID") and pod.get("shareProcessNamespace")), \
            "%s: ShareProcessNamespace and HostPID cannot both be enabled" % path
        assert doc["spec"]["selector"]["matchLabels"].items() <= doc["spec"]["template"]["metadata"]["labels"].items()
        names = [c["name"] for c in _containers(doc)]
        assert len(names) == len(set(names)), path
        volumes = {v["name"] for v in pod.get("volumes", [])}
        for c in _containers(doc):
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes, (path, c["name"], m["name"])
                if m.get("mountPropagation") == "Bidirectional":
                    assert c.get("securityContext", {}).get("privileged"), (path, c["name"])
            sc = c.get("securityContext", {})
            if sc.get("allowPrivilegeEscalation") is False:
                assert not sc.get("privileged") and "CAP_SYS_ADMIN" not in sc.get("capabilities", {}).get("add", [])


def _containers(ds):
    spec = ds["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def test_device_plugin_rules(rendered):
    _scenario, docs, _paths = rendered
    daemonsets = {d["metadata"]["name"]: d for _path, d in docs if d["kind"] == "DaemonSet"}
    plugin = daemonsets["nvidia-device-plugin"]
    pod = plugin["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms, "the device plugin must be restricted to GPU nodes"
    assert pod["shareProcessNamespace"] is True
    names = [c["name"] for c in _containers(plugin)]
    assert names == ["nvidia-device-plugin-init", "nvidia-device-plugin-sidecar", "nvidia-device-plugin"]
    for c in _containers(plugin):
        # flags that do not exist in the device plugin (reference §8: --config, configmap list strategy)
        for arg in c.get("args", []) + c.get("command", []):
            assert not arg.startswith("--config="), arg
            assert "device-list-strategy=configmap" not in arg
        env = dict((e["name"], e.get("value")) for e in c.get("env", []))
        # a MIG_STRATEGY env would override every per-node config
        assert "MIG_STRATEGY" not in env
        if c["name"].endswith(("-init", "-sidecar")):
            assert env["NODE_LABEL"] == "nvidia.com/device-plugin.config"
            assert env["ONESHOT"] == ("true" if c["name"].endswith("-init") else "false")
    # every DaemonSet has its own selector (k8s-device-plugin#982)
    selectors = [tuple(sorted(d["spec"]["selector"]["matchLabels"].items())) for d in daemonsets.values()]
    assert len(selectors) == len(set(selectors))
    # the named configs are valid device plugin config files
    cms = [d for _path, d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "nvidia-device-plugin-configs"]
    assert len(cms) == 1
    for key, text in cms[0]["data"].items():
        cfg = yaml.safe_load(text)
        assert cfg["version"] == "v1"
        assert cfg["flags"]["migStrategy"] in ("none", "single", "mixed")
        for kind in ("timeSlicing", "mps"):
            for res in cfg.get("sharing", {}).get(kind, {}).get("resources", []):
                assert res["replicas"] >= 2
                assert set(res) == {"name", "replicas"}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["available-configs"]["configMap"]["name"] == cms[0]["metadata"]["name"]


def test_dcgm_exporter_rules(rendered):
    _scenario, docs, _paths = rendered
    ds = [d for _path, d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "dcgm-exporter"][0]
    pod = ds["spec"]["template"]["spec"]
    for c in _containers(ds):
        res = c.get("resources", {})
        for section in ("requests", "limits"):
            assert not any(k.startswith("nvidia.com/") for k in res.get(section, {})), "exporter must not take a GPU"
        sc = c.get("securityContext", {})
        assert not sc.get("privileged")
        assert set(sc.get("capabilities", {}).get("add", [])) <= {"SYS_ADMIN"}
        env = dict((e["name"], e.get("value")) for e in c.get("env", []))
        assert "dcp-metrics-inventory" not in env.get("DCGM_EXPORTER_COLLECTORS", "")
        assert env["DCGM_EXPORTER_KUBERNETES"] == "true"
    mounts = {v["name"]: v for v in pod["volumes"]}
    assert mounts["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    cm = [d for _path, d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "dcgm-exporter-metrics"][0]
    csv = cm["data"]["dcgm-metrics.csv"]
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge," in csv
    for line in csv.strip().splitlines():
        assert line.count(",") == 2, line
    adapters = [d for _path, d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})]
    for cm in adapters:
        rules = yaml.safe_load(cm["data"]["config.yaml"])["rules"]
        names = [r["name"]["as"] for r in rules]
        assert "gpu_engine_active" in names
        for r in rules:
            assert set(r) == {"seriesQuery", "resources", "name", "metricsQuery"}
            assert sorted(v["resource"] for v in r["resources"]["overrides"].values()) == ["namespace", "pod"]


def test_quota_rules(rendered):
    scenario, docs, log = rendered
    quotas = [d for _path, d in docs if d["kind"] == "ResourceQuota"]
    assert quotas
    for q in quotas:
        for key in q["spec"]["hard"]:
            if "nvidia.com/" in key:
                assert key.startswith("requests."), "%s: %s is never enforced" % (q["metadata"]["name"], key)
        for expr in q["spec"].get("scopeSelector", {}).get("matchExpressions", []):
            assert expr["scopeName"] == "PriorityClass" and expr["operator"] == "In" and expr["values"]
    if scenario == "full":
        team_a = [q for q in quotas if q["metadata"]["namespace"] == "team-a" and q["metadata"]["name"] == "gpu-quota"][0]
        assert team_a["spec"]["hard"]["requests.nvidia.com/mig-1g.10gb"] == "8"
        assert "limits.nvidia.com/mig-1g.10gb" not in team_a["spec"]["hard"]
        assert "converted to requests.nvidia.com/mig-1g.10gb" in log
        # GPU LimitRange entries only in the GPU-only namespace
        for lr in (d for _path, d in docs if d["kind"] == "LimitRange"):
            has_gpu = any("nvidia.com/" in k for item in lr["spec"]["limits"] for f in item.values()
                          if isinstance(f, dict) for k in f)
            assert not has_gpu or lr["metadata"]["namespace"] == "team-b-gpu"


def test_priority_classes_and_hpas(rendered):
    _scenario, docs, _paths = rendered
    pcs = {d["metadata"]["name"]: d for _path, d in docs if d["kind"] == "PriorityClass"}
    assert set(pcs) == {"gpu-critical", "gpu-high", "gpu-low"}
    assert pcs["gpu-critical"]["value"] > pcs["gpu-high"]["value"] > pcs["gpu-low"]["value"]
    assert all(pc["value"] <= 1000000000 for pc in pcs.values())
    hpas = [d for _path, d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    assert hpas
    for h in hpas:
        assert h["apiVersion"] == "autoscaling/v2"
        assert 1 <= h["spec"]["minReplicas"] <= h["spec"]["maxReplicas"]
        for direction in h["spec"].get("behavior", {}).values():
            assert 0 <= direction.get("stabilizationWindowSeconds", 0) <= 3600
            for pol in direction.get("policies", []):
                assert 0 < pol["periodSeconds"] <= 1800
