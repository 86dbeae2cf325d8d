"""gpu_whatif's kube-default model against the real kube-scheduler (validation 2 of docs/whatif.md).

A 200-node sample of the Alibaba 2023 trace becomes kwok nodes with the trace's capacities (cpu,
memory, nvidia.com/gpu); the trace's pods, in the replay's arrival order with their GPU requests
rounded up to whole GPUs (``sharing: exclusive``), are created one after another and bound by the
local kube-scheduler (v1.37.2, default profile). The number of pods it binds must be the number the
engine predicts for ``scoring: kube-default`` within 1 %. Both break ties at random, so placements
are not compared, and the prediction is the engine's mean over 10 draws of its tie-breaking (same
arrivals); their range is printed too.

The trace is read in place: ``$GPUOPS_TRACE_DIR`` or ``shared/data/alibaba-gpu-2023/csv`` in a
parent directory of the checkout; the test fails (it does not skip) when it is missing.
"""
import os
import time

import pytest

from lib.cluster import TOP
from lib.wait import pod_manifest

from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import runner

SAMPLE_NODES = 200
SEED = 7
PODS_PER_NODE = 110


def trace_dir():
    env = os.environ.get("GPUOPS_TRACE_DIR")
    if env:
        return env
    here = TOP
    for dummy in range(4):
        cand = os.path.join(here, "shared", "data", "alibaba-gpu-2023", "csv")
        if os.path.isdir(cand):
            return cand
        here = os.path.dirname(here)
    return None


def kube_nodes_to_find(n):
    """kube-scheduler's numFeasibleNodesToFind with the default (adaptive) percentageOfNodesToScore."""
    if n < 100:
        return n
    return max(100, n * max(50 - n // 125, 5) // 100)


def _settled(core, ns, names):
    """(bound, unschedulable, pending) among ``names``."""
    bound, unsched = set(), set()
    cont = None
    while True:
        page = core.list_namespaced_pod(ns, limit=500, _continue=cont)
        for p in page.items:
            if p.spec.node_name:
                bound.add(p.metadata.name)
                continue
            for c in p.status.conditions or []:
                if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                    unsched.add(p.metadata.name)
        cont = page.metadata._continue
        if not cont:
            break
    return bound, unsched, set(names) - bound - unsched


def test_kube_default_predicts_the_real_scheduler(k8s_cluster, kwok_nodes, namespace, unique):
    csv_dir = trace_dir()
    if not csv_dir:
        pytest.fail("the Alibaba 2023 trace is needed (set GPUOPS_TRACE_DIR to its csv/ directory)", pytrace=False)
    params = {"nodes_csv": os.path.join(csv_dir, "openb_node_list_gpu_node.csv"),
              "pods_csv": os.path.join(csv_dir, "openb_pod_list_default.csv"),
              "scoring": "kube-default", "sharing": "exclusive", "inflation": 1.0, "seed": SEED,
              "sample_nodes": SAMPLE_NODES, "pods_per_node": PODS_PER_NODE}
    # other nodes of a reused cluster count in the scheduler's node sampling: score as many nodes as it will
    others = len(k8s_cluster.core.list_node().items)
    want = kube_nodes_to_find(SAMPLE_NODES + others)
    if want != kube_nodes_to_find(SAMPLE_NODES):
        params["percentage_of_nodes_to_score"] = -(-want * 100 // SAMPLE_NODES)
    t0 = time.time()
    model = runner.replay_one(params, tie_seeds=range(10))
    t_model = time.time()
    counts = model["placed_counts"]
    predicted = sum(counts) / float(len(counts))
    arrivals = model["arrivals"]
    assert 0 < predicted < len(arrivals)  # the sample is oversubscribed: the comparison means something

    core = k8s_cluster.core
    sel = {"gpuops.k8s/whatif-e2e": unique}
    for n in model["nodes"]:
        res = {"cpu": "%dm" % n.cpu_milli, "memory": "%dMi" % n.memory_mib, "pods": str(PODS_PER_NODE),
               "nvidia.com/gpu": str(n.gpus)}
        kwok_nodes("wi-%s-%s" % (unique, n.name.rsplit("-", 1)[-1]), labels=sel, resources=res)
    t_nodes = time.time()

    names = []
    for i, p in enumerate(arrivals):
        req = {}
        if p.cpu_milli:
            req["cpu"] = "%dm" % p.cpu_milli
        if p.memory_mib:
            req["memory"] = "%dMi" % p.memory_mib
        if p.num_gpu:
            req["nvidia.com/gpu"] = p.num_gpu  # gpu_milli rounded up: whole GPUs
        name = "p%05d" % i
        names.append(name)
        core.create_namespaced_pod(namespace, pod_manifest(name, req, node_selector=sel))
    t_pods = time.time()

    deadline = time.time() + 240
    last = None
    while True:
        bound, unsched, pending = _settled(core, namespace, names)
        state = (len(bound), len(unsched), len(pending))
        if not pending and state == last:
            break
        if time.time() > deadline:
            pytest.fail("scheduler did not settle in 240 s: %d bound, %d unschedulable, %d pending" % state)
        last = state if not pending else None
        time.sleep(3)
    real = len(bound)
    print("\nwhatif e2e: %d kwok nodes (%d GPUs; %d other nodes in the cluster), %d pods in order; kube-scheduler bound %d, gpu_whatif kube-default "
          "predicted %.1f (10 tie draws: %d..%d) (diff %+.1f, %+.2f %%); model %.1f s, nodes %.1f s, pods %.1f s, "
          "settled %.1f s"
          % (len(model["nodes"]), model["cluster"].total_gpus, others, len(arrivals), real, predicted, min(counts), max(counts),
             real - predicted, 100.0 * (real - predicted) / predicted, t_model - t0, t_nodes - t_model,
             t_pods - t_nodes, time.time() - t_pods))
    assert abs(real - predicted) <= 0.01 * predicted, (real, predicted)
    # and it is not trivially so: the exclusive replay of this sample leaves pods unscheduled
    assert len(unsched) > 0.05 * len(arrivals)
