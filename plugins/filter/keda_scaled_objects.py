# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.keda_scaled_objects``: KEDA ScaledObjects for validated HPAs."""

from __future__ import annotations

DOCUMENTATION = r"""
name: keda_scaled_objects
short_description: KEDA ScaledObjects (prometheus triggers) for the gpu_autoscaling role's validated HPAs
version_added: "0.1.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Turns the HPAs validated by M(gpuops.k8s.gpu_stack_validate) (C(component=autoscaling)) into keda.sh/v1alpha1
    ScaledObjects with one C(prometheus) trigger per metric, on the PromQL of the dcgm_exporter role's
    prometheus-adapter rules. GPU metrics use C(metricType=AverageValue), the latency metric C(metricType=Value).
  - Only Pods metrics (C(gpu_metric), C(latency_metric)) are supported; other metric types fail naming the valid
    backend.
options:
  _input:
    description: The validated HPAs (the module's C(hpas)).
    type: list
    elements: dict
    required: true
  prometheus_url:
    description: Prometheus base URL KEDA queries.
    type: str
    required: true
  pod_metrics:
    description: Per-pod GPU metric name -> DCGM series (the dcgm_exporter role's rules).
    type: dict
    required: true
  latency_metrics:
    description: C([{series, name, quantile, window}]) as in C(dcgm_exporter_adapter_latency_metrics).
    type: list
    elements: dict
    default: []
  ns_label:
    description: Label holding the workload's namespace on the DCGM series.
    type: str
    default: exported_namespace
  pod_label:
    description: Label holding the workload's pod on the DCGM series.
    type: str
    default: exported_pod
  polling_interval:
    description: KEDA pollingInterval (seconds).
    type: int
    default: 15
  labels:
    description: Labels of every ScaledObject.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: ScaledObjects for the HPAs
  ansible.builtin.set_fact:
    scaled_objects: "{{ plan.hpas | gpuops.k8s.keda_scaled_objects('http://prometheus.monitoring:9090',
                        {'gpu_engine_active': 'DCGM_FI_PROF_GR_ENGINE_ACTIVE'}) }}"
"""

RETURN = r"""
_value:
  description: keda.sh/v1alpha1 ScaledObject manifests, one per HPA, in order.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import keda


def keda_scaled_objects(hpas, prometheus_url, pod_metrics, latency_metrics=None, ns_label="exported_namespace",
                        pod_label="exported_pod", polling_interval=15, labels=None):
    try:
        return keda.scaled_objects(hpas, pod_metrics, prometheus_url, latency_metrics, ns_label, pod_label,
                                   polling_interval, labels)
    except GpuOpsError as e:
        raise AnsibleFilterError(str(e))


class FilterModule(object):
    def filters(self):
        return {"keda_scaled_objects": keda_scaled_objects}
