# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU usage and chargeback over a window (gpu_usage_report, docs/usage-report.md): pure functions over Prometheus
range-query results.

Inputs (``{name: [{metric: {labels}, values: [(t, v)]}]}``, one range query each, on one grid of ``step``):

* ``compute``: dcgm-exporter's ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (0-1 of the device; on a MIG device of its own
  slice) or ``DCGM_FI_DEV_GPU_UTIL`` (0-100, always 0 on MIG: unmeasured there), one series per device, with the
  ``namespace``/``pod`` labels of the pod it is allocated to (``exported_`` ones first); a device without pod labels
  is a free device;
* ``memory``: ``DCGM_FI_DEV_FB_USED`` (MiB per device), same labels;
* ``requests``: kube-state-metrics ``kube_pod_container_resource_requests{resource=~"nvidia_com_.*"}``;
* ``phase``: ``kube_pod_status_phase`` (``phase`` Pending / Running, value 1);
* ``info``: ``kube_pod_info`` (``node``, ``created_by_kind``, ``created_by_name``, ``priority_class``);
* ``namespaces`` (only with ``tenant_label``): ``kube_namespace_labels`` with ``label_<tenant_label>``.

A sample at ``t`` stands for the step that ends at ``t``. A pod holds its GPU requests while Running; a whole GPU
counts 1, a MIG slice its compute fraction (``3g.40gb`` on an A100: 3/7), a time-sliced or MPS replica 1/replicas
(``shared_replicas``). Active = allocation x the mean engine activity of the pod's devices.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dcgm

WHOLE = "nvidia_com_gpu"
SHARED = "nvidia_com_gpu_shared"
_MIG_RES_RE = re.compile(r"^nvidia_com_mig_(?:(\d+)c_)?(\d+)g_(\d+)gb(_me)?$")
# owner kinds of long-running serving pods (the low-activity inference category)
SERVING_KINDS = ("ReplicaSet", "StatefulSet", "Deployment", "DaemonSet")
CATEGORIES = ("low_activity_inference", "whole_gpu_small_job", "pending_while_free", "request_mismatch")
CATEGORY_TEXT = {
    "low_activity_inference": "low-activity inference",
    "whole_gpu_small_job": "whole GPUs held by small jobs",
    "pending_while_free": "pods pending while GPUs sat free",
    "request_mismatch": "requests that do not match use",
}
_RS_HASH_RE = re.compile(r"^(.+)-[0-9a-z]{5,10}$")
_LABEL_INVALID_RE = re.compile(r"[^a-zA-Z0-9_]")
_LABEL_CAMEL_RE = re.compile(r"([a-z0-9])([A-Z])")


def ksm_label_name(label: str) -> str:
    """The Prometheus label kube-state-metrics gives a Kubernetes label key in its ``kube_<kind>_labels`` series
    (v2.20 internal/store/utils.go labelName): ``label_`` + the key with every character outside ``[a-zA-Z0-9_]``
    made ``_``, then snake case (an upper-case letter after a lower-case letter or digit gets ``_`` before it) and
    lower case: ``team`` -> ``label_team``, ``gpuops.io/costCenter`` -> ``label_gpuops_io_cost_center``,
    ``Team`` -> ``label_team``."""
    name = _LABEL_INVALID_RE.sub("_", label)
    return "label_" + _LABEL_CAMEL_RE.sub(r"\1_\2", name).lower()


def resource_text(res: str) -> str:
    """The device plugin's resource name of a kube-state-metrics ``resource`` label (``nvidia_com_mig_3g_40gb`` ->
    ``nvidia.com/mig-3g.40gb``)."""
    if res == WHOLE:
        return "nvidia.com/gpu"
    if res == SHARED:
        return "nvidia.com/gpu.shared"
    prof = mig_profile(res)
    return "nvidia.com/mig-" + prof if prof else res


def mig_profile(res: str) -> Optional[str]:
    """The MIG profile of a kube-state-metrics resource label, None for other resources."""
    m = _MIG_RES_RE.match(res)
    if not m:
        return None
    return "%s%sg.%sgb%s" % ((m.group(1) + "c.") if m.group(1) else "", m.group(2), m.group(3),
                             "+me" if m.group(4) else "")


def mig_resource(profile: str) -> str:
    """kube-state-metrics' resource label of a MIG profile (``3g.40gb`` -> ``nvidia_com_mig_3g_40gb``)."""
    return "nvidia_com_mig_" + re.sub(r"[^a-z0-9]", "_", str(profile).lower())


def model_of(name: Any) -> Optional[gpu_catalog.GpuModel]:
    """The catalog model of dcgm-exporter's ``modelName`` (an NVML name) or a catalog key, None when unknown."""
    if not name:
        return None
    return gpu_catalog.lookup_model(str(name)) or gpu_catalog.lookup_model(str(name).replace("-", " "))


def _profile_on(model, profile):
    """``(compute fraction, memory MiB)`` of a MIG profile, on ``model`` or on the catalog models that have it."""
    gi = re.sub(r"^\d+c\.", "", profile)
    models = [model] if model is not None and model.profiles else list(gpu_catalog.CATALOG.values())
    for m in models:
        for p in m.profiles:
            if p.name == gi:
                return p.compute_slices / float(m.compute_slices), p.memory_mib
    valid = sorted(set(p.name for m in gpu_catalog.CATALOG.values() for p in m.profiles))
    raise GpuOpsError("MIG profile %r (from a pod's GPU request) is not in the catalog%s; known profiles: %s"
                      % (profile, " of " + model.key if model is not None else "", ", ".join(valid)))


def pod_key(labels: Mapping[str, str]) -> Tuple[str, str]:
    """``(namespace, pod)`` of a series; dcgm-exporter's own labels renamed ``exported_`` by a ServiceMonitor first."""
    if labels.get("exported_pod"):
        return str(labels.get("exported_namespace", "")), str(labels["exported_pod"])
    return str(labels.get("namespace", "")), str(labels.get("pod", ""))


def workload_name(kind: Optional[str], name: Optional[str], pod: str) -> str:
    """A pod's workload: its owner (a ReplicaSet's name without its pod-template hash), else the pod itself."""
    if not name:
        return pod
    if kind == "ReplicaSet":
        m = _RS_HASH_RE.match(name)
        if m:
            return m.group(1)
    return name


class Grid(object):
    """The window's steps: sample ``i`` at ``start + (i + 1) * step`` stands for the step before it."""

    def __init__(self, start: float, end: float, step: float) -> None:
        self.start, self.step = float(start), float(step)
        self.n = max(0, int(math.floor((float(end) - self.start) / self.step + 1e-9)))
        self.hours = self.step / 3600.0

    def index(self, t: float) -> Optional[int]:
        i = int(round((float(t) - self.start) / self.step)) - 1
        return i if 0 <= i < self.n else None

    def times(self) -> Tuple[float, float]:
        """``(first sample time, last sample time)`` to ask Prometheus for."""
        return self.start + self.step, self.start + self.n * self.step


def _samples(grid, series):
    for s in series:
        for t, v in s.get("values") or []:
            i = grid.index(t)
            if i is not None and v is not None and not math.isnan(v):
                yield s.get("metric") or {}, i, float(v)


def _pct(sorted_values, q):
    if not sorted_values:
        return None
    k = max(0, int(math.ceil(q * len(sorted_values))) - 1)
    return sorted_values[k]


def compute_usage(series: Mapping[str, List[Dict[str, Any]]], grid: Grid, options: Mapping[str, Any]) -> Dict[str, Any]:
    """The usage over ``grid``: ``{pods, tenants, workloads, nodes, models, profiles, idle_holders, waste, totals,
    warnings}``. ``options``: compute_metric, tenants (namespace -> tenant), tenant_label, shared_replicas,
    idle_threshold_pct, idle_min_duration_s, low_activity_pct, oversize_pct, headroom_pct, prices (model key -> USD
    per GPU-hour), inference_priority_classes."""
    o = dict(options)
    compute_metric = o.get("compute_metric") or dcgm.ENGINE_ACTIVE
    prices = gpu_catalog.default_prices(o.get("prices") or {})
    shared_replicas = dict(o.get("shared_replicas") or {})
    idle_pct = float(o.get("idle_threshold_pct", 5.0))
    idle_min_steps = int(math.ceil(float(o.get("idle_min_duration_s", 3600.0)) / grid.step - 1e-9))
    low_pct = float(o.get("low_activity_pct", 20.0))
    oversize = float(o.get("oversize_pct", 50.0)) / 100.0
    headroom = float(o.get("headroom_pct", 20.0)) / 100.0
    inference_pcs = set(o.get("inference_priority_classes") or [])
    ns_tenant = _namespace_tenants(series, grid, o)
    warnings = []  # type: List[str]

    pods = {}  # type: Dict[Tuple[str, str], Dict[str, Any]]

    def pod(key):
        if key not in pods:
            pods[key] = {"namespace": key[0], "pod": key[1], "req": {}, "phase": {}, "info": {}, "devices": {}}
        return pods[key]

    for lab, i, v in _samples(grid, series.get("requests") or []):
        res = str(lab.get("resource", ""))
        if not res.startswith("nvidia_com_") or v <= 0:
            continue
        p = pod((str(lab.get("namespace", "")), str(lab.get("pod", ""))))
        p["req"].setdefault(i, {})
        p["req"][i][res] = p["req"][i].get(res, 0.0) + v
    for lab, i, v in _samples(grid, series.get("phase") or []):
        key = (str(lab.get("namespace", "")), str(lab.get("pod", "")))
        if v >= 0.5 and key in pods and lab.get("phase") in ("Running", "Pending"):
            pods[key]["phase"][i] = lab["phase"]
    for lab, i, v in _samples(grid, series.get("info") or []):
        key = (str(lab.get("namespace", "")), str(lab.get("pod", "")))
        if key in pods:
            pods[key]["info"] = lab
    free = {}  # type: Dict[int, Dict[str, int]]
    free_model = {}  # type: Dict[str, Any]
    for name in ("compute", "memory"):
        for lab, i, v in _samples(grid, series.get(name) or []):
            key = pod_key(lab)
            dev = (lab.get("Hostname", ""), lab.get("UUID") or lab.get("gpu", ""), lab.get("GPU_I_ID", ""))
            if not key[1] or key not in pods:
                # no pod on the device - or, through a ServiceMonitor that renames the exporter's labels, the
                # exporter's own pod (it holds no GPU request): a free device
                if name == "compute":
                    res = mig_resource(lab["GPU_I_PROFILE"]) if lab.get("GPU_I_PROFILE") else WHOLE
                    free.setdefault(i, {})
                    free[i][res] = free[i].get(res, 0) + 1
                    free_model.setdefault(res, model_of(lab.get("modelName")))
                continue
            d = pods[key]["devices"].setdefault(dev, {"profile": lab.get("GPU_I_PROFILE"), "model": lab.get("modelName"),
                                                      "node": lab.get("Hostname"), "compute": {}, "memory": {}})
            if name == "compute":
                if compute_metric == dcgm.GPU_UTIL:
                    if lab.get("GPU_I_PROFILE"):
                        continue  # DCGM_FI_DEV_GPU_UTIL is 0 on MIG devices: unmeasured
                    v = v / 100.0
                d["compute"][i] = max(0.0, min(1.0, v))
            else:
                d["memory"][i] = v

    out_pods = []
    pending_by_res = {}  # type: Dict[int, Dict[str, float]]
    for key in sorted(pods):
        p = pods[key]
        info = p["info"]
        model = None
        for d in p["devices"].values():
            model = model or model_of(d["model"])
        if model is None:  # a pod that never ran: priced as the free devices of what it asked for
            model = next((free_model[r] for reqs in p["req"].values() for r in sorted(reqs) if free_model.get(r)), None)
        node = info.get("node") or next((d["node"] for d in p["devices"].values() if d["node"]), None) or "-"
        tenant = ns_tenant.get(key[0], key[0])
        kind, owner = info.get("created_by_kind"), info.get("created_by_name")
        prio = info.get("priority_class") or ""
        entry = {"namespace": key[0], "pod": key[1], "tenant": tenant, "node": node,
                 "workload": "%s/%s" % (key[0], workload_name(kind, owner, key[1])), "owner_kind": kind or "-",
                 "priority_class": prio, "model": model.key if model else None, "resources": [],
                 "allocated_gpu_hours": 0.0, "active_gpu_hours": 0.0, "unmeasured_gpu_hours": 0.0,
                 "memory_used_gib_hours": 0.0, "memory_allocated_gib_hours": 0.0, "pending_gpu_hours": 0.0,
                 "pending_while_free_gpu_hours": 0.0, "idle_gpu_hours": 0.0, "idle_hours": 0.0}
        acts, mems, alloc_mem_mib = [], [], None
        whole_only = True
        run = []  # current run of idle steps: [(i, alloc)]
        idle_runs = []
        for i in range(grid.n):
            req = p["req"].get(i)
            phase = p["phase"].get(i)
            if not req or phase is None:
                if run:
                    idle_runs.append(run)
                    run = []
                continue
            alloc = 0.0
            mem_alloc: Optional[float] = 0.0
            for res, count in sorted(req.items()):
                frac, mib = _share(res, model, node, shared_replicas, free_model)
                if res not in entry["resources"]:
                    entry["resources"].append(res)
                if res != WHOLE or frac < 1.0:
                    whole_only = False
                if phase == "Pending":
                    entry["pending_gpu_hours"] += count * frac * grid.hours
                    pending_by_res.setdefault(i, {})
                    pending_by_res[i][res] = pending_by_res[i].get(res, 0.0) + count
                    p.setdefault("pending_at", {}).setdefault(i, {})[res] = (count, frac)
                    continue
                alloc += count * frac
                mem_alloc = None if (mem_alloc is None or mib is None) else mem_alloc + count * mib
            if phase != "Running" or alloc <= 0:
                if run:
                    idle_runs.append(run)
                    run = []
                continue
            entry["allocated_gpu_hours"] += alloc * grid.hours
            devs = [d["compute"][i] for d in p["devices"].values() if i in d["compute"]]
            act = sum(devs) / len(devs) if devs else None
            used = [d["memory"][i] for d in p["devices"].values() if i in d["memory"]]
            if act is None:
                entry["unmeasured_gpu_hours"] += alloc * grid.hours
            else:
                entry["active_gpu_hours"] += alloc * act * grid.hours
                acts.append(act)
            if used:
                mems.append(sum(used))
                entry["memory_used_gib_hours"] += sum(used) / 1024.0 * grid.hours
            if mem_alloc is not None:
                alloc_mem_mib = mem_alloc
                entry["memory_allocated_gib_hours"] += mem_alloc / 1024.0 * grid.hours
            if act is not None and act * 100.0 < idle_pct:
                run.append((i, alloc))
            elif run:
                idle_runs.append(run)
                run = []
        if run:
            idle_runs.append(run)
        for r in idle_runs:
            if len(r) >= idle_min_steps:
                entry["idle_hours"] += len(r) * grid.hours
                entry["idle_gpu_hours"] += sum(a for dummy, a in r) * grid.hours
        entry["whole_gpus_only"] = whole_only
        measured = entry["allocated_gpu_hours"] - entry["unmeasured_gpu_hours"]
        entry["mean_activity_pct"] = 100.0 * entry["active_gpu_hours"] / measured if measured > 1e-12 else None
        acts.sort()
        mems.sort()
        entry["_stats"] = {"act_peak": acts[-1] if acts else None, "act_p95": _pct(acts, 0.95),
                           "mem_peak": mems[-1] if mems else None, "mem_p95": _pct(mems, 0.95),
                           "mem_alloc": alloc_mem_mib, "pending_at": p.get("pending_at") or {}}
        out_pods.append(entry)

    _pending_while_free(out_pods, pending_by_res, free, grid)
    for e in out_pods:
        _price(e, prices, warnings)
        _waste(e, inference_pcs, low_pct, oversize, headroom)
    for e in out_pods:
        e.pop("_stats", None)
        for k, v in list(e.items()):
            if isinstance(v, float):
                e[k] = round(v, 4)
    idle = [dict((k, e[k]) for k in ("tenant", "namespace", "pod", "workload", "node", "model", "resources",
                                     "idle_hours", "idle_gpu_hours", "idle_cost", "mean_activity_pct"))
            for e in out_pods if e["idle_hours"] > 0]
    idle.sort(key=lambda r: (-r["idle_gpu_hours"], r["namespace"], r["pod"]))
    result = {"pods": out_pods, "idle_holders": idle, "warnings": warnings}
    for name, field in (("tenants", "tenant"), ("workloads", "workload"), ("nodes", "node"), ("models", "model"),
                        ("profiles", "resources")):
        result[name] = rollup(out_pods, field)
    result["totals"] = rollup(out_pods, None)[0] if out_pods else rollup([], None)[0]
    result["waste"] = [{"category": c, "text": CATEGORY_TEXT[c],
                        "gpu_hours": round(sum(e["waste"].get(c, 0.0) for e in out_pods), 4),
                        "cost": _sum_or_none([e["waste_cost"].get(c) for e in out_pods if c in e["waste"]])}
                       for c in CATEGORIES]
    return result


def _namespace_tenants(series, grid, o):
    out = {}
    label = o.get("tenant_label")
    if label:
        key = ksm_label_name(str(label))
        for lab, dummy_t, dummy_v in _samples(grid, series.get("namespaces") or []):
            if lab.get(key):
                out[str(lab.get("namespace", ""))] = str(lab[key])
    out.update(dict((str(k), str(v)) for k, v in (o.get("tenants") or {}).items()))
    return out


def _share(res, model, node, shared_replicas, free_model):
    """``(GPU fraction, memory MiB or None)`` of one unit of ``res`` on ``model``."""
    total = model.total_memory_mib if model is not None else None
    prof = mig_profile(res)
    if prof:
        return _profile_on(model or free_model.get(res), prof)
    if res == WHOLE and node not in shared_replicas:
        return 1.0, total
    if res in (WHOLE, SHARED):
        replicas = shared_replicas.get(node, shared_replicas.get(resource_text(res)))
        if replicas is None:
            raise GpuOpsError("a pod on node %s requests %s, a time-sliced or MPS replica: give shared_replicas "
                              "(node name or resource name -> replicas per GPU, e.g. {'nvidia.com/gpu.shared': 4})"
                              % (node, resource_text(res)))
        return 1.0 / replicas, (total / replicas if total else None)
    raise GpuOpsError("GPU resource %s (%s) of a pod on node %s is not one the report knows; valid: nvidia.com/gpu, "
                      "nvidia.com/gpu.shared, nvidia.com/mig-<profile>" % (resource_text(res), res, node))


def _pending_while_free(pods, pending_by_res, free, grid):
    """GPU-hours of pending pods' requests at steps where devices of the same resource sat free (no pod on them),
    shared between the pending pods in proportion to what each asked for."""
    for e in pods:
        for i, reqs in e["_stats"]["pending_at"].items():
            for res, (count, frac) in reqs.items():
                f = free.get(i, {}).get(res, 0)
                if f <= 0:
                    continue
                share = min(1.0, f / pending_by_res[i][res])
                e["pending_while_free_gpu_hours"] += count * share * frac * grid.hours


def _price(e, prices, warnings):
    price = prices.get(e["model"]) if e["model"] else None
    e["price_per_gpu_hour"] = price
    if price is None and e["allocated_gpu_hours"] + e["pending_gpu_hours"] > 0:
        warnings.append("%s/%s: no price (%s): its cost is left out; give prices {model key: USD per GPU-hour}"
                        % (e["namespace"], e["pod"], "model unknown, no DCGM series of its devices"
                           if not e["model"] else "no price for " + e["model"]))
    e["cost_allocated"] = e["allocated_gpu_hours"] * price if price is not None else None
    e["cost_active"] = e["active_gpu_hours"] * price if price is not None else None
    e["idle_cost"] = e["idle_gpu_hours"] * price if price is not None else None


def _waste(e, inference_pcs, low_pct, oversize, headroom):
    """The waste categories of one pod (each pod in one category at most, in this order: low-activity inference,
    whole GPUs held by a small job, a request that does not match use; pending while free is separate)."""
    st = e["_stats"]
    w = {}
    measured = e["allocated_gpu_hours"] - e["unmeasured_gpu_hours"]
    serving = e["owner_kind"] in SERVING_KINDS or (e["priority_class"] and e["priority_class"] in inference_pcs)
    mem_need = mem_frac = None
    if st["mem_peak"] is not None and st["mem_alloc"]:
        # the right-sizer's rule (docs/rightsize.md): p95 plus headroom, never below the peak
        mem_need = max(st["mem_p95"] * (1 + headroom), st["mem_peak"])
        mem_frac = min(1.0, mem_need / st["mem_alloc"])
    if measured > 1e-12 and serving and e["mean_activity_pct"] is not None and e["mean_activity_pct"] < low_pct:
        w["low_activity_inference"] = measured - e["active_gpu_hours"]
    elif measured > 1e-12 and e["whole_gpus_only"] and st["act_peak"] is not None and mem_frac is not None:
        need = max(st["act_peak"], min(1.0, st["mem_peak"] / st["mem_alloc"]))
        if need < oversize:
            w["whole_gpu_small_job"] = measured * (1.0 - need)
    if not w and measured > 1e-12 and st["act_p95"] is not None and mem_frac is not None:
        need = max(min(1.0, st["act_p95"] * (1 + headroom)), mem_frac)
        if need < oversize:
            w["request_mismatch"] = measured * (1.0 - need)
    if e["pending_while_free_gpu_hours"] > 0:
        w["pending_while_free"] = e["pending_while_free_gpu_hours"]
    price = e["price_per_gpu_hour"]
    e["waste"] = dict((k, round(v, 4)) for k, v in w.items())
    e["waste_cost"] = dict((k, round(v * price, 4) if price is not None else None) for k, v in w.items())


def _sum_or_none(values):
    vals = [v for v in values if v is not None]
    return round(sum(vals), 4) if vals else (None if values else 0.0)


_SUMS = ("allocated_gpu_hours", "active_gpu_hours", "unmeasured_gpu_hours", "memory_used_gib_hours",
         "memory_allocated_gib_hours", "pending_gpu_hours", "pending_while_free_gpu_hours", "idle_gpu_hours")


def rollup(pods: List[Dict[str, Any]], field: Optional[str]) -> List[Dict[str, Any]]:
    """Sums per value of ``field`` (None: one row for all): the GPU-hours, memory GiB-hours, costs (None where no
    pod of the row has a price), waste GPU-hours by category, ``active_pct`` (active over measured allocated)."""
    groups = {}  # type: Dict[str, List[Dict[str, Any]]]
    for e in pods:
        keys = ["all"] if field is None else (e[field] if isinstance(e[field], list) else [e[field]])
        for k in keys:
            groups.setdefault(str(k if k is not None else "-"), []).append(e)
    if field is None and not groups:
        groups["all"] = []
    rows = []
    for k in sorted(groups):
        g = groups[k]
        row = {"name": k if field != "resources" else resource_text(k), "pods": len(g)}  # type: Dict[str, Any]
        for s in _SUMS:
            row[s] = round(sum(e[s] for e in g), 4)
        for c in ("cost_allocated", "cost_active", "idle_cost"):
            row[c] = _sum_or_none([e[c] for e in g if e["allocated_gpu_hours"] > 0 or e[c] is not None])
        measured = row["allocated_gpu_hours"] - row["unmeasured_gpu_hours"]
        row["active_pct"] = round(100.0 * row["active_gpu_hours"] / measured, 2) if measured > 1e-12 else None
        row["waste"] = dict((c, round(sum(e["waste"].get(c, 0.0) for e in g), 4)) for c in CATEGORIES)
        rows.append(row)
    return rows
