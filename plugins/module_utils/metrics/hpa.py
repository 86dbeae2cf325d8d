# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HorizontalPodAutoscalers (autoscaling/v2) on the GPU metrics the dcgm_exporter role's adapter rules expose per
pod: validated before the role applies them (role gpu_autoscaling, KEDA ScaledObjects in metrics.keda).

Pure Python, no Kubernetes client, Python 3.9 compatible.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import DNS1123_SUBDOMAIN_RE, check_keys, choice, integer, parse_quantity

HPA_MAX_STABILIZATION_WINDOW = 3600
HPA_MAX_PERIOD = 1800
HPA_POLICY_TYPES = ("Pods", "Percent")
HPA_SELECT_POLICIES = ("Max", "Min", "Disabled")


def _validate_scaling_rules(rules, where):
    if rules is None:
        return None
    check_keys(rules, ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance"), where)
    out = copy.deepcopy(rules)
    if "stabilizationWindowSeconds" in rules:
        out["stabilizationWindowSeconds"] = integer(rules["stabilizationWindowSeconds"], where + " stabilizationWindowSeconds",
                                                    0, HPA_MAX_STABILIZATION_WINDOW)
    if "selectPolicy" in rules:
        choice(rules["selectPolicy"], HPA_SELECT_POLICIES, where + " selectPolicy")
    policies = rules.get("policies")
    if policies is not None:
        if not isinstance(policies, list) or (not policies and rules.get("selectPolicy") != "Disabled"):
            raise GpuOpsError("%s policies: give at least one {type: Pods|Percent, value, periodSeconds}" % where)
        out["policies"] = []
        for i, pol in enumerate(policies):
            pwhere = "%s policies[%d]" % (where, i)
            check_keys(pol, ("type", "value", "periodSeconds"), pwhere)
            for req in ("type", "value", "periodSeconds"):
                if req not in pol:
                    raise GpuOpsError("%s: '%s' is required" % (pwhere, req))
            out["policies"].append({
                "type": choice(pol["type"], HPA_POLICY_TYPES, pwhere + " type"),
                "value": integer(pol["value"], pwhere + " value", 1),
                "periodSeconds": integer(pol["periodSeconds"], pwhere + " periodSeconds", 1, HPA_MAX_PERIOD),
            })
    if "tolerance" in rules:
        raise GpuOpsError("%s: 'tolerance' is an alpha field (HPAConfigurableTolerance); set it on the cluster-wide "
                          "--horizontal-pod-autoscaler-tolerance instead" % where)
    return out


# GPU metrics the dcgm_exporter role's adapter rules expose per pod, with their range.
GPU_POD_METRICS: Dict[str, Dict[str, Any]] = {
    "gpu_engine_active": {"series": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "max": 1.0,
                          "help": "graphics engine active ratio 0-1 (works on MIG)"},
    "gpu_utilization_percent": {"series": "DCGM_FI_DEV_GPU_UTIL", "max": 100.0,
                                "help": "GPU utilisation percent 0-100 (always 0 on MIG)"},
    "gpu_memory_used_mib": {"series": "DCGM_FI_DEV_FB_USED", "max": None, "help": "framebuffer used, MiB"},
    "gpu_tensor_active": {"series": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "max": 1.0, "help": "tensor pipe active ratio 0-1"},
}


def validate_hpa(hpa: Dict[str, Any]) -> Dict[str, Any]:
    """Validate one HPA definition of the gpu_autoscaling role and return the autoscaling/v2 spec parts.

    Input: ``{name, namespace, target: {kind, name, api_version}, min_replicas, max_replicas, gpu_metric:
    {name, average_value}, latency_metric: {name, average_value}, metrics: [native MetricSpec], behavior}``.
    """
    if not isinstance(hpa, dict) or not hpa.get("name"):
        raise GpuOpsError("each HPA needs a 'name'")
    where = "HPA %s" % hpa["name"]
    check_keys(hpa, ("name", "namespace", "target", "min_replicas", "max_replicas", "gpu_metric", "latency_metric",
                     "metrics", "behavior", "labels"), where)
    if not DNS1123_SUBDOMAIN_RE.match(str(hpa["name"])):
        raise GpuOpsError("%s: the name must be a DNS-1123 subdomain" % where)
    if not hpa.get("namespace"):
        raise GpuOpsError("%s: 'namespace' is required" % where)
    target = check_keys(hpa.get("target") or {}, ("kind", "name", "api_version"), where + " target")
    if not target.get("name"):
        raise GpuOpsError("%s target: 'name' (the Deployment to scale) is required" % where)
    min_r = integer(hpa.get("min_replicas", 1), where + " min_replicas", 1)
    max_r = integer(hpa.get("max_replicas", min_r), where + " max_replicas", 1)
    if min_r > max_r:
        raise GpuOpsError("%s: min_replicas (%d) must be <= max_replicas (%d)" % (where, min_r, max_r))
    metrics = []
    gm = hpa.get("gpu_metric")
    if gm:
        check_keys(gm, ("name", "average_value"), where + " gpu_metric")
        mname = choice(gm.get("name", "gpu_engine_active"), sorted(GPU_POD_METRICS), where + " gpu_metric.name")
        if "average_value" not in gm:
            raise GpuOpsError("%s gpu_metric: 'average_value' (the per-pod target) is required" % where)
        val = parse_quantity(gm["average_value"], where + " gpu_metric.average_value")
        top = GPU_POD_METRICS[mname]["max"]
        if val <= 0:
            raise GpuOpsError("%s gpu_metric.average_value must be positive" % where)
        if top is not None and val > top:
            raise GpuOpsError("%s gpu_metric: %s is %s, so a target of %s never triggers; use a value up to %s "
                              "(for example %s)" % (where, mname, GPU_POD_METRICS[mname]["help"], gm["average_value"],
                                                    top, "700m" if top == 1.0 else "70"))
        metrics.append({"type": "Pods", "pods": {"metric": {"name": mname},
                                                 "target": {"type": "AverageValue", "averageValue": str(gm["average_value"])}}})
    lm = hpa.get("latency_metric")
    if lm:
        check_keys(lm, ("name", "average_value"), where + " latency_metric")
        if not lm.get("name") or "average_value" not in lm:
            raise GpuOpsError("%s latency_metric: 'name' and 'average_value' are required" % where)
        if parse_quantity(lm["average_value"], where + " latency_metric.average_value") <= 0:
            raise GpuOpsError("%s latency_metric.average_value must be positive" % where)
        metrics.append({"type": "Pods", "pods": {"metric": {"name": str(lm["name"])},
                                                 "target": {"type": "AverageValue", "averageValue": str(lm["average_value"])}}})
    for i, m in enumerate(hpa.get("metrics") or []):
        mwhere = "%s metrics[%d]" % (where, i)
        mtype = choice((m or {}).get("type"), ("Pods", "Object", "External", "Resource", "ContainerResource"),
                       mwhere + " type")
        if mtype == "Pods":
            tgt = ((m.get("pods") or {}).get("target") or {})
            if tgt.get("type") != "AverageValue" or "averageValue" not in tgt:
                raise GpuOpsError("%s: Pods metrics only support target type AverageValue with a positive "
                                  "averageValue" % mwhere)
        if mtype == "External":
            tgt = ((m.get("external") or {}).get("target") or {})
            if "value" in tgt and "averageValue" in tgt:
                raise GpuOpsError("%s: may not set both a target value and a per-pod averageValue" % mwhere)
        metrics.append(copy.deepcopy(m))
    if not metrics:
        raise GpuOpsError("%s: no metric; set gpu_metric, latency_metric or metrics" % where)
    behavior = hpa.get("behavior")
    out_behavior = None
    if behavior:
        check_keys(behavior, ("scaleUp", "scaleDown"), where + " behavior")
        out_behavior = {}
        for direction in ("scaleUp", "scaleDown"):
            if behavior.get(direction) is not None:
                out_behavior[direction] = _validate_scaling_rules(behavior[direction], "%s behavior.%s" % (where, direction))
    return {
        "name": str(hpa["name"]),
        "namespace": str(hpa["namespace"]),
        "labels": dict(hpa.get("labels") or {}),
        "scaleTargetRef": {"apiVersion": target.get("api_version", "apps/v1"), "kind": target.get("kind", "Deployment"),
                           "name": str(target["name"])},
        "minReplicas": min_r,
        "maxReplicas": max_r,
        "metrics": metrics,
        "behavior": out_behavior,
    }


def validate_hpas(hpas: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    if not isinstance(hpas, list):
        raise GpuOpsError("HPAs must be a list")
    out = []
    seen = set()
    for hpa in hpas:
        spec = validate_hpa(hpa)
        key = (spec["namespace"], spec["name"])
        if key in seen:
            raise GpuOpsError("HPA %s/%s is defined twice" % key)
        seen.add(key)
        out.append(spec)
    return out
