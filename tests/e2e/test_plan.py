"""The fleet plan applied to a real control plane: playbooks/plan.yml with plan_apply sets the plan's tenant quotas
through gpu_tenancy; the API server holds exactly the plan's requests.* keys and enforces them (an over-quota pod is
refused); a second run changes nothing; check mode after a demand change says what would change and changes nothing.
Names carry a unique suffix, so a reused cluster (make cluster-up) is not disturbed.
"""
import os
import sys
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from lib import gpu_nodes, playbook

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SITE_1G = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]


def run_plan(kubeconfig, tmp_path, variables, check=False):
    return playbook.run(os.path.join(TOP, "playbooks", "plan.yml"), kubeconfig=kubeconfig, cwd=tmp_path, check=check,
                        diff=check, extra_vars=dict(variables, ansible_python_interpreter=sys.executable))


def plan_of(run):
    return run.result("Plan")["plan"]


@pytest.fixture(scope="module")
def fleet(k8s_cluster, tmp_path_factory):
    u = uuid.uuid4().hex[:6]
    core = k8s_cluster.core
    names = {"a100": "e2e-plan-a100-" + u, "l40s": "e2e-plan-l40s-" + u,
             "search": "e2e-plan-search-" + u, "chat": "e2e-plan-chat-" + u}
    gpu_nodes.ensure_node(core, names["a100"], gpus=[{"model": "a100_80gb", "count": 2}], mig_strategy="mixed",
                          mig_config={"1g.10gb": 7})
    gpu_nodes.ensure_node(core, names["l40s"], gpus=[{"model": "l40s_48gb", "count": 2}])
    sched = client.SchedulingV1Api(k8s_cluster.api_client())
    existing_pcs = set(pc.metadata.name for pc in sched.list_priority_class().items)
    names["tmp"] = tmp_path_factory.mktemp("plan")
    # the site's mig-parted file and a previous plan's file: the plan's file keeps their configs (rollback names)
    (names["tmp"] / "site-mig-config.yaml").write_text(yaml.safe_dump({"version": "v1", "mig-configs": {
        "all-1g.10gb": SITE_1G, "site-only": [{"devices": "all", "mig-enabled": False}]}}))
    (names["tmp"] / "out").mkdir()
    (names["tmp"] / "out" / "mig-config.yaml").write_text(yaml.safe_dump({"version": "v1", "mig-configs": {
        "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 1}}],
        "older-plan": [{"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}}))
    yield names
    for ns in (names["search"], names["chat"]):
        try:
            core.delete_namespace(ns)
        except ApiException:
            pass
    for node in (names["a100"], names["l40s"]):
        gpu_nodes.delete_node(core, node)
    gpu_nodes.delete_priority_classes(sched, keep=existing_pcs)


def variables(names, chat_replicas=3):
    return {
        "plan_nodes": [
            {"name": names["a100"], "gpus": [{"model": "NVIDIA A100-SXM4-80GB", "count": 2}], "current": "all-1g.10gb"},
            {"name": names["l40s"], "gpus": [{"model": "NVIDIA L40S", "count": 2}]}],
        "plan_demand": [
            {"tenant": names["search"], "name": "embedder", "replicas": 10, "memory_gb": 9, "kind": "inference",
             "isolation": "strict"},
            {"tenant": names["chat"], "name": "llm", "replicas": chat_replicas, "memory_gb": 20, "kind": "inference",
             "isolation": "shared"}],
        "plan_apply": True, "plan_apply_mig": False, "plan_apply_device_plugin": False,
        "plan_output_dir": str(names["tmp"] / "out"),
        "plan_site_mig_config_file": str(names["tmp"] / "site-mig-config.yaml"),
    }


def test_plan_quotas_on_the_api_server(k8s_cluster, fleet):
    core = k8s_cluster.core
    first = run_plan(k8s_cluster.kubeconfig, fleet["tmp"], variables(fleet))
    plan = plan_of(first)
    assert plan["summary"]["replicas_unplaced"] == 0
    assert plan["quotas"][fleet["search"]] == {"hard": {"requests.nvidia.com/mig-1g.10gb": 10}}
    assert sum(plan["quotas"][fleet["chat"]]["hard"].values()) == 3
    assert all(k.startswith("requests.nvidia.com/") for q in plan["quotas"].values() for k in q["hard"])
    for tenant, quota in plan["quotas"].items():
        rq = core.read_namespaced_resource_quota("gpu-quota", tenant)
        assert dict((k, str(v)) for k, v in rq.spec.hard.items()) == dict(
            (k, str(v)) for k, v in quota["hard"].items())
    # the quota is enforced: 10 slices are granted, an 11th is refused by the API server
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="over"), spec=client.V1PodSpec(containers=[
        client.V1Container(name="c", image="busybox", resources=client.V1ResourceRequirements(
            requests={"nvidia.com/mig-1g.10gb": "11"}, limits={"nvidia.com/mig-1g.10gb": "11"}))]))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(fleet["search"], pod)
    assert e.value.status == 403 and "exceeded quota" in e.value.body

    # the plan's mig-parted file holds the plan's configs, the site's (winning over the previous plan's) and the
    # previous plan's: mig_reconfigure can roll a node back to the site's all-1g.10gb
    written = yaml.safe_load((fleet["tmp"] / "out" / "mig-config.yaml").read_text())["mig-configs"]
    for name, config in plan["mig_parted_config"]["mig-configs"].items():
        assert written[name] == config
    if "all-1g.10gb" not in plan["mig_parted_config"]["mig-configs"]:
        assert written["all-1g.10gb"] == SITE_1G
    assert "site-only" in written and "older-plan" in written, sorted(written)

    second = run_plan(k8s_cluster.kubeconfig, fleet["tmp"], variables(fleet))
    assert second.changed() == []

    check = run_plan(k8s_cluster.kubeconfig, fleet["tmp"], variables(fleet, chat_replicas=5), check=True)
    assert sum(plan_of(check)["quotas"][fleet["chat"]]["hard"].values()) == 5
    assert check.changed()
    rq = core.read_namespaced_resource_quota("gpu-quota", fleet["chat"])
    assert dict((k, str(v)) for k, v in rq.spec.hard.items()) == dict(
        (k, str(v)) for k, v in plan["quotas"][fleet["chat"]]["hard"].items())
