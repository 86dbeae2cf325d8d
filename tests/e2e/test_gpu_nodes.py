"""The GPU node helper acts as the device plugin: a MIG or sharing change updates labels and capacity."""
from lib import gpu_nodes
from lib.wait import wait_for


def test_mig_change_updates_node_as_device_plugin_would(k8s_cluster, kwok_nodes, unique):
    core = k8s_cluster.core
    name = kwok_nodes("e2e-upd-" + unique, gpus=[{"model": "a100_80gb", "count": 2}], mig_strategy="mixed",
                      mig_config={"1g.10gb": 7})
    node = core.read_node(name)
    assert node.status.allocatable["nvidia.com/mig-1g.10gb"] == "14"
    assert node.status.allocatable["nvidia.com/gpu"] == "0"
    assert node.metadata.labels["nvidia.com/mig-1g.10gb.count"] == "14"

    # GPU 0 re-partitioned to 2 x 3g.40gb, GPU 1 back to a full GPU
    changes = gpu_nodes.ensure_node(core, name, gpus=[{"model": "a100_80gb", "count": 2}], mig_strategy="mixed",
                                    mig_config=[{"devices": [0], "mig-enabled": True,
                                                 "mig-devices": {"3g.40gb": 2}},
                                                {"devices": [1], "mig-enabled": False}])
    assert set(changes) >= {"labels", "capacity"}, changes
    node = core.read_node(name)
    cap = node.status.capacity
    assert cap["nvidia.com/mig-3g.40gb"] == "2"
    assert cap["nvidia.com/gpu"] == "1"
    assert "nvidia.com/mig-1g.10gb" not in cap
    assert "nvidia.com/mig-1g.10gb" not in node.status.allocatable
    assert "nvidia.com/mig-1g.10gb.count" not in node.metadata.labels
    assert node.metadata.labels["nvidia.com/mig-3g.40gb.count"] == "2"
    assert node.metadata.labels["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"

    # same state again: nothing to do
    assert gpu_nodes.ensure_node(core, name, gpus=[{"model": "a100_80gb", "count": 2}], mig_strategy="mixed",
                                 mig_config=[{"devices": [0], "mig-enabled": True,
                                              "mig-devices": {"3g.40gb": 2}},
                                             {"devices": [1], "mig-enabled": False}]) == {}

    # time-slicing with 4 replicas: the device plugin advertises every device 4 times
    gpu_nodes.ensure_node(core, name, gpus=[{"model": "a100_80gb", "count": 2}],
                          sharing={"strategy": "time-slicing", "replicas": 4})
    node = core.read_node(name)
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert "nvidia.com/mig-3g.40gb" not in node.status.allocatable
    assert node.metadata.labels["nvidia.com/gpu.replicas"] == "4"
    assert node.metadata.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-SHARED"

    # kwok's heartbeats keep the node Ready without touching the advertised capacity
    def ready():
        n = core.read_node(name)
        return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) and n

    assert wait_for(ready, 60).status.allocatable["nvidia.com/gpu"] == "8"


def test_fleet_from_sim_inventory():
    fleet = gpu_nodes.fleet_from_inventory(gpu_nodes.TOP + "/inventories/sim/hosts.yml")
    assert fleet["dgx-a100-01"]["gpus"] == [{"model": "a100_80gb", "count": 8}]
    assert set(fleet) >= {"dgx-a100-01", "hgx-h100-01", "hgx-h200-01", "l40s-01"}
