"""The gpu_nodes inventory plugin: node -> host vars and groups, and a real parse with Node dicts."""
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

# expressions from an inventory source file are trusted templates (ansible-core >= 2.19)
trusted = trust_as_template

from ansible_collections.gpuops.k8s.plugins.inventory import gpu_nodes as plugin
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.inventory import node_host, safe_group


def node(name, product, config=None, sharing="none", alloc=None, unschedulable=False):
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": "8",
              "nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.sharing-strategy": sharing,
              "nvidia.com/gpu.replicas": "0", "nvidia.com/mig.strategy": "mixed"}
    if config:
        labels["nvidia.com/mig.config"] = config
        labels["nvidia.com/mig.config.state"] = "success"
    return {"metadata": {"name": name, "labels": labels}, "spec": {"unschedulable": unschedulable},
            "status": {"capacity": dict(alloc or {}, cpu="64"), "allocatable": dict(alloc or {}, cpu="64"),
                       "addresses": [{"type": "Hostname", "address": name},
                                     {"type": "InternalIP", "address": "10.0.0.%d" % len(name)}]}}


def test_node_host():
    name, hv, groups = node_host(node("dgx1", "NVIDIA-A100-SXM4-80GB", "all-1g.10gb",
                                      alloc={"nvidia.com/mig-1g.10gb": "56", "nvidia.com/gpu": "0"}))
    assert name == "dgx1"
    assert groups == ["gpu_nodes", "gpu_product_nvidia_a100_sxm4_80gb", "mig_config_all_1g_10gb",
                      "mig_strategy_mixed", "sharing_none"]
    assert hv["gpu_allocatable"] == {"nvidia.com/mig-1g.10gb": 56, "nvidia.com/gpu": 0}
    assert hv["gpu_count"] == 8 and hv["gpu_memory_mib"] == 81920
    assert hv["mig_config_state"] == "success"
    assert hv["node_address"] == "10.0.0.4"
    assert "cpu" not in hv["gpu_capacity"]


def test_cordoned_and_sharing_groups():
    _n, _hv, groups = node_host(node("l40s", "NVIDIA-L40S-SHARED", sharing="time-slicing", unschedulable=True),
                                prefix="k8s_")
    assert groups == ["k8s_gpu_nodes", "k8s_gpu_product_nvidia_l40s_shared", "k8s_mig_strategy_mixed",
                      "k8s_sharing_time_slicing", "k8s_cordoned"]
    assert safe_group("H100 NVL/94GB") == "h100_nvl_94gb"


def test_populate_with_constructed_options(tmp_path):
    inv = InventoryData()
    mod = plugin.InventoryModule()
    mod.inventory = inv
    options = {"group_prefix": "", "strict": False, "set_ansible_host": True,
               "keyed_groups": [{"key": trusted("gpu_sharing_strategy"), "prefix": "share"}],
               "groups": {"big": trusted("gpu_count >= 8")},
               "compose": {"slices": trusted("gpu_allocatable['nvidia.com/mig-1g.10gb'] | default(0)")},
               "leading_separator": True, "use_extra_vars": False}
    mod.get_option = options.get  # options as the config manager would hand them over
    mod.templar = Templar(loader=DataLoader())
    mod.populate([node("a1", "NVIDIA-A100-SXM4-80GB", "all-1g.10gb", alloc={"nvidia.com/mig-1g.10gb": "56"}),
                  node("h1", "NVIDIA-H100-80GB-HBM3", "mixed", alloc={"nvidia.com/mig-3g.40gb": "16"})])
    assert sorted(h.name for h in inv.groups["gpu_nodes"].get_hosts()) == ["a1", "h1"]
    assert [h.name for h in inv.groups["mig_config_all_1g_10gb"].get_hosts()] == ["a1"]
    assert sorted(h.name for h in inv.groups["share_none"].get_hosts()) == ["a1", "h1"]
    assert sorted(h.name for h in inv.groups["big"].get_hosts()) == ["a1", "h1"]
    assert inv.get_host("a1").vars["slices"] == 56
    assert inv.get_host("h1").vars["slices"] == 0
    assert inv.get_host("a1").vars["ansible_host"] == "10.0.0.2"


def test_verify_file(tmp_path):
    mod = plugin.InventoryModule()
    good = tmp_path / "gpu_nodes.yml"
    good.write_text("plugin: gpuops.k8s.gpu_nodes\n")
    bad = tmp_path / "hosts.yml"
    bad.write_text("all: {}\n")
    assert mod.verify_file(str(good))
    assert not mod.verify_file(str(bad))
