"""GPU metrics drive the real HPA controller: simulated DCGM exporter -> Prometheus -> the lab's
custom-metrics stand-in -> kube-controller-manager's HPA controller (docs/autoscaling.md).

One metric lab (tests/e2e/lib/metrics_lab.py) and two kwok A100 nodes with 7 MIG 1g.10gb slices each
are shared by the module. The HPAs are the gpu_autoscaling role's (apply mode), with short windows:
1. 95 % GPU activity -> replicas grow to max within the policy, the new pods bind to free slices
   (the exporter labels each slice with its pod); 20 % -> back to min after the stabilisation window.
   The measured timeline is written to .cache/metrics-timeline.json.
2. the tenant's quota stops the scale-up: the HPA wants more, the ReplicaSet reports the quota error,
   the pods that fit keep running and their metrics keep flowing.
3. request latency from the workload's own exporter combined with the GPU metric: latency alone scales up.
"""
import json
import os
import subprocess
import time

import pytest
import yaml
from kubernetes import client

from lib import metrics_lab, playbook
from lib.wait import wait_for

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLICE = "nvidia.com/mig-1g.10gb"
TIMELINE = os.path.join(TOP, ".cache", "metrics-timeline.json")
PLAYBOOK = playbook.localhost_yaml("GPU autoscaling", """\
  roles:
    - role: gpuops.k8s.gpu_autoscaling
""")
FAST = {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 2, "periodSeconds": 10}]},
        "scaleDown": {"stabilizationWindowSeconds": 20, "selectPolicy": "Min",
                      "policies": [{"type": "Percent", "value": 100, "periodSeconds": 10}]}}


def apply_hpas(kubeconfig, tmp_path, hpas):
    playbook.run(playbook.write(tmp_path, PLAYBOOK, "hpa"), kubeconfig=kubeconfig, cwd=tmp_path, timeout=300,
                 extra_vars={"gpu_autoscaling_hpas": hpas})


def deployment(name, replicas, node_selector):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeSelector": node_selector, "terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "server", "image": "registry.k8s.io/pause:3.10",
                                                           "resources": {"limits": {SLICE: "1"}, "requests": {SLICE: "1"}}}]}}}}


@pytest.fixture(scope="module")
def lab(k8s_cluster, tmp_path_factory):
    with metrics_lab.kwok_lab(k8s_cluster, tmp_path_factory, "metrics", {"1g.10gb": 7}) as lab:
        yield lab


@pytest.fixture
def ns(namespace):
    """conftest's fresh namespace (deleted after the test)."""
    return namespace


def _apps(k8s_cluster):
    api = k8s_cluster.api_client()
    return client.AppsV1Api(api), client.AutoscalingV2Api(api)


def _pods(core, ns, app):
    return [p for p in core.list_namespaced_pod(ns, label_selector="app=" + app).items if not p.metadata.deletion_timestamp]


def test_exporter_serves_dcgm_exposition_per_slice(k8s_cluster, lab, ns):
    """The exporter's exposition reaches Prometheus with dcgm-exporter's names and labels."""
    apps, dummy = _apps(k8s_cluster)
    apps.create_namespaced_deployment(ns, deployment("probe", 2, lab["sel"]))
    lab["lab"].put_load({"rules": [{"namespace": ns, "pod_prefix": "probe-", "gpu": 42}]})
    series = wait_for(lambda: [r for r in lab["lab"].query('DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace="%s"}' % ns)
                               if r["value"][1] == "0.42"] if len(lab["lab"].query(
                                   'DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace="%s"}' % ns)) == 2 else None,
                      timeout=60, what="both probe pods' slices in Prometheus")
    assert len(series) == 2
    labels = series[0]["metric"]
    for key in ("gpu", "UUID", "GPU_I_PROFILE", "GPU_I_ID", "exported_pod", "exported_namespace", "exported_container",
                "Hostname", "modelName", "node", "pod", "namespace"):
        assert key in labels, (key, labels)
    assert labels["GPU_I_PROFILE"] == "1g.10gb" and labels["node"] in lab["nodes"]
    assert labels["namespace"] == "gpu-monitoring"  # the exporter pod's namespace; the workload's is exported_*
    assert {s["metric"]["exported_pod"] for s in series} == {p.metadata.name for p in _pods(k8s_cluster.core, ns, "probe")}
    # MIG devices: GPU_UTIL is 0 as on real hardware
    util = lab["lab"].query('DCGM_FI_DEV_GPU_UTIL{exported_namespace="%s"}' % ns)
    assert [r["value"][1] for r in util] == ["0", "0"]
    # two pods, two different slices
    assert len({(s["metric"]["Hostname"], s["metric"]["gpu"], s["metric"]["GPU_I_ID"]) for s in series}) == 2


def test_gpu_activity_scales_the_deployment_up_and_down(k8s_cluster, lab, ns):
    core = k8s_cluster.core
    apps, hpa_api = _apps(k8s_cluster)
    m = lab["lab"]
    apps.create_namespaced_deployment(ns, deployment("infer", 1, lab["sel"]))
    wait_for(lambda: [p for p in _pods(core, ns, "infer") if p.spec.node_name], timeout=60, what="the first pod bound")
    apply_hpas(k8s_cluster.kubeconfig, lab["tmp"], [{
        "name": "infer", "namespace": ns, "target": {"name": "infer"}, "min_replicas": 1, "max_replicas": 4,
        "gpu_metric": {"name": "gpu_engine_active", "average_value": "700m"}, "behavior": FAST}])
    m.put_load({"rules": [{"namespace": ns, "pod_prefix": "infer-", "gpu": 20}]})
    # steady at 20 %: the HPA reads the metric and stays at 1
    wait_for(lambda: any(c.type == "ScalingActive" and c.status == "True"
                         for c in (hpa_api.read_namespaced_horizontal_pod_autoscaler("infer", ns).status.conditions or [])),
             timeout=90, what="HPA ScalingActive (metric available through the stand-in)")
    assert apps.read_namespaced_deployment("infer", ns).spec.replicas == 1

    t0 = time.time()
    m.put_load({"rules": [{"namespace": ns, "pod_prefix": "infer-", "gpu": 95}]})
    q = 'avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace="%s",exported_pod=~"infer-.*"})' % ns
    wait_for(lambda: any(r["value"][1] == "0.95" for r in m.query(q)), timeout=30, what="95 % in Prometheus")
    t_metric = time.time()
    wait_for(lambda: apps.read_namespaced_deployment("infer", ns).spec.replicas > 1, timeout=60, what="HPA scale-up")
    t_decision = time.time()
    wait_for(lambda: len([p for p in _pods(core, ns, "infer") if p.spec.node_name]) >= 2, timeout=60,
             what="a new pod bound")
    t_bound = time.time()
    wait_for(lambda: apps.read_namespaced_deployment("infer", ns).spec.replicas == 4, timeout=120, what="max replicas (4)")

    def all_bound():
        ps = _pods(core, ns, "infer")
        return ps if len(ps) == 4 and all(p.spec.node_name for p in ps) else None
    pods = wait_for(all_bound, timeout=60, what="4 pods bound")
    t_max = time.time()
    # each pod sits on its own free slice of the two nodes, and the exporter reports it there
    per_node = {}
    for p in pods:
        per_node[p.spec.node_name] = per_node.get(p.spec.node_name, 0) + 1
    assert set(per_node) <= set(lab["nodes"]) and sum(per_node.values()) == 4

    def four_slices():
        rs = m.query('DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace="%s"}' % ns)
        return rs if len(rs) == 4 else None
    owned = wait_for(four_slices, timeout=30, what="4 slices in Prometheus")
    assert {r["metric"]["exported_pod"] for r in owned} == {p.metadata.name for p in pods}
    assert len({(r["metric"]["Hostname"], r["metric"]["gpu"], r["metric"]["GPU_I_ID"]) for r in owned}) == 4
    hpa = hpa_api.read_namespaced_horizontal_pod_autoscaler("infer", ns)
    assert hpa.status.desired_replicas == 4
    events = [e for e in core.list_namespaced_event(ns, field_selector="involvedObject.name=infer").items
              if e.reason == "SuccessfulRescale"]
    assert events and all("above target" in e.message or "All metrics below target" in e.message for e in events)
    # the policy (2 pods per 10 s) held: 1 -> at most 3 -> 4, never a jump past it
    sizes = sorted({int(e.message.split("New size: ")[1].split(";")[0]) for e in events})
    assert sizes[0] <= 3, sizes

    t_low = time.time()
    m.put_load({"rules": [{"namespace": ns, "pod_prefix": "infer-", "gpu": 20}]})
    wait_for(lambda: apps.read_namespaced_deployment("infer", ns).spec.replicas == 1, timeout=120, what="scale-down to 1")
    t_down = time.time()
    # not before the 20 s stabilisation window
    assert t_down - t_low >= 20, t_down - t_low
    timeline = {"scrape_interval_s": 2, "hpa_sync_period_s": 5, "scale_up_policy": FAST["scaleUp"],
                "scale_down_stabilization_s": 20,
                "load_95_to_metric_in_prometheus_s": round(t_metric - t0, 1),
                "load_95_to_first_scale_decision_s": round(t_decision - t0, 1),
                "load_95_to_first_new_pod_bound_s": round(t_bound - t0, 1),
                "load_95_to_max_replicas_bound_s": round(t_max - t0, 1),
                "load_20_to_scaled_down_to_min_s": round(t_down - t_low, 1),
                "rescale_events": [e.message for e in sorted(events, key=lambda e: e.metadata.creation_timestamp)]}
    os.makedirs(os.path.dirname(TIMELINE), exist_ok=True)
    with open(TIMELINE, "w") as f:
        json.dump(timeline, f, indent=2)
    print("timeline: %s" % json.dumps(timeline))


def test_quota_stops_the_scale_up_and_says_so(k8s_cluster, lab, ns):
    core = k8s_cluster.core
    apps, hpa_api = _apps(k8s_cluster)
    core.create_namespaced_resource_quota(ns, {"metadata": {"name": "gpu"}, "spec": {"hard": {"requests." + SLICE: "2"}}})
    apps.create_namespaced_deployment(ns, deployment("capped", 1, lab["sel"]))
    apply_hpas(k8s_cluster.kubeconfig, lab["tmp"], [{
        "name": "capped", "namespace": ns, "target": {"name": "capped"}, "min_replicas": 1, "max_replicas": 4,
        "gpu_metric": {"name": "gpu_engine_active", "average_value": "700m"}, "behavior": FAST}])
    lab["lab"].put_load({"rules": [{"namespace": ns, "pod_prefix": "capped-", "gpu": 95}]})
    wait_for(lambda: (hpa_api.read_namespaced_horizontal_pod_autoscaler("capped", ns).status.desired_replicas or 0) >= 3,
             timeout=120, what="the HPA wanting more than the quota allows")

    def quota_error():
        for rs in apps.list_namespaced_replica_set(ns, label_selector="app=capped").items:
            for c in rs.status.conditions or []:
                if c.type == "ReplicaFailure" and "exceeded quota" in (c.message or ""):
                    return c.message
    msg = wait_for(quota_error, timeout=60, what="the ReplicaSet's quota error")
    assert "requests." + SLICE in msg
    hpa = hpa_api.read_namespaced_horizontal_pod_autoscaler("capped", ns)
    dep = apps.read_namespaced_deployment("capped", ns)
    # the HPA asks for more replicas than run; only the quota's 2 exist and run on slices
    assert hpa.status.desired_replicas > hpa.status.current_replicas == 2
    assert (dep.status.ready_replicas or 0) == 2 and dep.spec.replicas > 2
    assert len([p for p in _pods(core, ns, "capped") if p.spec.node_name]) == 2
    # nothing else breaks: the HPA still reads its metric
    assert any(c.type == "ScalingActive" and c.status == "True" for c in hpa.status.conditions)
    print("quota error surfaced on the ReplicaSet: %s" % msg)


def test_latency_and_gpu_metric_combined(k8s_cluster, lab, ns):
    core = k8s_cluster.core
    apps, hpa_api = _apps(k8s_cluster)
    apps.create_namespaced_deployment(ns, deployment("llm", 1, lab["sel"]))
    lab["lab"].put_load({"rules": [{"namespace": ns, "pod_prefix": "llm-", "gpu": 30, "latency": 0.4}]})
    apply_hpas(k8s_cluster.kubeconfig, lab["tmp"], [{
        "name": "llm", "namespace": ns, "target": {"name": "llm"}, "min_replicas": 1, "max_replicas": 3,
        "gpu_metric": {"name": "gpu_engine_active", "average_value": "700m"},
        "latency_metric": {"name": "request_latency_p95_seconds", "average_value": "250m"}, "behavior": FAST}])
    # GPU at 30 % (below 70 %) but p95 latency ~0.49 s (above 250 ms): the HPA takes the larger proposal
    wait_for(lambda: apps.read_namespaced_deployment("llm", ns).spec.replicas > 1, timeout=120,
             what="scale-up on latency")
    hpa = hpa_api.read_namespaced_horizontal_pod_autoscaler("llm", ns)
    current = dict((c.pods.metric.name, c.pods.current.average_value) for c in hpa.status.current_metrics or [] if c.pods)
    assert set(current) == {"gpu_engine_active", "request_latency_p95_seconds"}, current
    assert current["gpu_engine_active"] in ("300m", "0.3")
    print("HPA current metrics: %s" % current)


KEDA_VERSION = "v2.21.0"  # v2.21.1 needs go >= 1.27.4 (go.mod); both serve the same ScaledObject CRD schema


def keda_crd():
    """KEDA's ScaledObject CRD from the KEDA module (the Go module proxy serves it)."""
    proc = subprocess.run(["go", "mod", "download", "-json", "github.com/kedacore/keda/v2@" + KEDA_VERSION],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False,
                          cwd="/", env=dict(os.environ, GOFLAGS="-mod=mod"))
    info = json.loads(proc.stdout or "{}")
    assert info.get("Dir"), "go mod download github.com/kedacore/keda/v2@%s: %s %s" % (KEDA_VERSION, info.get("Error"), proc.stderr)
    with open(os.path.join(info["Dir"], "config", "crd", "bases", "keda.sh_scaledobjects.yaml")) as f:
        return yaml.safe_load(f)


def test_keda_backend_scaled_objects_fit_kedas_crd(k8s_cluster, lab, ns):
    """gpu_autoscaling_backend: keda applies ScaledObjects that KEDA's own CRD schema keeps whole."""
    from kubernetes.client.rest import ApiException
    api = k8s_cluster.api_client()
    ext = client.ApiextensionsV1Api(api)
    crd = keda_crd()
    created = False
    try:
        ext.create_custom_resource_definition(crd)
        created = True
    except ApiException as e:
        if e.status != 409:
            raise
    try:
        wait_for(lambda: any(c.type == "Established" and c.status == "True"
                             for c in ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions or []),
                 timeout=60, what="KEDA CRD established")
        hpa = {"name": "llm", "namespace": ns, "target": {"name": "llm"}, "min_replicas": 1, "max_replicas": 5,
               "gpu_metric": {"name": "gpu_engine_active", "average_value": "700m"},
               "latency_metric": {"name": "request_latency_p95_seconds", "average_value": "250m"}, "behavior": FAST}
        playbook.run(playbook.write(lab["tmp"], PLAYBOOK, "keda"), kubeconfig=k8s_cluster.kubeconfig, cwd=lab["tmp"],
                     timeout=300, extra_vars={"gpu_autoscaling_hpas": [hpa], "gpu_autoscaling_backend": "keda",
                                              "gpu_autoscaling_keda_prometheus_url": lab["lab"].prometheus_url})
        so = client.CustomObjectsApi(api).get_namespaced_custom_object("keda.sh", "v1alpha1", ns, "scaledobjects", "llm")
        spec = so["spec"]
        # nothing pruned by the structural schema: every field the role wrote is a KEDA field
        assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 20
        assert [t["metricType"] for t in spec["triggers"]] == ["AverageValue", "Value"]
        assert spec["triggers"][0]["metadata"]["threshold"] == "0.7"
        # the trigger's query is the adapter rule's, answered by the lab's Prometheus
        assert isinstance(lab["lab"].query(spec["triggers"][0]["metadata"]["query"]), list)
        # no KEDA operator here: nothing turned the ScaledObject into an HPA
        assert not client.AutoscalingV2Api(api).list_namespaced_horizontal_pod_autoscaler(ns).items
    finally:
        if created:
            ext.delete_custom_resource_definition(crd["metadata"]["name"])
