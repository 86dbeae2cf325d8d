"""The control plane's admission plugins and controllers do their jobs (not only that they start)."""
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from lib.wait import pod_manifest, wait_for


def test_admission_pod_security_and_priority(k8s_cluster, namespace):
    core = k8s_cluster.core
    core.patch_namespace(namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    privileged = pod_manifest("privileged")
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(namespace, privileged)
    assert err.value.status == 403 and "violates PodSecurity" in err.value.body

    core.patch_namespace(namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(namespace, pod_manifest("nopc", priority_class="does-not-exist"))
    assert err.value.status == 403 and "no PriorityClass with name does-not-exist" in err.value.body


def test_controllers_deployment_job_gc_hpa(k8s_cluster, kwok_nodes, namespace, unique):
    core = k8s_cluster.core
    api_client = k8s_cluster.api_client()
    apps, batch = client.AppsV1Api(api_client), client.BatchV1Api(api_client)
    hpa_api = client.AutoscalingV2Api(api_client)
    sel = {"e2e-run": unique}
    kwok_nodes("e2e-ctl-" + unique, gpus=[{"model": "h100_80gb", "count": 8}], labels=sel)
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"nodeSelector": sel, "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                                              "resources": {"requests": {"cpu": "100m"}}}]}}
    apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}})
    # deployment -> replicaset -> pods, Running on the kwok node
    wait_for(lambda: (apps.read_namespaced_deployment("web", namespace).status.ready_replicas or 0) == 2, 90,
             what="deployment ready")

    # job controller: kwok completes the pod, the Job is Complete
    batch.create_namespaced_job(namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "nodeSelector": sel,
                                       "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}})
    wait_for(lambda: any(c.type == "Complete" and c.status == "True"
                         for c in batch.read_namespaced_job("once", namespace).status.conditions or []), 90,
             what="job Complete")

    # horizontal-pod-autoscaler controller: it evaluates the HPA (no metrics API here, so it says so)
    hpa_api.create_namespaced_horizontal_pod_autoscaler(namespace, {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 4,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                     "type": "Utilization", "averageUtilization": 70}}}]}})
    conds = wait_for(lambda: hpa_api.read_namespaced_horizontal_pod_autoscaler("web", namespace).status.conditions,
                     60, what="HPA conditions")
    assert {c.type for c in conds} >= {"AbleToScale"}

    # garbage collector: deleting the Deployment removes its ReplicaSet and pods
    apps.delete_namespaced_deployment("web", namespace, propagation_policy="Background")
    wait_for(lambda: not apps.list_namespaced_replica_set(namespace).items, 90, what="ReplicaSet collected")
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector="app=web").items, 90,
             what="pods collected")


def test_namespace_controller_finishes_deletion(k8s_cluster, unique):
    core = k8s_cluster.core
    name = "e2e-ns-" + unique
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_namespaced_config_map(name, {"metadata": {"name": "x"}, "data": {"a": "b"}})
    core.delete_namespace(name)

    def gone():
        try:
            core.read_namespace(name)
            return False
        except ApiException as e:
            return e.status == 404

    wait_for(gone, 90, what="namespace %s deleted" % name)
    assert not [c for c in core.list_config_map_for_all_namespaces().items if c.metadata.namespace == name]
