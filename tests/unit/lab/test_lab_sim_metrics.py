# -*- coding: utf-8 -*-
"""The lab's metric plumbing (tests/e2e/lib/sim_metrics.py): device allocation of the simulated DCGM exporter
and the scrape job a dcgm_exporter ServiceMonitor stands for."""
import os
import sys

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dcgm

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
from lib import sim_metrics  # noqa: E402

CAP = {"nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "2", "cpu": "64"}
SM = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
      "metadata": {"name": "dcgm-exporter", "namespace": "gpu-monitoring"},
      "spec": {"endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s",
                              "honorLabels": False, "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                                                     "targetLabel": "node", "action": "replace"}]}]}}


def test_allocate_keeps_previous_and_takes_first_free():
    devs = dcgm.node_devices("n1", CAP, 2)
    pods = [{"namespace": "t", "name": "a", "container": "c", "requests": {"nvidia.com/mig-1g.10gb": 1}},
            {"namespace": "t", "name": "b", "container": "c", "requests": {"nvidia.com/mig-1g.10gb": 2, "cpu": 1}}]
    alloc = sim_metrics.allocate(devs, pods)
    assert alloc["nvidia.com/mig-1g.10gb/0"]["pod"] == "a"
    assert [k for k, o in sorted(alloc.items()) if o["pod"] == "b"] == ["nvidia.com/mig-1g.10gb/1", "nvidia.com/mig-1g.10gb/2"]
    # a leaves: its device is free, b keeps its devices, c takes the freed one
    alloc2 = sim_metrics.allocate(devs, pods[1:] + [{"namespace": "t", "name": "c", "requests": {"nvidia.com/mig-1g.10gb": 1}}], alloc)
    assert alloc2["nvidia.com/mig-1g.10gb/0"]["pod"] == "c"
    assert alloc2["nvidia.com/mig-1g.10gb/1"]["pod"] == "b"


def test_scrape_config_matches_the_service_monitor():
    target = {"address": "127.0.0.1:9400", "node": "n1", "pod": "dcgm-exporter-n1", "metrics_path": "/nodes/n1/metrics"}
    cfg = sim_metrics.scrape_config(SM, [target])
    assert cfg["job_name"] == "serviceMonitor/gpu-monitoring/dcgm-exporter/0"
    assert cfg["honor_labels"] is False and cfg["scrape_interval"] == "15s"
    assert cfg["static_configs"] == [{"targets": ["127.0.0.1:9400"], "labels": {
        "namespace": "gpu-monitoring", "service": "dcgm-exporter", "endpoint": "metrics", "pod": "dcgm-exporter-n1",
        "container": "exporter", "node": "n1", "__metrics_path__": "/nodes/n1/metrics"}}]
    with pytest.raises(GpuOpsError, match="ServiceMonitor"):
        sim_metrics.scrape_config({"kind": "Service"}, [])
