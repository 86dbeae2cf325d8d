"""The gpuops.k8s.gpu_nodes inventory plugin against the real API server: GPU nodes become hosts,
grouped by product, MIG config, MIG strategy and sharing strategy, with GPU capacity as host vars;
nodes without GPUs stay out; cordoned nodes land in `cordoned`."""
import json
import os
import subprocess
import sys

from lib import gpu_nodes

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plain(value):
    """Values read from the cluster are marked unsafe (never templated); --list shows them wrapped."""
    if isinstance(value, dict) and set(value) == {"__ansible_unsafe"}:
        return value["__ansible_unsafe"]
    return value


def test_gpu_nodes_inventory_plugin(k8s_cluster, kwok_nodes, unique, tmp_path):
    core = k8s_cluster.core
    mark = {"e2e-inventory": unique}
    a100 = kwok_nodes("e2e-inv-a100-" + unique, gpus=[{"model": "a100_80gb", "count": 8}], mig_strategy="mixed",
                      mig_config={"1g.10gb": 7}, labels=dict(mark, **{"nvidia.com/mig.config": "all-1g.10gb"}))
    l40s = kwok_nodes("e2e-inv-l40s-" + unique, gpus=[{"model": "l40s_48gb", "count": 4}],
                      sharing={"strategy": "time-slicing", "replicas": 4}, labels=mark)
    cpu = "e2e-inv-cpu-" + unique
    gpu_nodes.plain_node(core, cpu, labels=mark)
    try:
        core.patch_node(l40s, {"spec": {"unschedulable": True}})
        source = tmp_path / "site.gpu_nodes.yml"
        source.write_text(
            "plugin: gpuops.k8s.gpu_nodes\n"
            "kubeconfig: %s\n"
            "label_selector: nvidia.com/gpu.present=true,e2e-inventory=%s\n"
            "groups:\n"
            "  big_memory: gpu_memory_mib > 50000\n" % (k8s_cluster.kubeconfig, unique))
        proc = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i", str(source), "--list"],
            cwd=TOP, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300,
            check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        inv = json.loads(proc.stdout)
    finally:
        gpu_nodes.delete_node(core, cpu)

    hostvars = inv["_meta"]["hostvars"]
    assert sorted(hostvars) == sorted([a100, l40s])          # the CPU node is not a GPU host
    assert sorted(inv["gpu_nodes"]["hosts"]) == sorted([a100, l40s])
    assert inv["gpu_product_nvidia_a100_sxm4_80gb"]["hosts"] == [a100]
    assert inv["gpu_product_nvidia_l40s_shared"]["hosts"] == [l40s]  # GFD marks time-sliced products -SHARED
    assert inv["mig_config_all_1g_10gb"]["hosts"] == [a100]
    assert inv["mig_strategy_mixed"]["hosts"] == [a100]
    assert inv["sharing_time_slicing"]["hosts"] == [l40s]
    assert inv["cordoned"]["hosts"] == [l40s]
    assert inv["big_memory"]["hosts"] == [a100]              # constructed groups work on the host vars

    assert hostvars[a100]["gpu_capacity"]["nvidia.com/mig-1g.10gb"] == 56
    assert hostvars[a100]["gpu_count"] == 8 and plain(hostvars[a100]["mig_config"]) == "all-1g.10gb"
    assert hostvars[l40s]["gpu_allocatable"]["nvidia.com/gpu"] == 16   # 4 GPUs x 4 replicas
    assert hostvars[l40s]["gpu_replicas"] == 4 and hostvars[l40s]["node_unschedulable"] is True
