# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The closed loop's trigger for real: ansible-rulebook (decision environment venv, Java) runs the rulebook
gpuops.k8s.gpu_replan; its event source gpuops.k8s.pending_gpu_pods watches the local control plane, and each event
runs playbooks/replan.yml (docs/closed-loop.md) inside ansible-rulebook.

Two kwok nodes with one A100 80GB each at all-1g.10gb, known to the rulebook's inventory by their gpu_product and
gpu_count host vars (what the gpu_nodes inventory plugin sets). The re-plan runs report-only (replan_apply false):
tests/e2e/test_replan.py rolls the nodes with the same playbook; here what is proven is the trigger.

1. A Deployment's 2 pods go pending for nvidia.com/mig-3g.40gb, which no node offers -> after the debounce, one
   event and one replan.yml run, which finds the 2 pods and names the node that would roll.
2. Scaled to 3 -> the set changed: one more run, with 3 pods (the third waits: a second GPU would pass the budget);
   unchanged after that -> no third run (repeat_s 600).
"""
import time
import uuid

import pytest
import yaml
from kubernetes import client

from awxlib import rulebook as rulebook_lib
from lib import gpu_nodes
from lib.wait import wait_for

SLICE_3G = "nvidia.com/mig-3g.40gb"


@pytest.fixture(scope="module")
def loop(k8s_cluster, de, tmp_path_factory):
    u = uuid.uuid4().hex[:5]
    work = tmp_path_factory.mktemp("eda-replan")
    api = k8s_cluster.core
    names = ["eda-replan-%s-%d" % (u, i) for i in (1, 2)]
    for n in names:
        gpu_nodes.ensure_node(api, n, gpus=[{"model": "a100_80gb", "count": 1}], mig_strategy="mixed",
                              mig_config={"1g.10gb": 7},
                              labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success",
                                      "e2e-eda-replan": u})
    ns = "eda-replan-" + u
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "children": {"gpu_nodes": {"hosts": dict(
            (n, {"gpu_product": "NVIDIA-A100-SXM4-80GB", "gpu_count": 1}) for n in names)}}}}
    inv_path = str(work / "hosts.yml")
    with open(inv_path, "w") as f:
        yaml.safe_dump(inventory, f)
    (work / "out").mkdir()
    vars_path = str(work / "vars.yml")
    with open(vars_path, "w") as f:
        yaml.safe_dump({"gpuops_eda_kubeconfig": k8s_cluster.kubeconfig, "gpuops_eda_namespaces": [ns],
                        "gpuops_eda_debounce_s": 2, "gpuops_eda_repeat_s": 600, "gpuops_eda_replan_apply": False,
                        "gpuops_eda_output_dir": str(work / "out"), "gpuops_eda_disruption_budget": 1}, f)
    env = de.env(HOME=str(work), ANSIBLE_HOME=str(work / ".ansible"), KUBECONFIG=k8s_cluster.kubeconfig)
    rulebook = rulebook_lib.Rulebook(de, "gpuops.k8s.gpu_replan", inv_path, vars_path, str(work), env)
    # the source has started its watch when the rulebook says so; a pod created before is listed anyway
    time.sleep(3)
    rulebook.alive()
    apps = client.AppsV1Api(k8s_cluster.api_client())
    yield {"u": u, "names": names, "ns": ns, "api": api, "apps": apps, "rulebook": rulebook, "work": str(work)}
    rulebook.stop()
    print("\nrulebook log: %s (%d replan.yml runs)" % (rulebook.log_path, rulebook.runs()))
    api.delete_namespace(ns)
    for n in names:
        gpu_nodes.delete_node(api, n)


def _unschedulable(loop, n):
    pods = loop["api"].list_namespaced_pod(loop["ns"]).items
    marked = [p for p in pods if any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                                     for c in p.status.conditions or [])]
    return len(marked) == n or None


def test_pending_pods_trigger_one_replan_run(loop):
    rb = loop["rulebook"]
    loop["apps"].create_namespaced_deployment(loop["ns"], gpu_nodes.gpu_deployment("llm", 2, SLICE_3G, {"e2e-eda-replan": loop["u"]}))
    wait_for(lambda: _unschedulable(loop, 2), 60, what="2 pods Unschedulable for %s" % SLICE_3G)
    t0 = time.time()
    rb.wait_runs(1)
    print("replan e2e (rulebook): first run done %.1f s after the pods were marked Unschedulable" % (time.time() - t0))
    text = rb.log()
    assert "pending GPU pods: 2, ignored pending GPU pods: 0" in text, text[-4000:]
    assert "%s: no schedulable node offers %s" % (SLICE_3G, SLICE_3G) in text, text[-4000:]
    # the plan: one GPU changes (budget 1), on an idle node; report only, so nothing is handed to the roles
    assert "reconfigured GPUs 1 (budget 1)" in text, text[-4000:]
    rolling = [n for n in loop["names"] if "rolling now: %s" % n in text]
    assert len(rolling) == 1, text[-4000:]
    assert "failed=1" not in text and "fatal:" not in text, text[-4000:]
    for n in loop["names"]:
        labels = loop["api"].read_node(n).metadata.labels
        assert labels["nvidia.com/mig.config"] == "all-1g.10gb", (n, labels)


def test_a_changed_set_runs_again_an_unchanged_one_does_not(loop):
    rb = loop["rulebook"]
    loop["apps"].patch_namespaced_deployment_scale("llm", loop["ns"], {"spec": {"replicas": 3}})
    wait_for(lambda: _unschedulable(loop, 3), 60, what="3 pods Unschedulable")
    rb.wait_runs(2)
    text = rb.log()
    second = text[text.index("PLAY RECAP"):]
    assert "pending GPU pods: 3, ignored pending GPU pods: 0" in second, second[-4000:]
    # an A100 holds two 3g.40gb: the third pod would need a second GPU split, past the budget of 1
    assert '\\"replicas\\": 1, \\"reason\\": \\"disruption_budget 1 reached' in second, second[-4000:]
    # the same 3 pods stay pending: no event before repeat_s (600 s), so no third run
    time.sleep(8)
    assert rb.runs() == 2, rb.log()[-4000:]
