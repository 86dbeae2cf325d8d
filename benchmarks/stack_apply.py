#!/usr/bin/env python3
"""Apply and re-apply times of the whole GPU stack (device_plugin, dcgm_exporter, gpu_tenancy,
gpu_autoscaling) on a local control plane with N kwok GPU nodes (default 100).

Uses the cluster $KUBECONFIG points at when it answers (make cluster-up), else starts one with the
k8s branch harness (tests/e2e/lib/cluster.py) in .cache/stack-bench and stops it at the end.

    .venv/bin/python benchmarks/stack_apply.py [--nodes 100] [--tenants 20] [--keep]

Prints one line per run: wall seconds of ansible-playbook, changed tasks, and how long the device
plugin / GFD / DCGM DaemonSets took to report every pod ready (the role waits for that).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))

from lib import cluster as cluster_lib  # noqa: E402
from lib import gpu_nodes  # noqa: E402

MODELS = [  # (model, count, mig_strategy, mig_config, device plugin config)
    ("h100_80gb", 8, "none", None, "default"),
    ("a100_80gb", 8, "mixed", {"1g.10gb": 7}, "mig-mixed"),
    ("h200_141gb", 8, "none", None, "default"),
    ("l40s_48gb", 4, "none", None, "ts-4"),
]

PLAY = """\
- name: Whole GPU stack
  hosts: localhost
  gather_facts: false
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  roles:
    - gpuops.k8s.device_plugin
    - gpuops.k8s.dcgm_exporter
    - gpuops.k8s.gpu_tenancy
    - gpuops.k8s.gpu_autoscaling
"""


def _env(kubeconfig):
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=kubeconfig, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    cache = os.path.join(TOP, ".cache", "ansible")
    env.setdefault("ANSIBLE_HOME", cache)
    env.setdefault("ANSIBLE_LOCAL_TEMP", os.path.join(cache, "tmp-local"))
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(TOP, ".build", "collections"))
    return env


def run(kubeconfig, play, varfile):
    start = time.time()
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           play, "-e", "@" + varfile], env=_env(kubeconfig), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    wall = time.time() - start
    if proc.returncode != 0:
        sys.exit("ansible-playbook failed:\n" + proc.stdout[-4000:] + proc.stderr[-2000:])
    out = json.loads(proc.stdout)
    changed = out["stats"]["localhost"]["changed"]
    durations = {}
    for play_out in out["plays"]:
        for task in play_out["tasks"]:
            d = task["task"].get("duration") or {}
            name = task["task"]["name"]
            if d.get("start") and d.get("end"):
                durations[name] = durations.get(name, 0.0) + _secs(d["end"]) - _secs(d["start"])
    return wall, changed, durations


def _secs(stamp):
    import datetime
    return datetime.datetime.strptime(stamp.replace("Z", ""), "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--tenants", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the nodes and objects (and a started cluster)")
    args = ap.parse_args()

    local = None
    kubeconfig = os.environ.get("KUBECONFIG")
    try:
        from kubernetes import client, config
        client.VersionApi(config.new_client_from_config(kubeconfig)).get_code(_request_timeout=5)
    except Exception:
        local = cluster_lib.LocalCluster(os.path.join(TOP, ".cache", "stack-bench"), binaries=cluster_lib.bin_dir())
        t = time.time()
        local.start()
        kubeconfig = local.kubeconfig
        print("cluster: started in %.1fs (%s)" % (time.time() - t, local.api_url))
    api = gpu_nodes.core_api(kubeconfig)
    names = []
    node_configs = {}
    t = time.time()
    for i in range(args.nodes):
        model, count, strategy, mig, cfg = MODELS[i % len(MODELS)]
        name = "bench-gpu-%03d" % i
        gpu_nodes.ensure_node(api, name, gpus=[{"model": model, "count": count}], mig_strategy=strategy,
                              mig_config=mig, labels={"gpuops-bench": "1"})
        names.append(name)
        if cfg != "default":
            node_configs[name] = cfg
    print("nodes: %d kwok GPU nodes ready in %.1fs" % (len(names), time.time() - t))

    alloc = {}
    for n in api.list_node(label_selector="gpuops-bench=1").items:
        for k, v in (n.status.allocatable or {}).items():
            if k.startswith("nvidia.com/"):
                alloc[k] = alloc.get(k, 0) + int(v)
    tenants = []
    for i in range(args.tenants):
        tenants.append({"name": "bench-team-%02d" % i, "quota": {"hard": {
            "requests.nvidia.com/gpu": alloc.get("nvidia.com/gpu", 0) // (args.tenants * 2),
            "requests.nvidia.com/mig-1g.10gb": alloc.get("nvidia.com/mig-1g.10gb", 0) // (args.tenants * 2)}},
            "priority_quotas": {"gpu-critical": {"hard": {"requests.nvidia.com/gpu": 1}}},
            "groups": {"edit": ["bench-team-%02d" % i]}})
    variables = {
        "device_plugin_configs": {
            "default": {"version": "v1", "flags": {"migStrategy": "none"}},
            "mig-mixed": {"version": "v1", "flags": {"migStrategy": "mixed"}},
            "ts-4": {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu",
                                                                                 "replicas": 4}]}}},
        },
        "device_plugin_node_configs": node_configs,
        "device_plugin_wait_timeout": 600,
        "dcgm_exporter_wait_timeout": 600,
        "gpu_tenancy_tenants": tenants,
        "gpu_tenancy_capacity_policy": "warn",
        "gpu_autoscaling_hpas": [{"name": "llm", "namespace": t["name"], "target": {"name": "llm"}, "min_replicas": 1,
                                  "max_replicas": 8, "gpu_metric": {"name": "gpu_engine_active",
                                                                    "average_value": "700m"}} for t in tenants],
    }
    with tempfile.TemporaryDirectory() as tmp:
        play = os.path.join(tmp, "stack.yml")
        with open(play, "w") as f:
            f.write(PLAY)
        varfile = os.path.join(tmp, "vars.json")
        with open(varfile, "w") as f:
            json.dump(variables, f)
        print("stack: %d nodes (%d with a config label), %d tenants, %d HPAs" % (
            args.nodes, len(node_configs), len(tenants), len(tenants)))
        for label in ("apply", "re-apply", "re-apply"):
            wall, changed, durations = run(kubeconfig, play, varfile)
            slow = sorted(durations.items(), key=lambda kv: -kv[1])[:3]
            print("%-9s %6.1fs  changed=%-3d slowest: %s" % (label, wall, changed,
                                                         ", ".join("%s %.1fs" % kv for kv in slow)))
        if not args.keep:
            from kubernetes import client
            for t in tenants:
                api.delete_namespace(t["name"])
            for ns in ("nvidia-device-plugin", "gpu-monitoring", "monitoring"):
                api.delete_namespace(ns)
            for n in names:
                gpu_nodes.delete_node(api, n)
            sched = client.SchedulingV1Api(api.api_client)
            for pc in ("gpu-critical", "gpu-high", "gpu-low"):
                sched.delete_priority_class(pc)
    if local is not None and not args.keep:
        local.stop(keep_logs=True)


if __name__ == "__main__":
    main()
