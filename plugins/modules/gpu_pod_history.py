#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_pod_history
short_description: A cluster's GPU pods over a window, from kube-state-metrics in Prometheus, as the what-if's pod list
version_added: "0.1.0"
description:
  - Reads kube-state-metrics' pod series from Prometheus' HTTP API over a window (range queries at O(step)) -
    C(kube_pod_container_resource_requests) (C(nvidia.com/*), C(cpu), C(memory)), C(kube_pod_created),
    C(kube_pod_completion_time), C(kube_pod_deletion_timestamp), C(kube_pod_status_scheduled_time),
    C(kube_pod_status_phase) and C(kube_pod_info) (C(priority_class)) - and returns the pods that requested a GPU in
    the openb pod list's columns, times in seconds from the window's start, for gpuops.k8s.gpu_whatif
    (O(pods_csv) writes them as a CSV file).
  - A whole GPU request is C(num_gpu) x 1000 milli; a MIG slice one GPU at the slice's share
    (min(compute, memory) share, rounded down - C(3g.40gb) 428, C(1g.10gb) 125); a time-sliced or MPS replica
    1000 / O(shared_replicas). The priority class goes to C(qos); a pod without one has it empty.
  - A pod created before the window arrives at 0; a pod still there at its end has C(deletion_time) = the window's
    length and C(running_at_end). Its end is the earliest of its completion time, deletion timestamp, first
    Succeeded or Failed step and last step seen - within one O(step) (docs/whatif.md, "Your own cluster's history").
  - No series of C(kube_pod_container_resource_requests), or none of C(kube_pod_created), C(kube_pod_status_phase)
    or C(kube_pod_info) for the GPU pods found, fails naming the metric; a window without GPU pods returns
    C(no_data) and says so.
author:
  - gpuops.k8s maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.k8s.prometheus
  - gpuops.k8s.attributes.controller
  - gpuops.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
    description: Prometheus is read and the pods built; O(pods_csv) is not written, C(changed) says if it would be.
  diff_mode:
    support: none
    description: The pod list is data; it is not shown as a diff.
options:
  window:
    description: How far back from O(end) to read (a Prometheus duration, V(7d), V(30d), V(24h)); not with O(start).
    type: str
  start:
    description: Start of the window, Unix seconds or RFC 3339 (V(2026-12-01T00:00:00Z)); not with O(window).
    type: str
  end:
    description: End of the window, Unix seconds or RFC 3339; default now, rounded down to O(step).
    type: str
  step:
    description: Resolution of the range queries (a Prometheus duration); pod ends not given by a timestamp are known to within one step.
    type: str
    default: 5m
  namespaces:
    description: Only the GPU pods of these namespaces (a team's own workload); default every namespace.
    type: list
    elements: str
  tenant_label:
    description: A namespace label naming the tenant (C(kube_namespace_labels)); default the namespace is the tenant.
    type: str
  tenants:
    description: Namespace -> tenant, instead of O(tenant_label).
    type: dict
  shared_replicas:
    description: Replicas per GPU of time-sliced / MPS sharing, by node name or resource name (V(nvidia.com/gpu.shared)).
    type: dict
  mig_model:
    description: Catalog model whose MIG profiles give a slice's share first (default the first catalog model with the profile).
    type: str
  pool:
    description:
      - The node pool returned as RV(nodes) for the what-if's capacity search - C(model) (default V(a100_80gb)),
        C(gpus_per_node) (8) and C(gpus) (default twice the peak concurrent GPU request, at least one node).
    type: dict
  pods_csv:
    description: Write the pods here as an openb pod list (then C(namespace), C(tenant), C(gpu_resource)), when it changes.
    type: path
"""

EXAMPLES = r"""
- name: Last week's GPU pods, replayed under two strategies at 99 % served
  gpuops.k8s.gpu_pod_history:
    prometheus_url: http://prometheus-operated.monitoring:9090
    window: 7d
    step: 5m
    pods_csv: /srv/gpuops/history/pods.csv
  register: history

- gpuops.k8s.gpu_whatif:
    pods_csv: "{{ history.pods_csv.path }}"
    nodes: "{{ history.nodes }}"
    departures: true
    window: whole
    inflation: 0
    order: creation
    sharing: [exclusive, fractional]
    capacity_search: {served_pct: 99}
    cluster_gpus: "{{ history.pool_gpus }}"
    report: /srv/gpuops/history
  when: not history.no_data
"""

RETURN = r"""
window:
  description: start, end (RFC 3339), step, seconds (the window's length), start_unix.
  returned: success
  type: dict
no_data:
  description: True when no pod requested a GPU in the window.
  returned: success
  type: bool
message:
  description: What was found, or why there is nothing.
  returned: success
  type: str
pods:
  description:
    - The GPU pods, by creation - name (namespace/pod), cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec (empty),
      qos (the priority class), pod_phase (the last phase seen), creation_time, deletion_time, scheduled_time
      (seconds from the window's start), namespace, tenant, gpu_resource, running_at_end.
  returned: success
  type: list
  elements: dict
peak_gpus:
  description: The peak concurrent GPU request of the pods (a slice counts its share).
  returned: success
  type: float
gpu_hours:
  description: GPU-hours requested by the pods over the window.
  returned: success
  type: float
tenants:
  description: Per tenant - name, pods, gpu_hours; largest first.
  returned: success
  type: list
  elements: dict
nodes:
  description: The node pool (gpu_plan's node list) of O(pool), for gpu_whatif's O(gpuops.k8s.gpu_whatif#module:nodes).
  returned: success
  type: list
  elements: dict
pool_gpus:
  description: The GPUs of RV(nodes) (gpu_whatif's O(gpuops.k8s.gpu_whatif#module:cluster_gpus), the largest size searched).
  returned: success
  type: int
pods_csv:
  description: path and changed of O(pods_csv); null without it.
  returned: success
  type: dict
queries:
  description: The PromQL range queries sent, by name.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.prometheus import connection_options, window_options
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import pod_history


def main():
    module = AnsibleModule(
        argument_spec=dict(
            connection_options(),
            **window_options(),
            namespaces=dict(type="list", elements="str"),
            tenant_label=dict(type="str"),
            tenants=dict(type="dict"),
            shared_replicas=dict(type="dict"),
            mig_model=dict(type="str"),
            pool=dict(type="dict"),
            pods_csv=dict(type="path"),
        ),
        mutually_exclusive=[("window", "start"), ("tenants", "tenant_label")],
        supports_check_mode=True,
    )
    run_and_exit(module, lambda: pod_history.run(dict(module.params), check_mode=module.check_mode), warnings=True)


if __name__ == "__main__":
    main()
