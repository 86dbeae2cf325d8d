#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_usage_report
short_description: GPU usage and chargeback per tenant from Prometheus - allocated vs active, idle holders, waste
version_added: "0.1.0"
description:
  - Reads a window of dcgm-exporter series (C(DCGM_FI_PROF_GR_ENGINE_ACTIVE) or C(DCGM_FI_DEV_GPU_UTIL),
    C(DCGM_FI_DEV_FB_USED), with the exporter's C(namespace)/C(pod) labels) and kube-state-metrics series
    (C(kube_pod_container_resource_requests) of C(nvidia.com/*) resources, C(kube_pod_status_phase), C(kube_pod_info))
    from Prometheus' HTTP API, as range queries at O(step).
  - Reports per tenant, workload, node, GPU model and GPU resource (MIG profile) the GPU-hours allocated (a whole GPU
    counts 1, a MIG slice its compute fraction - C(3g.40gb) on an A100 is 3/7 - a time-sliced or MPS replica
    1/replicas) and active (allocation x engine activity), memory used against allocated, the cost at the catalog's
    or O(prices), idle holders (pods under O(idle_threshold_pct) for at least O(idle_min_duration)) and the waste by
    category - low-activity inference, whole GPUs held by small jobs, pods pending while GPUs sat free, requests
    that do not match use (the right-sizer's rule). docs/usage-report.md has the rules and the PromQL.
  - A series that must exist and has none in the window fails naming the metric; a window where nothing has data
    returns C(no_data) and says so (in the report too).
author:
  - gpuops.k8s maintainers (@gpuops)
notes:
  - The report (O(report)) of a directory is its C(usage-report.md), with SVG pictures beside it (per-tenant
    allocated vs active, idle holders, waste by category).
  - Without O(end) the window ends now, rounded down to O(step), so a second run within one step changes nothing.
  - On a time-sliced GPU DCGM reports the device, not the pod; each replica is credited the device's activity.
  - Pods left out of the cost (no price, or no DCGM series to tell their GPU model) come back as warnings.
extends_documentation_fragment:
  - gpuops.k8s.prometheus
  - gpuops.k8s.report
attributes:
  check_mode:
    description: Prometheus is read and everything computed; O(report) is not written, C(changed) says if it would be.
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
    description: Resolution of the range queries (a Prometheus duration); each sample stands for one step.
    type: str
    default: 5m
  compute_metric:
    description: The activity series; C(DCGM_FI_DEV_GPU_UTIL) is 0 on MIG devices, whose time is then unmeasured.
    type: str
    default: DCGM_FI_PROF_GR_ENGINE_ACTIVE
    choices: [DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL]
  tenant_label:
    description:
      - A namespace label naming the tenant, read from kube-state-metrics' C(kube_namespace_labels) (it must allow
        it, C(--metric-labels-allowlist=namespaces=[<label>])). Without it and O(tenants) the namespace is the tenant.
    type: str
  tenants:
    description: Namespace -> tenant; namespaces not listed are their own tenant. Not with O(tenant_label).
    type: dict
  shared_replicas:
    description:
      - Replicas per GPU of time-sliced or MPS sharing, by node name or by resource name (V(nvidia.com/gpu.shared));
        a node listed here counts its C(nvidia.com/gpu) as replicas too. Required when a pod asks for a shared GPU.
    type: dict
  idle_threshold_pct:
    description: A pod is idle while its activity (percent of what it holds) is under this.
    type: float
    default: 5
  idle_min_duration:
    description: An idle holder is idle at least this long in one stretch (a Prometheus duration).
    type: str
    default: 1h
  low_activity_pct:
    description: Serving pods (owned by a ReplicaSet, StatefulSet, DaemonSet, or in O(inference_priority_classes))
      whose mean activity is under this count as low-activity inference.
    type: float
    default: 20
  oversize_pct:
    description:
      - A pod that needs at most this percent of what it holds wastes the rest - whole GPUs held by a small job (peak
        activity and peak memory) or a request that does not match use (the right-sizer's rule).
    type: float
    default: 50
  headroom_pct:
    description: The right-sizer's headroom over the p95, in percent (docs/rightsize.md).
    type: float
    default: 20
  inference_priority_classes:
    description: Priority classes of inference pods, counted as serving whatever owns them.
    type: list
    elements: str
  prices:
    description: USD per GPU-hour by catalog model key (V(a100_80gb)); the catalog's list prices for the others.
    type: dict
"""

EXAMPLES = r"""
- name: Last week's GPU usage and chargeback per tenant
  gpuops.k8s.gpu_usage_report:
    prometheus_url: http://prometheus-operated.monitoring:9090
    window: 7d
    step: 5m
    tenant_label: team
    prices: {a100_80gb: 2.1, h100_80gb: 3.9}
    report: /srv/gpuops/usage
  register: usage

- name: Who holds idle GPUs
  ansible.builtin.debug:
    msg: "{{ usage.idle_holders | map(attribute='pod') | list }}"
"""

RETURN = r"""
window:
  description: C(start), C(end) (RFC 3339), C(step), C(hours).
  returned: success
  type: dict
no_data:
  description: True when nothing in the window has data; C(message) says so.
  returned: success
  type: bool
message:
  description: One line on what was found.
  returned: success
  type: str
tenants:
  description:
    - One row per tenant - C(name), C(pods), C(allocated_gpu_hours), C(active_gpu_hours), C(active_pct),
      C(unmeasured_gpu_hours), C(memory_used_gib_hours), C(memory_allocated_gib_hours), C(pending_gpu_hours),
      C(pending_while_free_gpu_hours), C(idle_gpu_hours), C(cost_allocated), C(cost_active), C(idle_cost),
      C(waste) (GPU-hours by category).
  returned: success
  type: list
  elements: dict
workloads:
  description: The same rows per workload (C(namespace/owner)).
  returned: success
  type: list
  elements: dict
nodes:
  description: The same rows per node.
  returned: success
  type: list
  elements: dict
models:
  description: The same rows per GPU model (catalog key).
  returned: success
  type: list
  elements: dict
profiles:
  description: The same rows per GPU resource (C(nvidia.com/gpu), C(nvidia.com/mig-3g.40gb), ...).
  returned: success
  type: list
  elements: dict
totals:
  description: The same row for the whole cluster.
  returned: success
  type: dict
idle_holders:
  description: C(tenant), C(namespace), C(pod), C(workload), C(node), C(model), C(resources), C(idle_hours),
    C(idle_gpu_hours), C(idle_cost), C(mean_activity_pct); largest first.
  returned: success
  type: list
  elements: dict
waste:
  description: One row per category - C(category), C(text), C(gpu_hours), C(cost).
  returned: success
  type: list
  elements: dict
pods:
  description: Per pod figures (the rows' inputs), with C(waste) and C(waste_cost) by category.
  returned: success
  type: list
  elements: dict
queries:
  description: The PromQL range queries sent.
  returned: success
  type: dict
report:
  description: The report written (path, files, changed_files, changed); null without O(report).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.prometheus import connection_options, window_options
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import usage_report


def main():
    module = AnsibleModule(
        argument_spec=dict(
            connection_options(),
            **window_options(),
            compute_metric=dict(type="str", default="DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                                choices=["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"]),
            tenant_label=dict(type="str"),
            tenants=dict(type="dict"),
            shared_replicas=dict(type="dict"),
            idle_threshold_pct=dict(type="float", default=5),
            idle_min_duration=dict(type="str", default="1h"),
            low_activity_pct=dict(type="float", default=20),
            oversize_pct=dict(type="float", default=50),
            headroom_pct=dict(type="float", default=20),
            inference_priority_classes=dict(type="list", elements="str"),
            prices=dict(type="dict"),
            report=dict(type="path"),
            report_title=dict(type="str"),
        ),
        mutually_exclusive=[("window", "start"), ("tenants", "tenant_label")],
        supports_check_mode=True,
    )
    run_and_exit(module, lambda: usage_report.run(dict(module.params), check_mode=module.check_mode,
                                                  diff=module._diff), warnings=True)


if __name__ == "__main__":
    main()
