# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Right-sizing from measured GPU use (gpu_rightsize, docs/rightsize.md).

For each demand item (gpu_plan's demand schema) it reads a window of dcgm-exporter series from Prometheus - memory
``DCGM_FI_DEV_FB_USED`` (MiB) and compute ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (0-1, per GPU or per MIG device) or
``DCGM_FI_DEV_GPU_UTIL`` (0-100; always 0 on MIG devices) - with the exporter's ``namespace``/``pod`` labels, maps
the pods to items with plan/workloads.py, and proposes the size that holds the p95 plus ``headroom_pct`` and never
less than the observed peak memory.

PromQL: one query per statistic and metric for the whole fleet, aggregated by (namespace, pod) in Prometheus, so
the answer has one row per pod, not one series per sample: ``max by (P) (max_over_time(M[W]))``
(peak), ``max by (P) (quantile_over_time(0.95, M[W]))`` (p95 of each device's samples, the largest over a pod's
devices), ``sum by (P) (count_over_time(M[W]))`` (samples), ``min by (P) (min_over_time(timestamp(M)[W:S]))``
(first sample, a subquery at ``step`` S), P being the pod labels (``POD_BY``),
and ``count(max_over_time(M[W]))`` (does the metric exist at all). An item's p95 is the largest p95 of its pods: an
upper bound of the p95 over all its samples, so the proposal errs on the large side.
"""
from __future__ import annotations

import math
import re
import time
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import MIG_PREFIX
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import choice
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dcgm
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.prometheus import duration_s, prom_duration
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import workloads
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.demand import parse_demand

_METRIC_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
COMPUTE_METRICS = (dcgm.ENGINE_ACTIVE, dcgm.GPU_UTIL)
MIB_PER_GB = 1024.0
# dcgm-exporter's own pod labels; scraped through a ServiceMonitor (honorLabels false) Prometheus renames them
# exported_namespace / exported_pod (namespace / pod are then the exporter's own pod): both are read, exported_ first.
POD_BY = "exported_namespace, exported_pod, namespace, pod"


def queries(memory_metric: str, compute_metric: str, window_s: float, step_s: float) -> Dict[str, str]:
    """The PromQL gpu_rightsize sends: ``{name: query}`` (one per statistic and metric, fleet-wide)."""
    w, s = prom_duration(window_s), prom_duration(step_s)
    out = {}
    for tag, m in (("memory", memory_metric), ("compute", compute_metric)):
        sel = m
        by = POD_BY + (", GPU_I_PROFILE, modelName" if tag == "compute" else "")
        out[tag + "_exists"] = "count(max_over_time(%s[%s]))" % (m, w)
        out[tag + "_peak"] = "max by (%s) (max_over_time(%s[%s]))" % (by, sel, w)
        out[tag + "_p95"] = "max by (%s) (quantile_over_time(0.95, %s[%s]))" % (by, sel, w)
    out["samples"] = "sum by (%s) (count_over_time(%s[%s]))" % (POD_BY, memory_metric, w)
    out["first"] = "min by (%s) (min_over_time(timestamp(%s)[%s:%s]))" % (POD_BY, memory_metric, w, s)
    return out


def _ceil(x, unit):
    return math.ceil(round(x / unit, 6)) * unit


def _plan_decisions(plan):
    if not plan:
        return {}
    if isinstance(plan, dict) and isinstance(plan.get("plan"), dict):
        plan = plan["plan"]
    if not isinstance(plan, dict) or not isinstance(plan.get("decisions"), list):
        raise GpuOpsError("plan must be a gpu_plan result (its 'plan', with 'decisions'); got keys %s"
                          % (sorted(plan) if isinstance(plan, dict) else type(plan).__name__))
    return dict(((str(d.get("tenant")), str(d.get("name"))), d) for d in plan["decisions"])


def _models(refs):
    return [gpu_catalog.find_model(r) for r in refs or []]  # an unknown model fails naming the valid keys


def _pod_index(pods):
    """``{(namespace, pod): {labels, owner}}`` from pods given as k8s_info resources or {namespace, name, labels}."""
    out = {}
    for p in pods or []:
        meta = p.get("metadata") or p
        owner = None
        refs = meta.get("ownerReferences") or []
        if refs:
            owner = {"kind": refs[0].get("kind"), "name": refs[0].get("name")}
        elif p.get("owner"):
            owner = p["owner"]
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        out[key] = {"labels": meta.get("labels") or {}, "owner": owner}
    return out


def _by_item(rows, keys, pods):
    out = {}
    for r in rows:
        lab = r["metric"]
        if lab.get("exported_pod"):
            ns, pod = lab.get("exported_namespace", ""), lab["exported_pod"]
        else:
            ns, pod = lab.get("namespace", ""), lab.get("pod", "")
        if not pod:
            continue  # an idle device
        info = pods.get((ns, pod), {})
        key = workloads.item_for_pod(ns, pod, keys, info.get("labels"), info.get("owner"))
        if key is not None:
            out.setdefault(key, []).append(r)
    return out


def _compute_fraction(row, compute_metric):
    """One row's compute as a fraction of a whole GPU; None where the metric says nothing (GPU_UTIL on MIG)."""
    value = row["value"]
    if compute_metric == dcgm.GPU_UTIL:
        if row["metric"].get("GPU_I_PROFILE"):
            return None
        return value / 100.0
    profile = row["metric"].get("GPU_I_PROFILE")
    if profile:  # the engine-active ratio of a MIG device is relative to its own slices
        m = re.match(r"^(?:\d+c\.)?(\d+)g\.", str(profile))
        model = _model_of_name(row["metric"].get("modelName", ""))
        total = float(model.compute_slices) if model is not None and model.compute_slices else 7.0
        return value * (int(m.group(1)) / total if m else 1.0)
    return value


def _model_of_name(name):
    """The catalog model of a dcgm-exporter ``modelName`` (an NVML name) or a catalog key; None when unknown."""
    return gpu_catalog.lookup_model(name) or gpu_catalog.lookup_model(str(name).replace("-", " "))


def _sizing_text(item_model, memory_gb, compute, current):
    """``(what it is now, what it becomes)`` as profile names / time-slice shares on the item's model."""
    if item_model is None:
        return current or "-", "%.1f GB" % memory_gb
    if gpu_catalog.mig_capable(item_model):
        p = opt.smallest_profile(item_model, memory_gb, compute)
        return current or "-", (p.name if p else "a whole %s (no profile holds %.1f GB)" % (item_model.key, memory_gb))
    share = max(memory_gb / opt.capacity_gb(item_model), compute or 0.0)
    return current or "-", "%.0f %% of a %s (time-slicing)" % (min(1.0, share) * 100, item_model.key)


def rightsize(client: Any, params: Mapping[str, Any], now: Optional[float] = None) -> Dict[str, Any]:
    """The right-sizing: ``{items, demand, changes, queries}``; ``client`` is a metrics.prometheus.Prometheus."""
    p = dict(params)
    demand = p.get("demand")
    items = parse_demand(demand)  # the planner's own validation: errors name the valid keys and values
    memory_metric = str(p.get("memory_metric") or dcgm.FB_USED)
    if not _METRIC_RE.match(memory_metric):
        raise GpuOpsError("memory_metric %r is not a Prometheus metric name (e.g. %s, or a recording rule's name in "
                          "MiB per device)" % (memory_metric, dcgm.FB_USED))
    compute_metric = choice(p.get("compute_metric") or dcgm.ENGINE_ACTIVE, COMPUTE_METRICS, "compute_metric")
    window_s = duration_s(p.get("window") or "7d", "window")
    step_s = duration_s(p.get("step") or "5m", "step")
    min_hist_s = duration_s(p.get("min_history") or "24h", "min_history")
    headroom = float(p["headroom_pct"] if p.get("headroom_pct") is not None else 20)
    if headroom < 0:
        raise GpuOpsError("headroom_pct must be 0 or more, got %r" % headroom)
    decisions = _plan_decisions(p.get("plan"))
    models = _models(p.get("models"))
    pods = _pod_index(p.get("pods"))
    now = float(now if now is not None else time.time())

    qs = queries(memory_metric, compute_metric, window_s, step_s)
    res = {}
    for name in ("memory_exists", "compute_exists"):
        if not client.query(qs[name], now):
            metric = memory_metric if name.startswith("memory") else compute_metric
            raise GpuOpsError("Prometheus at %s has no series of %s in the last %s: is dcgm-exporter scraped, and does "
                              "its metrics CSV collect %s? (memory_metric / compute_metric name the metrics)"
                              % (client.url, metric, prom_duration(window_s), metric), url=client.url, metric=metric)
    for name in ("memory_peak", "memory_p95", "compute_peak", "compute_p95", "samples", "first"):
        res[name] = client.query(qs[name], now)
    keys = [(it.tenant, it.name) for it in items]
    grouped = dict((name, _by_item(rows, keys, pods)) for name, rows in res.items())

    out_items, new_demand, changes = [], [], []
    for it, raw in zip(items, demand or []):
        key = (it.tenant, it.name)
        dec = decisions.get(key) or {}
        model = gpu_catalog.find_model(dec["model"]) if dec.get("model") else (models[0] if models else None)
        current = None
        res_name = dec.get("resource") or ""
        if res_name.startswith(MIG_PREFIX):
            current = res_name[len(MIG_PREFIX):]
        elif res_name:
            current = "%s (%s)" % (res_name, dec.get("mode"))
        before = {"memory_gb": it.memory_gb, "compute": it.compute}
        entry = {"tenant": it.tenant, "name": it.name, "model": model.key if model else None, "observed": None,
                 "before": dict(before, profile=current), "after": dict(before, profile=current), "changed": False}
        mem_rows = grouped["memory_peak"].get(key)
        new = dict(raw)
        if not mem_rows:
            what = (memory_metric, prom_duration(window_s), it.tenant, it.name, workloads.ITEM_LABEL, it.name)
            entry["reason"] = ("no %s series of its pods in the last %s (pods of namespace %s whose workload is %s, or "
                               "labelled %s=%s): left unchanged" % what)
        else:
            obs = _observed(grouped, key, compute_metric, now)
            entry["observed"] = obs
            if obs["history_h"] * 3600.0 + 1e-6 < min_hist_s:
                entry["reason"] = ("only %.2f h of history (min_history %s): left unchanged"
                                   % (obs["history_h"], prom_duration(min_hist_s)))
            else:
                need = max(obs["memory_gb_p95"] * (1 + headroom / 100.0), obs["memory_gb_peak"])
                memory_gb = round(_ceil(need, 0.1), 1)
                compute = it.compute
                ctext = ""
                if it.compute is not None and obs["compute_p95"] is not None:
                    compute = round(min(1.0, max(0.01, _ceil(obs["compute_p95"] * (1 + headroom / 100.0), 0.01))), 2)
                    ctext = "; compute p95 %.2f +%g %% = %.2f of a GPU" % (obs["compute_p95"], headroom, compute)
                elif compute_metric == dcgm.GPU_UTIL and obs["compute_p95"] is None:
                    ctext = "; compute unknown (%s is always 0 on MIG devices; use %s)" % (
                        dcgm.GPU_UTIL, dcgm.ENGINE_ACTIVE)
                was, becomes = _sizing_text(model, memory_gb, compute, current)
                text = ("%s -> %s: p95 %.1f GB, peak %.1f GB, +%g %% headroom = %.1f GB, never below the peak: "
                        "memory_gb %s -> %s%s (%d samples, %.1f h)"
                        % (was, becomes, obs["memory_gb_p95"], obs["memory_gb_peak"], headroom,
                           obs["memory_gb_p95"] * (1 + headroom / 100.0), _num(it.memory_gb), _num(memory_gb),
                           ctext, obs["samples"], obs["history_h"]))
                entry["after"] = {"memory_gb": memory_gb, "compute": compute,
                                  "profile": becomes if model is not None else current}
                for field, b, a in (("memory_gb", it.memory_gb, memory_gb), ("compute", it.compute, compute)):
                    if a is not None and (b is None or abs(float(a) - float(b)) > 1e-9):
                        new[field] = a
                        entry["changed"] = True
                        changes.append({"tenant": it.tenant, "name": it.name, "field": field, "before": b, "after": a,
                                        "reason": text})
                entry["reason"] = text if entry["changed"] else "fits as declared: " + text
        out_items.append(entry)
        new_demand.append(new)
    return {"items": out_items, "demand": new_demand, "changes": changes, "queries": qs}


def _num(x):
    return ("%g" % x) if x is not None else "-"


def _observed(grouped, key, compute_metric, now):
    mib_peak = max(r["value"] for r in grouped["memory_peak"][key])
    mib_p95 = max([r["value"] for r in grouped["memory_p95"].get(key, [])] or [mib_peak])
    cpeak = [_compute_fraction(r, compute_metric) for r in grouped["compute_peak"].get(key, [])]
    cp95 = [_compute_fraction(r, compute_metric) for r in grouped["compute_p95"].get(key, [])]
    cpeak = [c for c in cpeak if c is not None]
    cp95 = [c for c in cp95 if c is not None]
    samples = int(sum(r["value"] for r in grouped["samples"].get(key, [])))
    firsts = [r["value"] for r in grouped["first"].get(key, []) if not math.isnan(r["value"])]
    history_h = max(0.0, (now - min(firsts)) / 3600.0) if firsts else 0.0
    return {"memory_gb_peak": round(mib_peak / MIB_PER_GB, 3), "memory_gb_p95": round(mib_p95 / MIB_PER_GB, 3),
            "compute_peak": round(max(cpeak), 4) if cpeak else None,
            "compute_p95": round(max(cp95), 4) if cp95 else None,
            "samples": samples, "history_h": round(history_h, 3)}


def load_demand_file(path: str) -> List[Dict[str, Any]]:
    """The ``demand`` list of a YAML / JSON file (a gpu_plan demand file or a previous ``demand_out``)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise GpuOpsError("demand_file %s cannot be read: %s" % (path, e))
    try:
        import yaml
        doc = yaml.safe_load(text)
    except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
        import json
        doc = json.loads(text)
    except Exception as e:
        raise GpuOpsError("demand_file %s is not YAML: %s" % (path, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("demand"), list):
        raise GpuOpsError("demand_file %s must be a mapping with a 'demand' list (a gpu_plan demand file)" % path)
    return doc["demand"]


def _file_demand(path):
    try:
        return load_demand_file(path)
    except GpuOpsError:
        return None


def render_demand_file(result: Mapping[str, Any]) -> str:
    """The text of ``demand_out``: ``{demand, changes}`` as YAML (JSON where PyYAML is missing)."""
    doc = {"demand": result["demand"], "changes": result["changes"]}
    try:
        import yaml
        return "---\n# written by gpuops.k8s.gpu_rightsize; input of gpu_plan (demand)\n" + yaml.safe_dump(
            doc, sort_keys=False, default_flow_style=False, width=160)
    except ImportError:  # pragma: no cover
        import json
        return json.dumps(doc, indent=2) + "\n"


def run(params: Mapping[str, Any], check_mode: bool = False, diff: bool = False,
        client: Any = None) -> Dict[str, Any]:
    """gpu_rightsize: read, compute, then (unless check mode) write ``demand_out`` when its content changes."""
    import os
    from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import prometheus as prom
    p = dict(params)
    if p.get("demand_file"):
        p["demand"] = load_demand_file(p["demand_file"])
    if p.get("demand") is None:
        raise GpuOpsError("give demand or demand_file (gpu_plan's demand list)")
    if client is None:
        client = prom.Prometheus(p["prometheus_url"], token=p.get("prometheus_token"), ca_path=p.get("ca_path"),
                                 validate_certs=p.get("validate_certs", True), timeout_s=p.get("timeout_s") or 30)
    result = rightsize(client, p)
    out = dict(result, changed=False, demand_out=None)
    path = p.get("demand_out")
    if path:
        text = render_demand_file(result)
        before = None
        if os.path.isfile(path):
            with open(path) as f:
                before = f.read()
        out["demand_out"] = path
        if before is not None and not result["changes"] and _file_demand(path) == result["demand"]:
            before = text  # right-sizing its own output again: nothing moved, keep the changes it records
        if before != text:
            out["changed"] = True
            if diff:
                out["diff"] = {"before": before or "", "after": text, "before_header": path, "after_header": path}
            if not check_mode:
                tmp = "%s.tmp.%d" % (path, os.getpid())
                try:
                    with open(tmp, "w") as f:
                        f.write(text)
                    os.replace(tmp, path)
                except OSError as e:
                    raise GpuOpsError("demand_out %s cannot be written: %s" % (path, e))
    return out
