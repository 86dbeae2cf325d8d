"""The Kubernetes GPU stack roles on a real control plane with kwok GPU nodes.

apply -> second apply changed=0 -> check mode changed=0 -> DaemonSets only on GPU nodes, per-node
device-plugin config labels -> quota rejects the over-quota pod (full GPU and MIG slice) ->
gpu-critical preempts gpu-low -> HPA accepted with its behavior; plus the bad-input refusals and
the PriorityClass immutable-change policy. Every object name carries a unique suffix, so a reused
cluster (make cluster-up) is not disturbed; the gpu-* PriorityClasses are the real names and are
removed at the end when this module created them.
"""
import json
import os
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from lib import gpu_nodes, playbook
from lib.wait import pod_manifest, wait_for

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = playbook.localhost_yaml("GPU stack", """\
  tasks:
    - name: Device plugin
      ansible.builtin.include_role: {name: gpuops.k8s.device_plugin}
      when: "'device_plugin' in stack_roles"
    - name: DCGM exporter
      ansible.builtin.include_role: {name: gpuops.k8s.dcgm_exporter}
      when: "'dcgm_exporter' in stack_roles"
    - name: Tenancy
      ansible.builtin.include_role: {name: gpuops.k8s.gpu_tenancy}
      when: "'gpu_tenancy' in stack_roles"
    - name: Autoscaling
      ansible.builtin.include_role: {name: gpuops.k8s.gpu_autoscaling}
      when: "'gpu_autoscaling' in stack_roles"
""")
ALL_ROLES = ["device_plugin", "dcgm_exporter", "gpu_tenancy", "gpu_autoscaling"]


def run_stack(kubeconfig, tmp_path, variables, check=False, roles=None):
    """The stack roles named (all by default) on localhost -> playbook.Run."""
    roles = ALL_ROLES if roles is None else roles
    return playbook.run(playbook.write(tmp_path, PLAYBOOK), kubeconfig=kubeconfig, cwd=tmp_path, check=check,
                        extra_vars=dict(variables, stack_roles=roles), expect_rc=None)


@pytest.fixture(scope="module")
def stack(k8s_cluster, tmp_path_factory):
    """kwok GPU nodes plus the whole stack applied once; yields the names used."""
    u = uuid.uuid4().hex[:6]
    core = k8s_cluster.core
    sel = {"e2e-run": u}
    nodes = {
        "h100": "e2e-stack-h100-" + u,
        "a100": "e2e-stack-a100-" + u,
        "l40s": "e2e-stack-l40s-" + u,
        "cpu": "e2e-stack-cpu-" + u,
    }
    gpu_nodes.ensure_node(core, nodes["h100"], gpus=[{"model": "h100_80gb", "count": 8}], labels=sel)
    gpu_nodes.ensure_node(core, nodes["a100"], gpus=[{"model": "a100_80gb", "count": 2}], mig_strategy="mixed",
                          mig_config=[{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                                      {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
                          labels=sel)
    gpu_nodes.ensure_node(core, nodes["l40s"], gpus=[{"model": "l40s_48gb", "count": 1}], labels=sel)
    gpu_nodes.plain_node(core, nodes["cpu"], labels=sel)
    sched = client.SchedulingV1Api(k8s_cluster.api_client())
    existing_pcs = set(pc.metadata.name for pc in sched.list_priority_class().items)
    names = {
        "u": u, "sel": sel, "nodes": nodes,
        "dp_ns": "e2e-dp-" + u, "dp_name": "e2e-dp-" + u,
        "dcgm_ns": "e2e-dcgm-" + u, "mon_ns": "e2e-mon-" + u,
        "team_a": "e2e-team-a-" + u, "team_b": "e2e-team-b-" + u,
    }
    variables = {
        "device_plugin_namespace": names["dp_ns"],
        "device_plugin_name": names["dp_name"],
        "device_plugin_wait_timeout": 120,
        "device_plugin_configs": {
            "default": {"version": "v1", "flags": {"migStrategy": "none"}},
            "mig-mixed": {"version": "v1", "flags": {"migStrategy": "mixed"}},
            "ts-4": {"version": "v1", "sharing": {"timeSlicing": {
                "failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
            "mps-2": {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
        },
        "device_plugin_node_configs": {nodes["a100"]: "mig-mixed", nodes["l40s"]: "ts-4"},
        "dcgm_exporter_namespace": names["dcgm_ns"],
        "dcgm_exporter_name": "e2e-dcgm-" + u,
        "dcgm_exporter_adapter_namespace": names["mon_ns"],
        "dcgm_exporter_wait_timeout": 120,
        "gpu_tenancy_capacity_policy": "fail",
        "gpu_tenancy_tenants": [
            {"name": names["team_a"], "pod_security": "baseline",
             "quota": {"hard": {"requests.nvidia.com/gpu": 2, "limits.nvidia.com/mig-1g.10gb": 1, "pods": "20"}},
             "priority_quotas": {"gpu-critical": {"hard": {"requests.nvidia.com/gpu": 1}}},
             "groups": {"edit": ["team-a-devs"], "view": ["auditors"]}},
            {"name": names["team_b"], "pod_security": "baseline", "gpu_only": True,
             "quota": {"hard": {"requests.nvidia.com/gpu": 4}},
             "limit_range": [{"type": "Container", "default": {"nvidia.com/gpu": 1},
                              "defaultRequest": {"nvidia.com/gpu": 1}}]},
        ],
        "gpu_autoscaling_hpas": [
            {"name": "llm", "namespace": names["team_a"], "target": {"name": "llm"}, "min_replicas": 1,
             "max_replicas": 6, "gpu_metric": {"name": "gpu_engine_active", "average_value": "700m"},
             "latency_metric": {"name": "request_latency_p95_seconds", "average_value": "250m"},
             "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                      "policies": [{"type": "Pods", "value": 2, "periodSeconds": 30}]},
                          "scaleDown": {"stabilizationWindowSeconds": 900, "selectPolicy": "Min",
                                        "policies": [{"type": "Percent", "value": 50, "periodSeconds": 300}]}}},
        ],
    }
    tmp = tmp_path_factory.mktemp("stack")
    first = run_stack(k8s_cluster.kubeconfig, tmp, variables)
    names.update(variables=variables, tmp=tmp, first=first, existing_pcs=existing_pcs)
    yield names
    apps = client.AppsV1Api(k8s_cluster.api_client())
    for ns in (names["dp_ns"], names["dcgm_ns"], names["mon_ns"], names["team_a"], names["team_b"]):
        try:
            core.delete_namespace(ns)
        except ApiException:
            pass
    rbac = client.RbacAuthorizationV1Api(k8s_cluster.api_client())
    for delete in (rbac.delete_cluster_role, rbac.delete_cluster_role_binding):
        try:
            delete(names["dp_name"])
        except ApiException:
            pass
    gpu_nodes.delete_priority_classes(sched, keep=existing_pcs)
    for node in nodes.values():
        gpu_nodes.delete_node(core, node)
    del apps


def test_apply_succeeds_and_creates_the_objects(stack, k8s_cluster):
    run = stack["first"]
    assert run.ok, run.explain()
    assert run.stats["localhost"]["failures"] == 0
    changed = run.changed()
    for role in ALL_ROLES:
        assert any(t.startswith("gpuops.k8s.%s : Apply" % role) for t in changed), (role, changed)
    assert "gpuops.k8s.device_plugin : Label the nodes with their device plugin config" in changed
    core = k8s_cluster.core
    apps = client.AppsV1Api(k8s_cluster.api_client())
    dss = {d.metadata.name for d in apps.list_namespaced_daemon_set(stack["dp_ns"]).items}
    dp = stack["dp_name"]
    assert dss == {dp, dp + "-gpu-feature-discovery", dp + "-mps-control-daemon"}
    cm = core.read_namespaced_config_map(dp + "-configs", stack["dp_ns"])
    assert sorted(cm.data) == ["default", "mig-mixed", "mps-2", "ts-4"]
    mps = yaml.safe_load(cm.data["mps-2"])
    assert mps["flags"]["mpsRoot"] == "/run/nvidia/mps"
    # the limits.* quota key was converted, with a warning
    hard = core.read_namespaced_resource_quota("gpu-quota", stack["team_a"]).spec.hard
    assert hard == {"requests.nvidia.com/gpu": "2", "requests.nvidia.com/mig-1g.10gb": "1", "pods": "20"}
    assert "limits.nvidia.com/mig-1g.10gb is never enforced" in run.output
    ns = core.read_namespace(stack["team_a"])
    assert ns.metadata.labels["pod-security.kubernetes.io/enforce"] == "baseline"
    rbs = {rb.metadata.name: rb for rb in
           client.RbacAuthorizationV1Api(k8s_cluster.api_client()).list_namespaced_role_binding(stack["team_a"]).items}
    assert rbs["gpu-tenant-edit"].subjects[0].name == "team-a-devs"
    assert rbs["gpu-tenant-edit"].role_ref.name == "edit"
    # no ServiceMonitor CRD in this cluster: auto mode skipped it
    assert core.read_namespaced_service("e2e-dcgm-" + stack["u"], stack["dcgm_ns"]).spec.ports[0].port == 9400


def test_second_apply_reports_no_change(stack, k8s_cluster):
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], stack["variables"])
    assert run.ok, run.explain()
    assert run.changed() == []
    assert run.stats["localhost"]["changed"] == 0


def test_check_mode_reports_no_change_and_then_the_truth(stack, k8s_cluster):
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], stack["variables"], check=True)
    assert run.ok, run.explain()
    assert run.stats["localhost"]["changed"] == 0, run.changed()
    # a changed quota in check mode: reported as a change, nothing written
    variables = json.loads(json.dumps(stack["variables"]))
    variables["gpu_tenancy_tenants"][0]["quota"]["hard"]["requests.nvidia.com/gpu"] = 1
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], variables, check=True, roles=["gpu_tenancy"])
    assert run.ok, run.explain()
    assert any("tenant" in t for t in run.changed()), run.changed()
    hard = k8s_cluster.core.read_namespaced_resource_quota("gpu-quota", stack["team_a"]).spec.hard
    assert hard["requests.nvidia.com/gpu"] == "2"


def test_daemonsets_only_on_gpu_nodes(stack, k8s_cluster):
    core = k8s_cluster.core
    apps = client.AppsV1Api(k8s_cluster.api_client())
    nodes = stack["nodes"]
    gpu = sorted([nodes["h100"], nodes["a100"], nodes["l40s"]])
    for ns, name in ((stack["dp_ns"], stack["dp_name"]), (stack["dp_ns"], stack["dp_name"] + "-gpu-feature-discovery"),
                     (stack["dcgm_ns"], "e2e-dcgm-" + stack["u"])):
        ds = apps.read_namespaced_daemon_set(name, ns)
        pods = [p for p in core.list_namespaced_pod(ns).items
                if p.metadata.owner_references and p.metadata.owner_references[0].name == name]
        where = sorted(p.spec.node_name for p in pods if p.spec.node_name)
        mine = [n for n in where if n.endswith(stack["u"])]
        assert mine == gpu, (name, where)
        assert nodes["cpu"] not in where
        for p in pods:
            labels = core.read_node(p.spec.node_name).metadata.labels
            assert labels.get("nvidia.com/gpu.present") == "true", (name, p.spec.node_name)
        wait_for(lambda: pods and all(core.read_namespaced_pod(p.metadata.name, ns).status.phase == "Running"
                                      for p in pods), 60, what="%s pods Running" % name)
        assert ds.spec.template.spec.priority_class_name == "system-node-critical"
        assert ds.status.desired_number_scheduled == len(where)
    # the MPS control daemon waits for GFD's nvidia.com/mps.capable=true label: none of these nodes has it
    mps = apps.read_namespaced_daemon_set(stack["dp_name"] + "-mps-control-daemon", stack["dp_ns"])
    assert mps.status.desired_number_scheduled == 0
    # the exporter asks for no GPU
    dcgm = apps.read_namespaced_daemon_set("e2e-dcgm-" + stack["u"], stack["dcgm_ns"])
    for c in dcgm.spec.template.spec.containers:
        assert not any(k.startswith("nvidia.com/") for k in (c.resources.limits or {}))
        assert c.security_context.capabilities.add == ["SYS_ADMIN"]


def test_per_node_config_label_honoured(stack, k8s_cluster, namespace):
    """What the collection produced: the per-node label names a ConfigMap key and that key holds the
    time-slicing config asked for (4 replicas). The rest checks the cluster, not the collection: kwok runs
    no device plugin, so the test itself advertises what the plugin would for that config (replicas read
    from the role's ConfigMap), and the scheduler then places 4 pods on the one-GPU node and the 5th pends."""
    core = k8s_cluster.core
    nodes = stack["nodes"]
    label = "nvidia.com/device-plugin.config"
    assert core.read_node(nodes["a100"]).metadata.labels[label] == "mig-mixed"
    assert core.read_node(nodes["l40s"]).metadata.labels[label] == "ts-4"
    assert label not in core.read_node(nodes["h100"]).metadata.labels
    apps = client.AppsV1Api(k8s_cluster.api_client())
    sidecar = [c for c in apps.read_namespaced_daemon_set(stack["dp_name"], stack["dp_ns"]).spec.template.spec.containers
               if c.name.endswith("-sidecar")][0]
    env = dict((e.name, e.value) for e in sidecar.env)
    assert env["NODE_LABEL"] == label and env["DEFAULT_CONFIG"] == "default"
    cm = core.read_namespaced_config_map(stack["dp_name"] + "-configs", stack["dp_ns"])
    config = yaml.safe_load(cm.data[core.read_node(nodes["l40s"]).metadata.labels[label]])
    assert config["version"] == "v1"
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert config["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True
    assert "mps" not in config["sharing"]
    replicas = config["sharing"]["timeSlicing"]["resources"][0]["replicas"]
    # the test plays the device plugin here (no assert on what it writes itself)
    gpu_nodes.ensure_node(core, nodes["l40s"], gpus=[{"model": "l40s_48gb", "count": 1}], labels=stack["sel"],
                          sharing={"strategy": "time-slicing", "replicas": replicas})
    pin = {"kubernetes.io/hostname": nodes["l40s"]}
    for i in range(replicas):
        core.create_namespaced_pod(namespace, pod_manifest("ts-%d" % i, {"nvidia.com/gpu": 1}, node_selector=pin))
    for i in range(replicas):
        wait_for(lambda: core.read_namespaced_pod("ts-%d" % i, namespace).status.phase == "Running", 60)
    core.create_namespaced_pod(namespace, pod_manifest("ts-extra", {"nvidia.com/gpu": 1}, node_selector=pin))

    def unschedulable():
        p = core.read_namespaced_pod("ts-extra", namespace)
        return [c.message for c in p.status.conditions or [] if c.reason == "Unschedulable"]

    assert "Insufficient nvidia.com/gpu" in wait_for(unschedulable, 60)[0]


def _wait_quota_ready(core, ns, name, key):
    wait_for(lambda: key in (core.read_namespaced_resource_quota(name, ns).status.hard or {}), 60,
             what="quota %s/%s status" % (ns, name))


def test_quota_rejects_over_quota_pods(stack, k8s_cluster):
    core = k8s_cluster.core
    ns = stack["team_a"]
    sel = {"e2e-run": stack["u"]}
    _wait_quota_ready(core, ns, "gpu-quota", "requests.nvidia.com/gpu")
    for i in range(2):
        core.create_namespaced_pod(ns, pod_manifest("gpu-%d" % i, {"nvidia.com/gpu": 1}, node_selector=sel))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod_manifest("gpu-2", {"nvidia.com/gpu": 1}, node_selector=sel))
    assert err.value.status == 403 and "exceeded quota: gpu-quota" in err.value.body
    assert "limited: requests.nvidia.com/gpu=2" in err.value.body
    # the MIG quota came in as limits.nvidia.com/mig-1g.10gb and is enforced as requests.*
    core.create_namespaced_pod(ns, pod_manifest("mig-0", {"nvidia.com/mig-1g.10gb": 1}, node_selector=sel))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod_manifest("mig-1", {"nvidia.com/mig-1g.10gb": 1}, node_selector=sel))
    assert err.value.status == 403 and "requests.nvidia.com/mig-1g.10gb" in err.value.body
    wait_for(lambda: core.read_namespaced_pod("mig-0", ns).spec.node_name == stack["nodes"]["a100"], 60,
             what="MIG pod bound to the MIG node")
    for name in ("gpu-0", "gpu-1", "mig-0"):
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


def test_priority_scoped_quota(stack, k8s_cluster):
    core = k8s_cluster.core
    ns = stack["team_a"]
    _wait_quota_ready(core, ns, "gpu-quota-gpu-critical", "requests.nvidia.com/gpu")
    wait_for(lambda: (core.read_namespaced_resource_quota("gpu-quota", ns).status.used or {}).get(
        "requests.nvidia.com/gpu") == "0", 60, what="quota usage back to 0")
    core.create_namespaced_pod(ns, pod_manifest("crit-0", {"nvidia.com/gpu": 1}, priority_class="gpu-critical"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod_manifest("crit-1", {"nvidia.com/gpu": 1}, priority_class="gpu-critical"))
    assert "exceeded quota: gpu-quota-gpu-critical" in err.value.body
    # a gpu-low pod is only capped by the namespace quota (2)
    core.create_namespaced_pod(ns, pod_manifest("low-0", {"nvidia.com/gpu": 1}, priority_class="gpu-low"))
    for name in ("crit-0", "low-0"):
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


def test_gpu_critical_preempts_gpu_low(stack, k8s_cluster, namespace):
    core = k8s_cluster.core
    pin = {"kubernetes.io/hostname": stack["nodes"]["h100"]}
    for i in range(8):
        core.create_namespaced_pod(namespace, pod_manifest("low-%d" % i, {"nvidia.com/gpu": 1}, node_selector=pin,
                                                           priority_class="gpu-low"))
    for i in range(8):
        wait_for(lambda: core.read_namespaced_pod("low-%d" % i, namespace).status.phase == "Running", 90)
    assert core.read_namespaced_pod("low-0", namespace).spec.priority == 1000
    assert core.read_namespaced_pod("low-0", namespace).spec.preemption_policy == "Never"
    core.create_namespaced_pod(namespace, pod_manifest("critical", {"nvidia.com/gpu": 1}, node_selector=pin,
                                                       priority_class="gpu-critical"))
    wait_for(lambda: core.read_namespaced_pod("critical", namespace).status.phase == "Running", 120,
             what="gpu-critical pod Running after preemption")
    alive = [p.metadata.name for p in core.list_namespaced_pod(namespace).items
             if p.metadata.name.startswith("low-") and p.metadata.deletion_timestamp is None]
    assert len(alive) == 7, alive
    events = core.list_namespaced_event(namespace).items
    assert any(e.reason == "Preempted" for e in events)


def test_hpa_accepted_with_behavior(stack, k8s_cluster):
    auto = client.AutoscalingV2Api(k8s_cluster.api_client())
    hpa = auto.read_namespaced_horizontal_pod_autoscaler("llm", stack["team_a"])
    assert hpa.spec.min_replicas == 1 and hpa.spec.max_replicas == 6
    assert hpa.spec.scale_target_ref.kind == "Deployment" and hpa.spec.scale_target_ref.name == "llm"
    metrics = [(m.type, m.pods.metric.name, m.pods.target.average_value) for m in hpa.spec.metrics]
    assert metrics == [("Pods", "gpu_engine_active", "700m"), ("Pods", "request_latency_p95_seconds", "250m")]
    b = hpa.spec.behavior
    assert b.scale_up.stabilization_window_seconds == 0
    assert [(p.type, p.value, p.period_seconds) for p in b.scale_up.policies] == [("Pods", 2, 30)]
    assert b.scale_down.stabilization_window_seconds == 900 and b.scale_down.select_policy == "Min"
    assert [(p.type, p.value, p.period_seconds) for p in b.scale_down.policies] == [("Percent", 50, 300)]


@pytest.mark.parametrize("role,override,expected", [
    ("device_plugin", {"device_plugin_configs": {"default": {"sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}}}, "replicas must be >= 2, got 1"),
    ("device_plugin", {"device_plugin_configs": {"default": {"flags": {"migStrategy": "auto"}}}},
     "valid values: none, single, mixed"),
    ("gpu_tenancy", {"gpu_tenancy_tenants": [{"name": "e2e-bad", "quota": {"hard": {
        "requests.nvidia.com/mig-1g.11gb": 1}}}]}, "unknown MIG resource 'nvidia.com/mig-1g.11gb'"),
    ("gpu_tenancy", {"gpu_tenancy_tenants": [{"name": "e2e-bad", "quota": {"hard": {
        "requests.nvidia.com/gpu": 100000}}}]}, "GPU quota overcommit: nvidia.com/gpu: tenant quotas 100000"),
    ("gpu_autoscaling", {"gpu_autoscaling_hpas": [{"name": "x", "namespace": "e2e-bad", "target": {"name": "x"},
                                                   "min_replicas": 3, "max_replicas": 2,
                                                   "gpu_metric": {"name": "gpu_engine_active", "average_value": "0.5"}}]},
     "min_replicas (3) must be <= max_replicas (2)"),
])
def test_bad_input_fails_before_any_change(stack, k8s_cluster, role, override, expected):
    variables = dict(stack["variables"], **override)
    if role == "device_plugin":
        variables["device_plugin_node_configs"] = {}
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], variables, roles=[role])
    assert not run.ok
    task, msg = run.failure()
    assert expected in msg, (task, msg)
    assert run.changed() == []
    with pytest.raises(ApiException):
        k8s_cluster.core.read_namespace("e2e-bad")


def test_priority_class_value_change_policy(stack, k8s_cluster):
    sched = client.SchedulingV1Api(k8s_cluster.api_client())
    variables = dict(stack["variables"])
    classes = {"gpu-critical": {"value": 1000000}, "gpu-high": {"value": 100000},
               "gpu-low": {"value": 2000, "preemption_policy": "Never"}}
    variables["gpu_tenancy_priority_classes"] = classes
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], variables, roles=["gpu_tenancy"])
    assert not run.ok
    _task, msg = run.failure()
    assert "immutable" in msg and "gpu-low: value 1000 -> 2000" in msg and "replace" in msg
    assert sched.read_priority_class("gpu-low").value == 1000
    variables["gpu_tenancy_priority_class_change_policy"] = "replace"
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], variables, roles=["gpu_tenancy"], check=True)
    assert run.ok, run.explain()
    assert sched.read_priority_class("gpu-low").value == 1000
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], variables, roles=["gpu_tenancy"])
    assert run.ok, run.explain()
    assert sched.read_priority_class("gpu-low").value == 2000
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], variables, roles=["gpu_tenancy"])
    assert run.ok and run.stats["localhost"]["changed"] == 0, run.changed()
    # back to the defaults for the other tests
    run = run_stack(k8s_cluster.kubeconfig, stack["tmp"], dict(
        stack["variables"], gpu_tenancy_priority_class_change_policy="replace"), roles=["gpu_tenancy"])
    assert run.ok, run.explain()
    assert sched.read_priority_class("gpu-low").value == 1000
