"""Security on the real API server (RBAC and Pod Security admission of the local control plane).

The roles are applied once (device plugin, DCGM exporter, two tenants, the health account); then every
account they create is tried against the API server as itself:

* tenant users (impersonated from the admin kubeconfig: ``Impersonate-User`` + ``Impersonate-Group``,
  the group the tenancy role binds): work in their own namespace, get 403 for another tenant's pods,
  quotas and secrets, and for changing their own ResourceQuota, their namespace's Pod Security labels
  or a PriorityClass;
* a privileged (or hostPath) pod in a tenant namespace is refused by Pod Security admission (baseline);
* the health role's ServiceAccount (a real token from the TokenRequest API): runs the role's ``apply``
  step (cordon + taint + annotations) and is refused everything else;
* the device plugin's and the exporter's ServiceAccounts hold exactly the rights NVIDIA's own charts give
  them (k8s-device-plugin v0.20.0 ``deployments/helm/nvidia-device-plugin/templates/role.yml``;
  dcgm-exporter ``deployment/`` with its defaults: no pod labels, so no ClusterRole and no token), and their
  containers no more privilege than the charts' defaults.

Each denial is checked twice: a SelfSubjectAccessReview as the account, and the real call answering 403.
Positive controls (the same client succeeding where it should) show the 403s come from RBAC, not from a
broken client.
"""
import base64
import json
import uuid

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from lib import gpu_nodes, playbook
from lib.wait import pod_manifest

PLAYBOOK = playbook.localhost_yaml("Roles under test", """\
  tasks:
    - name: Device plugin
      ansible.builtin.include_role: {name: gpuops.k8s.device_plugin}
    - name: DCGM exporter
      ansible.builtin.include_role: {name: gpuops.k8s.dcgm_exporter}
    - name: Tenancy
      ansible.builtin.include_role: {name: gpuops.k8s.gpu_tenancy}
    - name: Health account
      ansible.builtin.include_role: {name: gpuops.k8s.gpu_health, tasks_from: rbac}
""")

# The health role's apply step, with one unhealthy verdict, run with the health account's kubeconfig
HEALTH_PLAYBOOK = playbook.localhost_yaml("Health apply as the health account", """\
  tasks:
    - name: An unhealthy verdict for the node
      ansible.builtin.set_fact:
        gpu_health_report:
          node: "{{ node }}"
          verdict:
            healthy: false
            reason: "GPU 0: volatile uncorrected ECC errors 25 > 10"
            remediation: reset_gpu
            problems:
              - {kind: ecc_uncorrected, detail: "GPU 0: volatile uncorrected ECC errors 25 > 10", gpu: 0, action: reset_gpu}
    - name: Apply
      ansible.builtin.include_role: {name: gpuops.k8s.gpu_health, tasks_from: apply}
      vars:
        gpu_health_hosts: [localhost]
        gpu_health_dry_run: false
        gpu_health_max_unhealthy_fraction: 1.0
""")

# NVIDIA k8s-device-plugin v0.20.0 chart, templates/role.yml with gfd.enabled (what the role deploys)
NVIDIA_DEVICE_PLUGIN_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures"], "verbs": ["get", "list", "watch", "create", "update"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
]
# The chart's per-container securityContext defaults (templates/_helpers.tpl, values.yaml) for a config
# with migStrategy none: plugin and config-manager drop ALL; GFD privileged (values.yaml gfd.securityContext,
# "required for the vgpu info"); the MPS control daemon privileged. None adds more than SYS_ADMIN.
NVIDIA_PRIVILEGED_CONTAINERS = {"gpu-feature-discovery", "mps-control-daemon-mounts", "mps-control-daemon"}
# hostPath volumes of the chart's DaemonSets (mps.root /run/nvidia/mps, nvidiaDriverRoot /)
NVIDIA_HOST_PATHS = {
    "device-plugin": {"/var/lib/kubelet/device-plugins", "/run/nvidia/mps", "/run/nvidia/mps/shm", "/var/run/cdi", "/"},
    "gpu-feature-discovery": {"/etc/kubernetes/node-feature-discovery/features.d", "/sys", "/"},
    "mps-control-daemon": {"/run/nvidia/mps", "/run/nvidia/mps/shm"},
}
# dcgm-exporter chart values.yaml securityContext (profiling metrics on)
NVIDIA_DCGM_SECURITY_CONTEXT = {"runAsNonRoot": False, "runAsUser": 0, "allowPrivilegeEscalation": False,
                                "capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}}


def _playbook(text, variables, kubeconfig, tmp):
    return playbook.run(playbook.write(tmp, text), kubeconfig=kubeconfig, cwd=tmp, extra_vars=variables)


def _impersonating(kubeconfig, user, group):
    """An API client that acts as ``user`` in ``group`` (the admin kubeconfig may impersonate)."""
    api = config.new_client_from_config(kubeconfig)
    api.set_default_header("Impersonate-User", user)
    api.set_default_header("Impersonate-Group", group)
    return api


def _token_client(admin_api, kubeconfig, namespace, service_account):
    """An API client that authenticates with a fresh token of the ServiceAccount (TokenRequest API)."""
    core = client.CoreV1Api(admin_api)
    token = core.create_namespaced_service_account_token(service_account, namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=900))).status.token
    base = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=base)
    conf = client.Configuration()
    conf.host = base.host
    conf.ssl_ca_cert = base.ssl_ca_cert
    conf.verify_ssl = True
    conf.api_key = {"authorization": "Bearer " + token}
    return client.ApiClient(conf)


def _can(api, verb, resource, namespace=None, group="", subresource=None, name=None):
    review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
        resource_attributes=client.V1ResourceAttributes(verb=verb, resource=resource, group=group, namespace=namespace,
                                                        subresource=subresource, name=name)))
    return client.AuthorizationV1Api(api).create_self_subject_access_review(review).status.allowed


def _forbidden(call, *args, **kwargs):
    """The real call must be refused by the API server with 403; returns the message."""
    with pytest.raises(ApiException) as e:
        call(*args, **kwargs)
    assert e.value.status == 403, (e.value.status, e.value.body)
    return json.loads(e.value.body)["message"]


def _whoami(api):
    review = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview())
    return review.status.user_info


@pytest.fixture(scope="module")
def secured(k8s_cluster, tmp_path_factory):
    u = uuid.uuid4().hex[:6]
    admin = k8s_cluster.api_client()
    core = k8s_cluster.core
    sched = client.SchedulingV1Api(admin)
    existing_pcs = set(pc.metadata.name for pc in sched.list_priority_class().items)
    names = {
        "u": u, "dp_ns": "e2e-sec-dp-" + u, "dp_name": "e2e-sec-dp-" + u,
        "dcgm_ns": "e2e-sec-dcgm-" + u, "dcgm_name": "e2e-sec-dcgm-" + u, "mon_ns": "e2e-sec-mon-" + u,
        "team_a": "e2e-sec-a-" + u, "team_b": "e2e-sec-b-" + u,
        "group_a": "e2e-sec-a-devs-" + u, "group_b": "e2e-sec-b-devs-" + u,
        "health_ns": "e2e-sec-health-" + u, "health_sa": "e2e-sec-health-" + u,
        "node": "e2e-sec-node-" + u, "pool": {"e2e-sec": u},
    }
    gpu_nodes.ensure_node(core, names["node"], gpus=[{"model": "a100_80gb", "count": 1}], labels=names["pool"])
    variables = {
        "device_plugin_namespace": names["dp_ns"], "device_plugin_name": names["dp_name"],
        "device_plugin_wait_timeout": 120,
        # an MPS config, so that the MPS control daemon is deployed and checked too
        "device_plugin_configs": {
            "default": {"version": "v1", "flags": {"migStrategy": "none"}},
            "mps-2": {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}},
        "dcgm_exporter_namespace": names["dcgm_ns"], "dcgm_exporter_name": names["dcgm_name"],
        "dcgm_exporter_adapter_namespace": names["mon_ns"], "dcgm_exporter_wait_timeout": 120,
        "gpu_tenancy_capacity_policy": "ignore",
        "gpu_tenancy_tenants": [
            {"name": names["team_a"], "quota": {"hard": {"requests.nvidia.com/gpu": 2, "pods": "10"}},
             "groups": {"edit": [names["group_a"]]}},
            {"name": names["team_b"], "pod_security": "restricted", "quota": {"hard": {"requests.nvidia.com/gpu": 2}},
             "groups": {"edit": [names["group_b"]]}},
        ],
        "gpu_health_rbac_namespace": names["health_ns"], "gpu_health_service_account": names["health_sa"],
    }
    tmp = tmp_path_factory.mktemp("security")
    _playbook(PLAYBOOK, variables, k8s_cluster.kubeconfig, tmp)
    core.create_namespaced_secret(names["team_b"], {"metadata": {"name": "b-secret"}, "stringData": {"k": "v"}})
    names.update(tmp=tmp, admin=admin)
    yield names
    for ns in (names["dp_ns"], names["dcgm_ns"], names["mon_ns"], names["team_a"], names["team_b"], names["health_ns"]):
        try:
            core.delete_namespace(ns)
        except ApiException:
            pass
    rbac = client.RbacAuthorizationV1Api(admin)
    for name in (names["dp_name"], names["health_sa"]):
        for delete in (rbac.delete_cluster_role, rbac.delete_cluster_role_binding):
            try:
                delete(name)
            except ApiException:
                pass
    gpu_nodes.delete_priority_classes(sched, keep=existing_pcs)
    gpu_nodes.delete_node(core, names["node"])


# ------------------------------------------------------------------------------------------- tenants

def test_tenant_namespaces_enforce_pod_security(secured, k8s_cluster):
    core = k8s_cluster.core
    a = core.read_namespace(secured["team_a"]).metadata.labels
    b = core.read_namespace(secured["team_b"]).metadata.labels
    assert (a["pod-security.kubernetes.io/enforce"], a["pod-security.kubernetes.io/enforce-version"]) == ("baseline", "latest")
    assert a["pod-security.kubernetes.io/warn"] == a["pod-security.kubernetes.io/audit"] == "baseline"
    assert b["pod-security.kubernetes.io/enforce"] == "restricted"


def test_tenant_works_in_its_own_namespace(secured, k8s_cluster):
    """Positive control: the impersonated tenant is who it says and may do its job."""
    alice = _impersonating(k8s_cluster.kubeconfig, "alice", secured["group_a"])
    me = _whoami(alice)
    assert me.username == "alice" and secured["group_a"] in me.groups
    ns = secured["team_a"]
    assert _can(alice, "create", "pods", ns) and _can(alice, "get", "secrets", ns)
    assert _can(alice, "get", "resourcequotas", ns)
    core = client.CoreV1Api(alice)
    core.create_namespaced_pod(ns, pod_manifest("own-pod"))
    assert core.read_namespaced_pod("own-pod", ns).metadata.name == "own-pod"
    assert core.read_namespaced_resource_quota("gpu-quota", ns).spec.hard["requests.nvidia.com/gpu"] == "2"
    core.delete_namespaced_pod("own-pod", ns, grace_period_seconds=0)


def test_tenant_cannot_touch_another_tenant(secured, k8s_cluster):
    alice = _impersonating(k8s_cluster.kubeconfig, "alice", secured["group_a"])
    other = secured["team_b"]
    for verb, resource in (("list", "pods"), ("get", "pods"), ("create", "pods"), ("delete", "pods"),
                           ("get", "secrets"), ("list", "secrets"), ("get", "resourcequotas"),
                           ("patch", "resourcequotas"), ("create", "pods/exec")):
        if "/" in resource:
            resource, sub = resource.split("/")
        else:
            sub = None
        assert not _can(alice, verb, resource, other, subresource=sub), (verb, resource, other)
    core = client.CoreV1Api(alice)
    msg = _forbidden(core.list_namespaced_pod, other)
    assert msg == 'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "%s"' % other
    msg = _forbidden(core.read_namespaced_secret, "b-secret", other)
    assert msg == ('secrets "b-secret" is forbidden: User "alice" cannot get resource "secrets" in API group "" '
                   'in the namespace "%s"' % other)
    _forbidden(core.read_namespaced_resource_quota, "gpu-quota", other)
    _forbidden(core.patch_namespaced_resource_quota, "gpu-quota", other, {"spec": {"hard": {"requests.nvidia.com/gpu": "0"}}})
    _forbidden(core.create_namespaced_pod, other, pod_manifest("intruder"))


def test_tenant_cannot_change_its_quota_pod_security_or_priority_classes(secured, k8s_cluster):
    alice = _impersonating(k8s_cluster.kubeconfig, "alice", secured["group_a"])
    ns = secured["team_a"]
    for verb in ("update", "patch", "delete", "create"):
        assert not _can(alice, verb, "resourcequotas", ns), verb
        assert not _can(alice, verb, "priorityclasses", group="scheduling.k8s.io"), verb
    assert not _can(alice, "patch", "namespaces", name=ns)
    assert not _can(alice, "create", "limitranges", ns) and not _can(alice, "delete", "limitranges", ns)
    core = client.CoreV1Api(alice)
    msg = _forbidden(core.patch_namespaced_resource_quota, "gpu-quota", ns,
                     {"spec": {"hard": {"requests.nvidia.com/gpu": "100"}}})
    assert msg == ('resourcequotas "gpu-quota" is forbidden: User "alice" cannot patch resource "resourcequotas" '
                   'in API group "" in the namespace "%s"' % ns)
    _forbidden(core.delete_namespaced_resource_quota, "gpu-quota", ns)
    _forbidden(core.patch_namespace, ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    sched = client.SchedulingV1Api(alice)
    _forbidden(sched.patch_priority_class, "gpu-low", {"value": 2000000})
    msg = _forbidden(sched.create_priority_class, {"metadata": {"name": "tenant-top"}, "value": 999999999})
    assert msg == ('priorityclasses.scheduling.k8s.io is forbidden: User "alice" cannot create resource '
                   '"priorityclasses" in API group "scheduling.k8s.io" at the cluster scope')
    # the quota is unchanged
    hard = k8s_cluster.core.read_namespaced_resource_quota("gpu-quota", ns).spec.hard
    assert hard == {"requests.nvidia.com/gpu": "2", "pods": "10"}


def test_privileged_pod_in_a_tenant_namespace_is_refused(secured, k8s_cluster):
    alice = client.CoreV1Api(_impersonating(k8s_cluster.kubeconfig, "alice", secured["group_a"]))
    ns = secured["team_a"]
    pod = pod_manifest("priv")
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    msg = _forbidden(alice.create_namespaced_pod, ns, pod)
    assert msg == ('pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged '
                   '(container "main" must not set securityContext.privileged=true)')
    host = pod_manifest("hostpath")
    host["spec"]["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
    host["spec"]["containers"][0]["volumeMounts"] = [{"name": "root", "mountPath": "/host"}]
    msg = _forbidden(alice.create_namespaced_pod, ns, host)
    assert msg == 'pods "hostpath" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root")'
    # not even the cluster admin gets one past admission
    _forbidden(k8s_cluster.core.create_namespaced_pod, ns, pod)
    assert not [p for p in k8s_cluster.core.list_namespaced_pod(ns).items if p.metadata.name in ("priv", "hostpath")]


# -------------------------------------------------------------------------------------- health account

def test_health_account_runs_the_apply_step(secured, k8s_cluster):
    """The role's own apply step (k8s_info + kubernetes.core.k8s patched) as the health ServiceAccount."""
    sa = _token_client(secured["admin"], k8s_cluster.kubeconfig, secured["health_ns"], secured["health_sa"])
    assert _whoami(sa).username == "system:serviceaccount:%s:%s" % (secured["health_ns"], secured["health_sa"])
    conf = sa.configuration
    kubeconfig = secured["tmp"] / "health.kubeconfig"
    with open(conf.ssl_ca_cert) as f:
        ca = f.read()
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "health",
        "clusters": [{"name": "c", "cluster": {"server": conf.host,
                                               "certificate-authority-data": base64.b64encode(ca.encode()).decode()}}],
        "users": [{"name": "health", "user": {"token": conf.api_key["authorization"].split(" ", 1)[1]}}],
        "contexts": [{"name": "health", "context": {"cluster": "c", "user": "health"}}]}))
    _playbook(HEALTH_PLAYBOOK, {"node": secured["node"], "gpu_health_node_selector": "e2e-sec=" + secured["u"]},
              str(kubeconfig), secured["tmp"])
    node = k8s_cluster.core.read_node(secured["node"])
    assert node.spec.unschedulable is True
    assert {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"} in \
        [dict(key=t.key, value=t.value, effect=t.effect) for t in node.spec.taints or []]
    assert node.metadata.annotations["gpuops.k8s/health.reason"] == "GPU 0: volatile uncorrected ECC errors 25 > 10"


def test_health_account_can_do_nothing_else(secured, k8s_cluster):
    sa = _token_client(secured["admin"], k8s_cluster.kubeconfig, secured["health_ns"], secured["health_sa"])
    for verb in ("get", "list", "patch"):
        assert _can(sa, verb, "nodes"), verb
    denied = [("delete", "nodes", None, None), ("update", "nodes", None, None), ("create", "nodes", None, None),
              ("watch", "nodes", None, None), ("patch", "nodes", None, "status"), ("list", "pods", None, None),
              ("create", "pods", None, "eviction"), ("delete", "pods", "default", None), ("get", "secrets", "default", None),
              ("list", "secrets", None, None), ("get", "configmaps", secured["health_ns"], None),
              ("patch", "namespaces", None, None), ("create", "pods", secured["health_ns"], None)]
    for verb, resource, ns, sub in denied:
        assert not _can(sa, verb, resource, ns, subresource=sub), (verb, resource, ns, sub)
    assert not _can(sa, "patch", "priorityclasses", group="scheduling.k8s.io")
    assert not _can(sa, "create", "clusterrolebindings", group="rbac.authorization.k8s.io")
    core = client.CoreV1Api(sa)
    msg = _forbidden(core.delete_node, secured["node"])
    assert msg == ('nodes "%s" is forbidden: User "system:serviceaccount:%s:%s" cannot delete resource "nodes" in API '
                   'group "" at the cluster scope' % (secured["node"], secured["health_ns"], secured["health_sa"]))
    _forbidden(core.list_pod_for_all_namespaces)
    _forbidden(core.list_namespaced_secret, secured["team_b"])
    _forbidden(core.patch_node_status, secured["node"], {"status": {"capacity": {"nvidia.com/gpu": "9"}}})
    # and what it may do works: patch a node's annotation
    core.patch_node(secured["node"], {"metadata": {"annotations": {"e2e-sec/touched": "yes"}}})
    assert k8s_cluster.core.read_node(secured["node"]).metadata.annotations["e2e-sec/touched"] == "yes"


# ---------------------------------------------------------------------------- device plugin and exporter

def _bindings_of(rbac, namespace, service_account):
    subject = ("ServiceAccount", namespace, service_account)

    def bound(b):
        return any((s.kind, s.namespace, s.name) == subject for s in b.subjects or [])

    cluster = [b for b in rbac.list_cluster_role_binding().items if bound(b)]
    local = [b for b in rbac.list_role_binding_for_all_namespaces().items if bound(b)]
    return cluster, local


def _rules(role):
    return [dict((k, v) for k, v in (("apiGroups", r.api_groups), ("resources", r.resources), ("verbs", r.verbs))
                 ) for r in role.rules]


def test_device_plugin_account_has_nvidias_rights_only(secured, k8s_cluster):
    admin = secured["admin"]
    rbac = client.RbacAuthorizationV1Api(admin)
    ns, name = secured["dp_ns"], secured["dp_name"]
    sa_name = [sa.metadata.name for sa in client.CoreV1Api(admin).list_namespaced_service_account(ns).items
               if sa.metadata.name != "default"]
    assert len(sa_name) == 1, sa_name
    cluster, local = _bindings_of(rbac, ns, sa_name[0])
    assert [b.role_ref.name for b in cluster] == [name] and local == []
    assert _rules(rbac.read_cluster_role(name)) == NVIDIA_DEVICE_PLUGIN_RULES
    sa = _token_client(admin, k8s_cluster.kubeconfig, ns, sa_name[0])
    assert _can(sa, "watch", "nodes") and _can(sa, "get", "pods", "default")
    assert _can(sa, "create", "nodefeatures", ns, group="nfd.k8s-sigs.io")
    for verb, resource, rns in (("patch", "nodes", None), ("list", "pods", None), ("get", "secrets", ns),
                                ("list", "configmaps", ns), ("delete", "nodefeatures", ns)):
        group = "nfd.k8s-sigs.io" if resource == "nodefeatures" else ""
        assert not _can(sa, verb, resource, rns, group=group), (verb, resource)
    core = client.CoreV1Api(sa)
    _forbidden(core.patch_node, secured["node"], {"metadata": {"labels": {"e2e-sec/dp": "x"}}})
    _forbidden(core.list_namespaced_secret, ns)
    assert core.read_node(secured["node"]).metadata.name == secured["node"]


def test_device_plugin_pods_are_no_more_privileged_than_nvidias(secured, k8s_cluster):
    apps = client.AppsV1Api(secured["admin"])
    ns, name = secured["dp_ns"], secured["dp_name"]
    kinds = {name: "device-plugin", name + "-gpu-feature-discovery": "gpu-feature-discovery",
             name + "-mps-control-daemon": "mps-control-daemon"}
    seen = set()
    for ds in apps.list_namespaced_daemon_set(ns).items:
        kind = kinds[ds.metadata.name]
        seen.add(kind)
        pod = ds.spec.template.spec
        assert not pod.host_network and not pod.host_ipc
        assert bool(pod.host_pid) == (kind == "mps-control-daemon"), (kind, pod.host_pid)
        paths = set(v.host_path.path for v in pod.volumes or [] if v.host_path)
        assert paths <= NVIDIA_HOST_PATHS[kind], (kind, paths - NVIDIA_HOST_PATHS[kind])
        for c in (pod.init_containers or []) + pod.containers:
            sc = c.security_context
            if c.name in NVIDIA_PRIVILEGED_CONTAINERS:
                assert sc.privileged is True and not (sc.capabilities and sc.capabilities.add), (kind, c.name)
                continue
            assert not sc.privileged, (kind, c.name)
            assert sc.allow_privilege_escalation is False, (kind, c.name)
            assert sc.capabilities.drop == ["ALL"] and not sc.capabilities.add, (kind, c.name, sc.capabilities)
    assert seen == set(kinds.values())


def test_dcgm_exporter_has_no_api_rights_and_nvidias_security_context(secured, k8s_cluster):
    admin = secured["admin"]
    ns, name = secured["dcgm_ns"], secured["dcgm_name"]
    core = client.CoreV1Api(admin)
    sa = core.read_namespaced_service_account(name, ns)
    assert sa.automount_service_account_token is False
    cluster, local = _bindings_of(client.RbacAuthorizationV1Api(admin), ns, name)
    assert cluster == [] and local == []
    ds = client.AppsV1Api(admin).read_namespaced_daemon_set(name, ns)
    pod = ds.spec.template.spec
    assert pod.service_account_name == name and pod.automount_service_account_token is False
    assert not pod.host_network and not pod.host_pid and not pod.host_ipc
    assert [v.host_path.path for v in pod.volumes if v.host_path] == ["/var/lib/kubelet/pod-resources"]
    [c] = pod.containers
    assert admin.sanitize_for_serialization(c.security_context) == NVIDIA_DCGM_SECURITY_CONTEXT
    token = _token_client(admin, k8s_cluster.kubeconfig, ns, name)
    for verb, resource, rns in (("list", "pods", None), ("get", "configmaps", ns), ("get", "secrets", ns),
                                ("get", "nodes", None)):
        assert not _can(token, verb, resource, rns), (verb, resource)
    _forbidden(client.CoreV1Api(token).list_pod_for_all_namespaces)
