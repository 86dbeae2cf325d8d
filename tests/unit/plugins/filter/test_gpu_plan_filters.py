# -*- coding: utf-8 -*-
"""Filters gpu_plan_nodes and gpu_plan_tenants."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.filter.gpu_plan_nodes import gpu_plan_nodes
from ansible_collections.gpuops.k8s.plugins.filter.gpu_plan_tenants import gpu_plan_tenants


def test_nodes_from_inventory_hostvars_list_and_facts():
    hv = [{"inventory_hostname": "n1", "gpuops_k8s_node_name": "n1", "gpu_product": "NVIDIA-H100-80GB-HBM3",
           "gpu_count": 4, "mig_config": "all-1g.10gb"},
          {"inventory_hostname": "cpu", "gpuops_k8s_node_name": "cpu", "gpu_product": None, "gpu_count": 0}]
    assert gpu_plan_nodes(hv) == [{"name": "n1", "gpus": [{"model": "NVIDIA H100 80GB HBM3", "count": 4}],
                                   "current": "all-1g.10gb"}]
    facts = {"h": {"gpus": [{"index": 0, "model": "l40s_48gb", "mig_capable": False}]}}
    assert gpu_plan_nodes(facts) == [{"name": "h", "gpus": [{"model": "l40s_48gb", "count": 1}]}]
    off = {"index": 0, "model": "h100_80gb", "mig_capable": True, "mig_mode_current": False}
    on = dict(off, index=1, mig_mode_current=True, instances=[{"gpu_instance_id": 1, "profile": "7g.80gb"}])
    assert gpu_plan_nodes({"h": {"gpus": [off, dict(off, index=1)]}})[0]["current"] == "all-disabled"
    assert gpu_plan_nodes({"h": {"gpus": [off, on]}})[0]["current"] == ["all-disabled", {"7g.80gb": 1}]
    with pytest.raises(AnsibleFilterError, match="gpu_plan_nodes needs a mapping"):
        gpu_plan_nodes("n1")


def test_tenants_from_a_plan():
    plan = {"plan": {"quotas": {"a": {"hard": {"requests.nvidia.com/mig-1g.10gb": 3}}}}}
    assert gpu_plan_tenants(plan) == [{"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 3}}}]
