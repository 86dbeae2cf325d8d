"""The closed loop on the real control plane with simulated hosts (docs/closed-loop.md): playbooks/replan.yml.

Two simulated hosts with one A100 80GB each, at all-1g.10gb, and their kwok nodes; the simulated device plugin
(tests/e2e/lib/sim_device_plugin.py) advertises what each host's GPUs really hold. A model server (1 pod in a
1g.10gb slice of node 1, PodDisruptionBudget minAvailable 1; its tenant declares 7 replicas) runs throughout.

1. A tenant's two pods go pending for nvidia.com/mig-3g.40gb, which no node offers. replan.yml (replan_apply, budget
   1 GPU) finds them, re-plans, rolls node 2 only, and the pods bind; the model server's pod (same uid) kept running
   and node 1's GPU still holds its seven 1g.10gb instances (the simulator's NVML state, not only a label).
2. The same run again finds nothing pending and rolls nothing (the running pods are demand now).
3. A plan that would change the model server's node is not rolled: the guard leaves it for the next round, naming
   the PodDisruptionBudget, and the run (apply mode) holds it: its GPU keeps its seven 1g.10gb instances, its
   nvidia.com/mig.config label stays, the model server's pod keeps running (same uid).
4. The EDA source on the API server: two pods pending for a GPU resource make one event; a GPU pod pending only
   for CPU (Unschedulable with Insufficient cpu) is left out.
"""
import sys
import time
import uuid

import pytest
import yaml
from kubernetes import client

from lib import gpu_nodes, playbook
from lib.sim_device_plugin import SimDevicePlugin, read_facts
from lib.wait import wait_for

TOP = gpu_nodes.TOP
MIG_CONFIG = {"version": "v1", "mig-configs": {
    "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}
SLICE_3G = "nvidia.com/mig-3g.40gb"
SLICE_1G = "nvidia.com/mig-1g.10gb"
TOLERATE = [gpu_nodes.KWOK_TOLERATION]


@pytest.fixture(scope="module")
def loop(k8s_cluster, tmp_path_factory):
    u = uuid.uuid4().hex[:5]
    work = tmp_path_factory.mktemp("replan")
    (work / "files").mkdir()
    (work / "files" / "mig-config.yaml").write_text(yaml.safe_dump(MIG_CONFIG))
    names = ["replan-%s-%d" % (u, i) for i in (1, 2)]
    sims = dict((n, str(work / ("%s.json" % n))) for n in names)
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "children": {"gpu_nodes": {"hosts": dict(
            (n, {"gpuops_simulator": sims[n], "gpuops_sim_gpus": [{"model": "a100_80gb", "count": 1}],
                 "gpuops_k8s_node_name": n, "gpu_product": "NVIDIA-A100-SXM4-80GB", "gpu_count": 1,
                 "mig_persist": False}) for n in names)}}}}
    inv = work / "hosts.yml"
    inv.write_text(yaml.safe_dump(inventory))
    gpu_nodes.sim_hosts_at_all_1g(work, "gpu_nodes", inv, k8s_cluster.kubeconfig)
    api = k8s_cluster.core
    for n in names:
        gpu_nodes.ensure_node(api, n, gpus=[{"model": "a100_80gb", "count": 1}], mig_strategy="mixed",
                              mig_config={"1g.10gb": 7},
                              labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success",
                                      "e2e-replan": u})
    plugin = SimDevicePlugin(api, dict((n, {"simulator": sims[n], "mig_strategy": "mixed"}) for n in names))
    plugin.start()
    serve, team = "serve-" + u, "team-" + u
    for ns in (serve, team):
        api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    apps = client.AppsV1Api(k8s_cluster.api_client())
    policy = client.PolicyV1Api(k8s_cluster.api_client())
    apps.create_namespaced_deployment(serve, gpu_nodes.gpu_deployment("model", 1, SLICE_1G, {"kubernetes.io/hostname": names[0]}))
    policy.create_namespaced_pod_disruption_budget(serve, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "model"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "model"}}}})

    def model_running():
        pods = [p for p in api.list_namespaced_pod(serve).items if p.status.phase == "Running"]
        return pods[0] if len(pods) == 1 else None

    model = wait_for(model_running, 120, what="the model server running on node 1")
    (work / "out").mkdir()
    variables = {
        "replan_apply": True, "replan_disruption_budget": 1, "replan_namespaces": [serve, team],
        "replan_output_dir": str(work / "out"), "replan_apply_device_plugin": False, "replan_solver": "heuristic",
        "replan_demand": [{"tenant": serve, "name": "model", "replicas": 7, "memory_gb": 9, "kind": "inference",
                           "isolation": "strict"}],
        "ansible_python_interpreter": sys.executable}
    yield {"u": u, "names": names, "sims": sims, "inventory": str(inv), "api": api, "serve": serve, "team": team,
           "model_uid": model.metadata.uid, "apps": apps, "work": work, "variables": variables,
           "kubeconfig": k8s_cluster.kubeconfig}
    plugin.stop.set()
    for ns in (serve, team):
        api.delete_namespace(ns)
    for n in names:
        gpu_nodes.delete_node(api, n)


def _replan(loop, check=False, **more):
    return playbook.run(TOP + "/playbooks/replan.yml", inventory=loop["inventory"], kubeconfig=loop["kubeconfig"],
                        extra_vars=dict(loop["variables"], **more), check=check, diff=check, timeout=600,
                        cwd=loop["work"])


def _profiles(loop, node):
    return [sorted(i["profile"] for i in g["instances"]) for g in read_facts(loop["sims"][node])["gpus"]]


def _model_pod(loop):
    pods = [p for p in loop["api"].list_namespaced_pod(loop["serve"]).items if p.metadata.deletion_timestamp is None]
    return [(p.metadata.uid, p.status.phase, p.spec.node_name) for p in pods]


def test_pending_pods_make_one_node_roll_and_bind_while_the_model_server_keeps_running(loop):
    api, team = loop["api"], loop["team"]
    loop["apps"].create_namespaced_deployment(team, gpu_nodes.gpu_deployment("llm", 2, SLICE_3G, {"e2e-replan": loop["u"]}))

    def unschedulable():
        pods = api.list_namespaced_pod(team).items
        marked = [p for p in pods if any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                                         for c in p.status.conditions or [])]
        return len(marked) == 2 or None

    wait_for(unschedulable, 60, what="the two llm pods marked Unschedulable for %s" % SLICE_3G)
    t0 = time.time()
    run = _replan(loop)
    seconds = time.time() - t0
    pend = run.result("Add the GPU pods the scheduler cannot place to the demand")["ansible_facts"]["replan_pending"]
    assert sorted(p["name"][:4] for p in pend["pending"]) == ["llm-", "llm-"], pend
    assert pend["resources"][SLICE_3G]["why"] == "no schedulable node offers %s" % SLICE_3G
    plan = run.result("Re-plan with the current layouts and the disruption budget")["plan"]
    assert plan["summary"]["reconfigured_gpus"] <= 1 and not plan["unplaced"], plan["summary"]
    guard = run.result("Decide which changed nodes roll this round")["ansible_facts"]["replan_guard"]
    assert guard["roll"] == [loop["names"][1]] and guard["deferred"] == [], guard
    assert sorted(_profiles(loop, loop["names"][1])[0]) == ["3g.40gb", "3g.40gb"], _profiles(loop, loop["names"][1])
    assert _profiles(loop, loop["names"][0]) == [["1g.10gb"] * 7]

    def bound():
        pods = api.list_namespaced_pod(team).items
        return sorted(p.spec.node_name for p in pods if p.status.phase == "Running") == [loop["names"][1]] * 2 or None

    wait_for(bound, 90, what="both llm pods running on node 2")
    assert _model_pod(loop) == [(loop["model_uid"], "Running", loop["names"][0])]
    quota = api.read_namespaced_resource_quota("gpu-quota", team).spec.hard
    assert quota == {"requests." + SLICE_3G: "2"}, quota
    print("replan e2e: %.0f s for the round; plan %s; node 2 -> %s" % (
        seconds, plan["summary"]["slice_diagram"].splitlines()[:4], _profiles(loop, loop["names"][1])))

    again = _replan(loop)
    pend = again.result("Add the GPU pods the scheduler cannot place to the demand")["ansible_facts"]["replan_pending"]
    assert pend["pending"] == []
    guard = again.result("Decide which changed nodes roll this round")["ansible_facts"]["replan_guard"]
    assert guard["changed"] == {}, guard
    assert [n for n in again.changed() if "MIG layouts" in n] == []
    assert _model_pod(loop) == [(loop["model_uid"], "Running", loop["names"][0])]


def test_a_node_whose_drain_a_pdb_blocks_is_left_for_the_next_round(loop):
    """Declared demand that needs node 1's GPU changed (a third llm replica: node 2's two 3g.40gb are taken, so node 1
    must hold a 3g.40gb beside the model server's 1g.10gb): the plan names node 1, the guard defers it because of the
    model server's budget, and the run - in apply mode, so mig_reconfigure really runs for the nodes it is given -
    holds node 1: its GPU (the simulator's NVML state), its mig.config label and the model server's pod stay."""
    demand = loop["variables"]["replan_demand"] + [
        {"tenant": loop["team"], "name": "llm", "replicas": 3, "memory_gb": 40, "compute": 0.4285,
         "kind": "inference", "isolation": "strict"}]
    demand[0] = dict(demand[0], replicas=1)
    run = _replan(loop, replan_demand=demand, replan_disruption_budget=2)
    guard = run.result("Decide which changed nodes roll this round")["ansible_facts"]["replan_guard"]
    assert loop["names"][0] in guard["changed"], guard
    deferred = dict((d["node"], d["reason"]) for d in guard["deferred"])
    assert "PodDisruptionBudget %s/model allows 0 disruption(s)" % loop["serve"] in deferred[loop["names"][0]], deferred
    assert loop["names"][0] not in guard["roll"]
    assert _profiles(loop, loop["names"][0]) == [["1g.10gb"] * 7]
    node1 = loop["api"].read_node(loop["names"][0])
    assert node1.metadata.labels["nvidia.com/mig.config"] == "all-1g.10gb", node1.metadata.labels
    assert not node1.spec.unschedulable  # never cordoned for a drain
    assert _model_pod(loop) == [(loop["model_uid"], "Running", loop["names"][0])]


def test_the_eda_source_sees_pending_gpu_pods_on_the_api_server(loop):
    """extensions/eda/plugins/event_source/pending_gpu_pods.py (the rulebook gpu_replan's source) on the real
    kube-apiserver: two pods pending for nvidia.com/mig-4g.40gb (no node offers it) -> one debounced event naming
    both; a GPU pod pending only for CPU (its 1g.10gb is free on node 1, which it is pinned to, but no node has the
    CPU: Unschedulable with "Insufficient cpu" and no NVIDIA resource named) -> not in the event."""
    import asyncio
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location("pending_gpu_pods", os.path.join(
        TOP, "extensions", "eda", "plugins", "event_source", "pending_gpu_pods.py"))
    src = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(src)
    api, team = loop["api"], loop["team"]
    loop["apps"].create_namespaced_deployment(team, gpu_nodes.gpu_deployment("burst", 2, "nvidia.com/mig-4g.40gb", {"e2e-replan": loop["u"]}))
    api.create_namespaced_pod(team, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cpu-hog"},
                                     "spec": {"nodeSelector": {"kubernetes.io/hostname": loop["names"][0]},
                                              "tolerations": TOLERATE,
                                              "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                              "resources": {"requests": {"cpu": "10000"},
                                                                            "limits": {SLICE_1G: "1"}}}]}})

    def cpu_hog_unschedulable():
        pod = api.read_namespaced_pod("cpu-hog", team)
        conds = [c for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.reason == "Unschedulable"]
        return conds[0].message if conds else None

    message = wait_for(cpu_hog_unschedulable, 60, what="the GPU pod cpu-hog marked Unschedulable")
    assert "Insufficient cpu" in message and "nvidia.com" not in message, message

    class Q(object):
        def __init__(self):
            self.events = []

        async def put(self, event):
            self.events.append(event)

    q = Q()

    async def run():
        task = asyncio.ensure_future(src.main(q, {"kubeconfig": loop["kubeconfig"], "namespaces": [team],
                                                  "debounce_s": 2, "max_wait_s": 20, "repeat_s": 600}))
        t0 = time.time()
        while not q.events and time.time() - t0 < 60:
            await asyncio.sleep(0.5)
        await asyncio.sleep(4)  # no second event for the same set
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    try:
        asyncio.run(run())
        assert len(q.events) == 1, q.events
        ev = q.events[0]["pending_gpu_pods"]
        assert ev["count"] == 2 and ev["resources"] == {"nvidia.com/mig-4g.40gb": 2}, ev
        assert all(p["name"].startswith("burst-") for p in ev["pods"]), ev
    finally:
        loop["apps"].delete_namespaced_deployment("burst", team)
        api.delete_namespaced_pod("cpu-hog", team)
