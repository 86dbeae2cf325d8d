# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point of the gpu_stack_validate module: one dispatch over the stack's components.

It sits above the components it dispatches to: k8s/device_plugin.py, metrics/ (the DCGM exporter's metrics,
HPAs) and tenancy/ (quotas and priority classes, Kueue queueing, DRA), none of which imports k8s/ back.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import is_gpu_resource_key
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import check_keys
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.device_plugin import validate_device_plugin
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.dcgm import DCGM_PROFILING_MIG_METRIC, validate_dcgm_devices, validate_dcgm_metrics
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.hpa import validate_hpas
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import queueing as gpu_queueing
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy.quotas import (
    capacity_check, plan_priority_classes, validate_priority_classes, validate_tenants)


def run_validate(params: Dict[str, Any]) -> Tuple[Any, ...]:
    """Dispatch on ``params['component']``; returns ``(result, warnings)``."""
    component = params["component"]
    if component == "device_plugin":
        plan = validate_device_plugin(params.get("configs"), params.get("default_config") or "default",
                                      params.get("node_configs"), params.get("gfd_enabled", True),
                                      params.get("mps_root") or "/run/nvidia/mps")
        warnings = plan.pop("warnings")
        return {"device_plugin": plan}, warnings
    if component == "dcgm_exporter":
        csv = validate_dcgm_metrics(params.get("metrics"))
        devices = validate_dcgm_devices(params.get("devices") or "f")
        warnings = []
        if DCGM_PROFILING_MIG_METRIC not in csv:
            warnings.append("the DCGM metrics do not include %s: on MIG devices DCGM_FI_DEV_GPU_UTIL is always 0, so "
                            "per-pod GPU activity of MIG workloads will be missing" % DCGM_PROFILING_MIG_METRIC)
        return {"metrics_csv": csv, "devices": devices}, warnings
    if component == "tenancy":
        classes = validate_priority_classes(params.get("priority_classes") or {})
        tenants, warnings = validate_tenants(params.get("tenants") or [], classes)
        if params.get("gpu_quotas") is False:
            # Kueue admits the GPU workloads (gpu_queueing): a GPU ResourceQuota would refuse the pods of
            # a workload that borrows from the cohort
            for t in tenants:
                t["quota"]["hard"] = dict((k, v) for k, v in t["quota"]["hard"].items() if not is_gpu_resource_key(k))
                t["priority_quotas"] = dict(
                    (c, {"hard": dict((k, v) for k, v in spec["hard"].items() if not is_gpu_resource_key(k))})
                    for c, spec in t["priority_quotas"].items())
                t["priority_quotas"] = dict((c, spec) for c, spec in t["priority_quotas"].items() if spec["hard"])
        if (params.get("dra") or {}).get("quotas"):
            # DRA claims count against <class>.deviceclass.resource.k8s.io/devices (unscoped quota only:
            # PriorityClass scopes match pods, not ResourceClaims)
            for t in tenants:
                t["quota"]["hard"].update(gpu_dra.claim_quota(t["quota"]["hard"]))
        plan = plan_priority_classes(classes, params.get("existing_priority_classes") or [],
                                     params.get("priority_class_change_policy") or "fail")
        capacity = {}
        if params.get("nodes") is not None:
            capacity = capacity_check(tenants, params["nodes"], params.get("capacity_policy") or "fail")
            warnings.extend(capacity.pop("warnings"))
        return {"tenants": tenants, "priority_classes": classes, "priority_class_plan": plan,
                "capacity": capacity}, warnings
    if component == "autoscaling":
        return {"hpas": validate_hpas(params.get("hpas") or [])}, []
    if component == "queueing":
        classes = validate_priority_classes(params.get("priority_classes") or {})
        tenants, warnings = validate_tenants(params.get("tenants") or [], classes)
        opts = params.get("queueing") or {}
        check_keys(opts, ("cohort", "queue_name", "within_cluster_queue", "reclaim_within_cohort", "tolerations"),
                   "queueing")
        result, more = gpu_queueing.plan(
            tenants, params.get("nodes") or [], classes, cohort=opts.get("cohort") or "gpu-tenants",
            within=opts.get("within_cluster_queue"), reclaim=opts.get("reclaim_within_cohort"),
            tolerations=opts.get("tolerations"), capacity_policy=params.get("capacity_policy") or "fail",
            queue_name=opts.get("queue_name") or "gpu")
        result["tenants"] = tenants
        return {"queueing": result}, warnings + more
    if component == "dra":
        classes = validate_priority_classes(params.get("priority_classes") or {})
        tenants, warnings = validate_tenants(params.get("tenants") or [], classes)
        opts = params.get("dra") or {}
        check_keys(opts, ("profiles", "extended_resources"), "dra")
        result, more = gpu_dra.plan(tenants, opts.get("profiles"), bool(opts.get("extended_resources")))
        return {"dra": result}, warnings + more
    raise GpuOpsError("unknown component %r; valid: device_plugin, dcgm_exporter, tenancy, autoscaling, queueing, dra"
                      % (component,))
