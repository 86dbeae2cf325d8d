# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_usage_report (docs/usage-report.md): the window and options checked, the range queries sent to Prometheus,
metrics/usage.py's figures, and the Markdown report with its pictures (report/ helpers)."""
from __future__ import annotations

import math
import time
from typing import Any, Dict, Mapping, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import choice
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dcgm
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import usage
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.prometheus import duration_s, prom_duration
from ansible_collections.gpuops.k8s.plugins.module_utils.report import svg
from ansible_collections.gpuops.k8s.plugins.module_utils.report import writer as report_writer

REQUESTS = "kube_pod_container_resource_requests"
PHASE = "kube_pod_status_phase"
INFO = "kube_pod_info"
NAMESPACE_LABELS = "kube_namespace_labels"
COMPUTE_METRICS = (dcgm.ENGINE_ACTIVE, dcgm.GPU_UTIL)
DEFAULT_NAME = "usage-report.md"
_DCGM_BY = ("exported_namespace, exported_pod, namespace, pod, Hostname, UUID, gpu, GPU_I_ID, GPU_I_PROFILE, "
            "modelName")


def queries(compute_metric: str, tenant_label: Optional[str] = None) -> Dict[str, str]:
    """The range queries gpu_usage_report sends: ``{name: PromQL}``; ``metrics`` names the metric each one needs."""
    q = {
        "compute": "max by (%s) (%s)" % (_DCGM_BY, compute_metric),
        "memory": "max by (%s) (%s)" % (_DCGM_BY, dcgm.FB_USED),
        "requests": 'sum by (namespace, pod, resource) (%s{resource=~"nvidia_com_.*"})' % REQUESTS,
        "phase": 'max by (namespace, pod, phase) (%s{phase=~"Pending|Running"}) == 1' % PHASE,
        "info": "max by (namespace, pod, node, created_by_kind, created_by_name, priority_class) (%s)" % INFO,
    }
    if tenant_label:
        q["namespaces"] = "max by (namespace, %s) (%s)" % (_label_key(tenant_label), NAMESPACE_LABELS)
    return q


def _label_key(label):
    return usage.ksm_label_name(str(label))


METRIC_OF = {"memory": dcgm.FB_USED, "requests": REQUESTS, "phase": PHASE, "info": INFO,
             "namespaces": NAMESPACE_LABELS}
# series that always exist where the exporters run: none of them in a window where the others have data is an error
_ALWAYS = ("compute", "memory", "phase", "info")


def window(params: Mapping[str, Any], now: float) -> Dict[str, float]:
    """``{start, end, step}`` in seconds from ``window`` (ending at ``end`` or now) or ``start`` and ``end``."""
    step = duration_s(params.get("step") or "5m", "step")
    # without end: now, rounded down to the step, so that a second run within the same step writes the same report
    end = _time(params.get("end"), "end") if params.get("end") is not None else math.floor(now / step) * step
    if params.get("start") is not None:
        if params.get("window"):
            raise GpuOpsError("give window or start, not both (window ends at end, or now)")
        start = _time(params["start"], "start")
    else:
        start = end - duration_s(params.get("window") or "7d", "window")
    if start >= end:
        raise GpuOpsError("the window is empty: start %s is not before end %s" % (_iso(start), _iso(end)))
    if step > end - start:
        raise GpuOpsError("step %s is longer than the window (%s)" % (prom_duration(step), prom_duration(end - start)))
    if (end - start) / step > 11000:
        raise GpuOpsError("window / step is %d points, over Prometheus' 11000 per series; make step at least %s"
                          % ((end - start) / step, prom_duration(math.ceil((end - start) / 11000.0))))
    return {"start": start, "end": end, "step": step}


def _time(value, where):
    """Unix seconds, or RFC 3339 (``2026-12-01T00:00:00Z``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    import datetime
    try:
        d = datetime.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        raise GpuOpsError("%s %r is not a time; valid: Unix seconds or RFC 3339 like 2026-12-01T00:00:00Z"
                          % (where, value))
    return d.timestamp()


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _options(p):
    o = {"compute_metric": choice(p.get("compute_metric") or dcgm.ENGINE_ACTIVE, COMPUTE_METRICS, "compute_metric")}
    for name, default, hi in (("idle_threshold_pct", 5.0, 100.0), ("low_activity_pct", 20.0, 100.0),
                              ("oversize_pct", 50.0, 100.0), ("headroom_pct", 20.0, 1000.0)):
        v = p.get(name)
        v = float(default if v is None else v)
        if not 0.0 <= v <= hi:
            raise GpuOpsError("%s must be between 0 and %g, got %r" % (name, hi, v))
        o[name] = v
    o["idle_min_duration_s"] = duration_s(p.get("idle_min_duration") or "1h", "idle_min_duration")
    prices = p.get("prices") or {}
    for k, v in prices.items():
        gpu_catalog.find_model(k)  # an unknown model names the valid keys
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise GpuOpsError("prices[%s] must be a number of USD per GPU-hour, 0 or more; got %r" % (k, v))
    o["prices"] = dict((gpu_catalog.find_model(k).key, float(v)) for k, v in prices.items())
    rep = {}
    for k, v in (p.get("shared_replicas") or {}).items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise GpuOpsError("shared_replicas[%s] must be a whole number of replicas per GPU, 1 or more; got %r"
                              % (k, v))
        rep[str(k)] = v
    o["shared_replicas"] = rep
    if p.get("tenants") and p.get("tenant_label"):
        raise GpuOpsError("give tenants (namespace -> tenant) or tenant_label (a namespace label), not both")
    o["tenants"] = dict((str(k), str(v)) for k, v in (p.get("tenants") or {}).items())
    o["tenant_label"] = p.get("tenant_label") or None
    o["inference_priority_classes"] = [str(x) for x in p.get("inference_priority_classes") or []]
    return o


def usage_report(client: Any, params: Mapping[str, Any], now: Optional[float] = None) -> Dict[str, Any]:
    """Read the window from Prometheus and compute: ``{window, no_data, message, tenants, workloads, nodes, models,
    profiles, idle_holders, waste, totals, pods, queries, warnings}``."""
    p = dict(params)
    o = _options(p)
    w = window(p, float(now if now is not None else time.time()))
    grid = usage.Grid(w["start"], w["end"], w["step"])
    qs = queries(o["compute_metric"], o["tenant_label"])
    first, last = grid.times()
    series = dict((name, [r for r in client.query_range(q, first, last, prom_duration(w["step"])) if r["values"]])
                  for name, q in qs.items())
    metric_of = dict(METRIC_OF, compute=o["compute_metric"])
    window_out = {"start": _iso(w["start"]), "end": _iso(w["end"]), "step": prom_duration(w["step"]),
                  "hours": round((grid.n * w["step"]) / 3600.0, 4)}
    out: Dict[str, Any] = {"window": window_out, "queries": qs, "no_data": False}
    if not any(series[n] for n in _ALWAYS + ("requests",)):
        metrics = ", ".join(sorted(set(metric_of.values())))
        where = (window_out["start"], window_out["end"], client.url, metrics)
        message = ("no data in the window %s - %s: Prometheus at %s has none of %s there (a window before the "
                   "exporters ran, or after the retention?)" % where)
        out.update(_empty(), no_data=True, message=message)
        return out
    for name in _ALWAYS + (("namespaces",) if o["tenant_label"] else ()):
        if not series[name]:
            m = metric_of[name]
            hint = {"compute": "is dcgm-exporter scraped, and does its metrics CSV collect it? (compute_metric)",
                    "memory": "is dcgm-exporter scraped, and does its metrics CSV collect it?",
                    "namespaces": "kube-state-metrics exposes namespace labels only when allowed: "
                                  "--metric-labels-allowlist=namespaces=[%s]" % o["tenant_label"]}.get(
                name, "is kube-state-metrics scraped by this Prometheus?")
            raise GpuOpsError("Prometheus at %s has no series of %s in the window %s - %s: %s"
                              % (client.url, m, out["window"]["start"], out["window"]["end"], hint),
                              url=client.url, metric=m)
    out.update(usage.compute_usage(series, grid, o))
    out["message"] = ("no pod held or requested a GPU in the window" if not out["pods"] else
                      "%d pods held or requested GPUs" % len(out["pods"]))
    return out


def _empty():
    return {"tenants": [], "workloads": [], "nodes": [], "models": [], "profiles": [], "idle_holders": [],
            "waste": [{"category": c, "text": usage.CATEGORY_TEXT[c], "gpu_hours": 0.0, "cost": 0.0}
                      for c in usage.CATEGORIES], "totals": usage.rollup([], None)[0], "pods": [], "warnings": []}


def _f(v, fmt="%.2f"):
    return "-" if v is None else fmt % v


def render(result: Mapping[str, Any], title: Optional[str] = None) -> Dict[str, Any]:
    """``{"markdown": text, "pictures": {name: svg}}``: the report."""
    w = result["window"]
    md = ["# %s" % (title or "GPU usage and chargeback"), "",
          "Window %s - %s (%.2f h, step %s). %s." % (w["start"], w["end"], w["hours"], w["step"], result["message"]),
          ""]
    pictures = {}
    if result["no_data"]:
        return {"markdown": "\n".join(md) + "\n", "pictures": pictures}
    t = result["totals"]
    md += ["GPU-hours allocated %s, active %s (%s %% of the measured ones), unmeasured %s; cost allocated %s, active "
           "%s (USD)." % (_f(t["allocated_gpu_hours"]), _f(t["active_gpu_hours"]), _f(t["active_pct"], "%.1f"),
                          _f(t["unmeasured_gpu_hours"]), _f(t["cost_allocated"]), _f(t["cost_active"])), "",
           "A whole GPU counts 1, a MIG slice its compute fraction, a time-sliced or MPS replica 1/replicas; active "
           "is allocation x engine activity.", "", "## Per tenant", ""]
    tenants = result["tenants"]
    md.append(report_writer.table(
        ["tenant", "pods", "GPU-h allocated", "GPU-h active", "active %", "memory used / allocated GiB-h",
         "cost allocated", "cost active", "idle GPU-h", "pending GPU-h"],
        [[r["name"], r["pods"], _f(r["allocated_gpu_hours"]), _f(r["active_gpu_hours"]), _f(r["active_pct"], "%.1f"),
          "%s / %s" % (_f(r["memory_used_gib_hours"], "%.1f"), _f(r["memory_allocated_gib_hours"], "%.1f")),
          _f(r["cost_allocated"]), _f(r["cost_active"]), _f(r["idle_gpu_hours"]), _f(r["pending_gpu_hours"])]
         for r in tenants], ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r"]))
    if tenants:
        pictures["usage-tenants.svg"] = svg.bar_chart(
            [r["name"] for r in tenants],
            [{"name": "allocated", "values": [r["allocated_gpu_hours"] for r in tenants]},
             {"name": "active", "values": [r["active_gpu_hours"] for r in tenants]}],
            "GPU-hours per tenant: allocated vs active", "GPU-hours", value_format="%.2f")
        md += ["![GPU-hours per tenant](usage-tenants.svg)", ""]
    md += ["## Idle holders", "", "Pods whose activity stayed under the idle threshold for at least the minimum "
           "duration, largest first.", ""]
    idle = result["idle_holders"]
    if idle:
        md.append(report_writer.table(
            ["tenant", "pod", "workload", "node", "model", "resources", "idle h", "idle GPU-h", "idle cost",
             "mean activity %"],
            [[r["tenant"], "%s/%s" % (r["namespace"], r["pod"]), r["workload"], r["node"], r["model"] or "-",
              ", ".join(usage.resource_text(x) for x in r["resources"]), _f(r["idle_hours"]),
              _f(r["idle_gpu_hours"]), _f(r["idle_cost"]), _f(r["mean_activity_pct"], "%.1f")] for r in idle]))
        shown = idle[:12]
        pictures["usage-idle.svg"] = svg.bar_chart(
            ["%s/%s" % (r["namespace"], r["pod"])[:22] for r in shown],
            [{"name": "idle GPU-h", "values": [r["idle_gpu_hours"] for r in shown]}],
            "Idle holders: GPU-hours held idle", "GPU-hours", value_format="%.2f")
        md += ["![Idle holders](usage-idle.svg)", ""]
    else:
        md += ["None.", ""]
    md += ["## Waste by category", "", "Each pod counts in one of the first three categories at most.", ""]
    waste = result["waste"]
    md.append(report_writer.table(["category", "GPU-h", "cost"],
                                  [[r["text"], _f(r["gpu_hours"]), _f(r["cost"])] for r in waste], ["l", "r", "r"]))
    pictures["usage-waste.svg"] = svg.bar_chart(
        [r["text"][:26] for r in waste], [{"name": "GPU-hours", "values": [r["gpu_hours"] for r in waste]}],
        "Waste by category", "GPU-hours", value_format="%.2f")
    md += ["![Waste by category](usage-waste.svg)", ""]
    for name, heading in (("workloads", "Per workload"), ("nodes", "Per node"), ("models", "Per GPU model"),
                          ("profiles", "Per GPU resource (MIG profile)")):
        md += ["## %s" % heading, ""]
        md.append(report_writer.table(
            ["name", "pods", "GPU-h allocated", "GPU-h active", "active %", "cost allocated"],
            [[r["name"], r["pods"], _f(r["allocated_gpu_hours"]), _f(r["active_gpu_hours"]),
              _f(r["active_pct"], "%.1f"), _f(r["cost_allocated"])] for r in result[name]],
            ["l", "r", "r", "r", "r", "r"]))
        md.append("")
    if result["warnings"]:
        md += ["## Warnings", ""] + ["- %s" % x for x in result["warnings"]] + [""]
    return {"markdown": "\n".join(md).rstrip("\n") + "\n", "pictures": pictures}


def run(params: Mapping[str, Any], check_mode: bool = False, diff: bool = False, client: Any = None,
        now: Optional[float] = None) -> Dict[str, Any]:
    """gpu_usage_report: read, compute, and (unless check mode) write the report when its content changes."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import prometheus as prom
    p = dict(params)
    if client is None:
        client = prom.Prometheus.from_params(p)
    result = usage_report(client, p, now=now)
    out = dict(result, changed=False, report=None)
    if p.get("report"):
        doc = render(result, p.get("report_title"))
        written, d = report_writer.write_report_diff(p["report"], doc["markdown"], doc["pictures"],
                                                     check_mode=check_mode, diff=diff, default_name=DEFAULT_NAME)
        out["report"] = written
        out["changed"] = written["changed"]
        if d:
            out["diff"] = d
    return out
