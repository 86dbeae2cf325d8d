# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_pod_history (docs/whatif.md, "Your own cluster's history"): a cluster's GPU pods over a window, read from
kube-state-metrics' series in Prometheus, as the what-if's pods (the openb pod list's columns).

Series (kube-state-metrics v2.20.0, docs/metrics/workload/pod-metrics.md; every one carries ``namespace``, ``pod``
and ``uid``), one range query each on the window's grid, each over ``[step]`` so that a pod seen by one scrape in a
step is seen at that step:

* ``kube_pod_container_resource_requests`` (``resource`` = ``nvidia_com_gpu``, ``nvidia_com_gpu_shared``,
  ``nvidia_com_mig_<profile>``; ``cpu`` in cores, ``memory`` in bytes): which pods are GPU pods and their requests,
  summed over containers, the largest seen;
* ``kube_pod_created`` (value: the creation time), ``kube_pod_completion_time`` (the last container's finish),
  ``kube_pod_deletion_timestamp`` (deletion asked, with the grace period), ``kube_pod_status_scheduled_time``;
* ``kube_pod_status_phase`` (the last phase; a first Succeeded or Failed step ends the pod), ``kube_pod_info``
  (``priority_class``, ``node``); ``kube_namespace_labels`` only with ``tenant_label``.

A pod's times, in seconds from the window's start: created = kube_pod_created (a pod created before the window
arrives at 0, as the openb trace's pods running when its recording began); ended = the earliest of its completion
time and its deletion timestamp (exact), else the first step it was seen Succeeded or Failed at, and - when it
disappeared before the window's end - the last step it was seen at (a step time: the pod's end is then known to within
one step later or one scrape interval earlier);
a pod still there at the window's end, not ended, is ``Running`` with ``deletion_time`` = the window's length (the
recording's end, as the trace writes its running pods). A pod that ended before the window is left out.

GPU request -> the what-if's ``num_gpu`` x ``gpu_milli``: n x ``nvidia.com/gpu`` -> n x 1000; a MIG slice -> 1 x
the slice's share of its GPU, ``floor(1000 x min(compute slices / 7, memory slices / 8))`` on an A100 (the share the
what-if's ``mig`` sharing maps back to the same profile: 3g.40gb -> 428, 1g.10gb -> 125); a time-sliced or MPS
replica -> 1000 / replicas (``shared_replicas``). Pure Python, Python 3.9 compatible.
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import DNS1123_LABEL_RE
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import usage
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import usage_report
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.prometheus import prom_duration

REQUESTS = "kube_pod_container_resource_requests"
CREATED = "kube_pod_created"
COMPLETED = "kube_pod_completion_time"
DELETED = "kube_pod_deletion_timestamp"
SCHEDULED = "kube_pod_status_scheduled_time"
PHASE = "kube_pod_status_phase"
INFO = "kube_pod_info"
NAMESPACE_LABELS = "kube_namespace_labels"
METRIC_OF = {"gpu": REQUESTS, "cpu_memory": REQUESTS, "created": CREATED, "completed": COMPLETED,
             "deleted": DELETED, "scheduled": SCHEDULED, "phase": PHASE, "info": INFO, "namespaces": NAMESPACE_LABELS}
# series every GPU pod has while kube-state-metrics sees it: none of them for the GPU pods found is an error
REQUIRED = ("created", "phase", "info")
CSV_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
               "creation_time", "deletion_time", "scheduled_time", "namespace", "tenant", "gpu_resource")
DEFAULT_POOL = {"model": "a100_80gb", "gpus_per_node": 8}


def queries(step: str, tenant_label: Optional[str] = None, namespaces: Optional[List[str]] = None) -> Dict[str, str]:
    """The range queries: ``{name: PromQL}`` (``step`` a Prometheus duration, the range of each selector); with
    ``namespaces`` only the GPU pods of those namespaces (every query keeps the GPU pods' uids)."""
    for n in namespaces or []:
        if not DNS1123_LABEL_RE.match(str(n)):
            raise GpuOpsError("namespaces: %r is not a namespace name (lower-case letters, digits and '-', at most 63)"
                              % (n,))
    # names of [a-z0-9-]: nothing a regular expression or a PromQL string would read otherwise
    ns = (', namespace=~"%s"' % "|".join(str(n) for n in namespaces)) if namespaces else ""
    gpu_selector = '%s{resource=~"nvidia_com_.*"%s}' % (REQUESTS, ns)
    gpu_pods = "group by (uid) (max_over_time(%s[%s]))" % (gpu_selector, step)

    def per_pod(metric, by="namespace, pod, uid", fn="last_over_time", cmp=""):
        return "max by (%s) (%s(%s[%s])%s) and on (uid) %s" % (by, fn, metric, step, cmp, gpu_pods)

    q = {
        # a container's series changes its node label when it is bound: the max per container first, then the sum
        "gpu": "sum by (namespace, pod, uid, resource) (max by (namespace, pod, uid, resource, container) "
               "(max_over_time(%s[%s])))" % (gpu_selector, step),
        "cpu_memory": "sum by (namespace, pod, uid, resource) (max by (namespace, pod, uid, resource, container) "
                      '(max_over_time(%s{resource=~"cpu|memory"}[%s]))) and on (uid) %s' % (REQUESTS, step, gpu_pods),
        "created": per_pod(CREATED),
        "completed": per_pod(COMPLETED),
        "deleted": per_pod(DELETED),
        "scheduled": per_pod(SCHEDULED),
        "phase": per_pod(PHASE, by="namespace, pod, uid, phase", cmp=" == 1"),
        "info": per_pod(INFO, by="namespace, pod, uid, node, priority_class"),
    }
    if tenant_label:
        q["namespaces"] = "max by (namespace, %s) (last_over_time(%s[%s]))" % (
            _label_key(tenant_label), NAMESPACE_LABELS, step)
    return q


def _label_key(label):
    return usage.ksm_label_name(str(label))


def mig_milli(profile: str, model: Optional[gpu_catalog.GpuModel] = None) -> int:
    """``gpu_milli`` of one MIG slice of ``profile`` (``3g.40gb``, ``1c.3g.40gb``, ``1g.10gb+me``): the smaller of its
    compute and memory share of the GPU, in thousandths, rounded down - on ``model`` when it has the profile, else on
    the first catalog model that does."""
    gi = re.sub(r"^\d+c\.", "", str(profile))
    models = [model] if model is not None and model.profiles else []
    models += [m for dummy, m in sorted(gpu_catalog.CATALOG.items()) if m.profiles]
    for m in models:
        for p in m.profiles:
            if p.name == gi:
                share = min(p.compute_slices / float(m.compute_slices), p.memory_slices / float(m.memory_slices))
                return max(1, int(math.floor(share * 1000 + 1e-9)))
    valid = sorted(set(p.name for m in gpu_catalog.CATALOG.values() for p in m.profiles))
    raise GpuOpsError("MIG profile %r (from a pod's GPU request) is not in the catalog; known profiles: %s"
                      % (profile, ", ".join(valid)), profile=profile)


def gpu_shape(requests: Mapping[str, float], node: Optional[str], shared_replicas: Mapping[str, int],
              model: Optional[gpu_catalog.GpuModel] = None) -> Tuple[int, int, List[str]]:
    """``(num_gpu, gpu_milli, warnings)`` of a pod's GPU requests (``{kube-state-metrics resource label: count}``)."""
    warnings = []
    whole = 0
    share = 0.0
    for res, count in sorted(requests.items()):
        n = int(round(count))
        if n <= 0:
            continue
        prof = usage.mig_profile(res)
        replicas = None
        if res == usage.SHARED or (res == usage.WHOLE and node and node in shared_replicas):
            replicas = shared_replicas.get(node or "", shared_replicas.get(usage.resource_text(res)))
            if replicas is None:
                raise GpuOpsError("a pod on node %s requests %s, a time-sliced or MPS replica: give shared_replicas "
                                  "(node name or resource name -> replicas per GPU, e.g. {'nvidia.com/gpu.shared': 4})"
                                  % (node or "(none)", usage.resource_text(res)), resource=usage.resource_text(res))
        if prof:
            share += n * mig_milli(prof, model)
        elif replicas:
            share += n * max(1, int(math.floor(1000.0 / replicas)))
        elif res == usage.WHOLE:
            whole += n
        else:
            raise GpuOpsError("GPU resource %s (%s) is not one the what-if knows; valid: nvidia.com/gpu, "
                              "nvidia.com/gpu.shared, nvidia.com/mig-<profile>" % (usage.resource_text(res), res),
                              resource=res)
    if whole and share:
        warnings.append("whole GPUs and slices together; the slices are left out of the replay")
        share = 0.0
    if whole:
        return whole, 1000, warnings
    if share > 1000:
        warnings.append("slices adding up to %d milli-GPU replay as one whole GPU" % share)
        share = 1000
    return (1, int(share), warnings) if share else (0, 0, warnings)


def _series(client, q, grid):
    first, last = grid.times()
    out = []
    for s in client.query_range(q, first, last, prom_duration(grid.step)):
        values = [(t, v) for t, v in s["values"] if v is not None and not math.isnan(v) and grid.index(t) is not None]
        if values:
            out.append({"metric": s["metric"], "values": values})
    return out


def _uid(lab):
    return (str(lab.get("namespace", "")), str(lab.get("pod", "")), str(lab.get("uid", "")))


def read_pods(client: Any, params: Mapping[str, Any], now: Optional[float] = None) -> Dict[str, Any]:
    """Read the window (``window``/``start``/``end``/``step`` as gpu_usage_report's) and build the pods: ``{window,
    no_data, message, pods, peak_gpus, gpu_hours, tenants, queries, warnings}``; ``pods`` have the CSV's columns,
    times in seconds from the window's start."""
    import time as time_mod
    p = dict(params)
    w = usage_report.window(p, float(now if now is not None else time_mod.time()))
    grid = usage.Grid(w["start"], w["end"], w["step"])
    step = prom_duration(w["step"])
    tenant_label = p.get("tenant_label") or None
    if tenant_label and p.get("tenants"):
        raise GpuOpsError("give tenants (namespace -> tenant) or tenant_label (a namespace label), not both")
    shared = {}
    for k, v in (p.get("shared_replicas") or {}).items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise GpuOpsError("shared_replicas[%s] must be a whole number of replicas per GPU, 1 or more; got %r"
                              % (k, v))
        shared[str(k)] = v
    model = gpu_catalog.find_model(p["mig_model"]) if p.get("mig_model") else None
    namespaces = [str(n) for n in p.get("namespaces") or []]
    qs = queries(step, tenant_label, namespaces)
    length = grid.n * grid.step
    window_out = {"start": _iso(grid.start), "end": _iso(grid.start + length),
                  "step": step, "seconds": length, "start_unix": grid.start}
    out = {"window": window_out, "queries": qs, "no_data": False, "warnings": []}  # type: Dict[str, Any]
    series = {"gpu": _series(client, qs["gpu"], grid)}
    if not series["gpu"]:
        exists = _series(client, "count(%s)" % REQUESTS, grid)
        if not exists:
            raise GpuOpsError("Prometheus at %s has no series of %s in the window %s - %s: is kube-state-metrics "
                              "scraped by this Prometheus?" % (client.url, REQUESTS, window_out["start"],
                                                               window_out["end"]), url=client.url, metric=REQUESTS)
        out.update(no_data=True, pods=[], peak_gpus=0.0, gpu_hours=0.0, tenants=[],
                   message="no pod requested a GPU (nvidia.com/*) in the window %s - %s%s"
                           % (window_out["start"], window_out["end"],
                              " in the namespaces %s" % ", ".join(namespaces) if namespaces else ""))
        return out
    for name in qs:
        if name != "gpu":
            series[name] = _series(client, qs[name], grid)
    for name in REQUIRED + (("namespaces",) if tenant_label else ()):
        if not series[name]:
            m = METRIC_OF[name]
            hint = ("kube-state-metrics exposes namespace labels only when allowed: "
                    "--metric-labels-allowlist=namespaces=[%s]" % tenant_label if name == "namespaces" else
                    "is kube-state-metrics scraped, and does it export %s (--metric-denylist)?" % m)
            raise GpuOpsError("Prometheus at %s has no series of %s for the %d GPU pods of the window %s - %s: %s"
                              % (client.url, m, len(set(_uid(s["metric"]) for s in series["gpu"])),
                                 window_out["start"], window_out["end"], hint), url=client.url, metric=m)
    tenants = _namespace_tenants(series.get("namespaces") or [], p.get("tenants") or {}, tenant_label)
    pods = _build(series, grid, shared, model, tenants, out["warnings"])
    out["pods"] = pods
    out.update(_totals(pods, length))
    if not pods:
        out["no_data"] = True
        out["message"] = ("the GPU pods seen in the window %s - %s had all ended before it"
                          % (window_out["start"], window_out["end"]))
    else:
        running = sum(1 for x in pods if x["running_at_end"])
        out["message"] = "%d GPU pods in the window (%d still running at its end)" % (len(pods), running)
    return out


def _iso(t):
    import time as time_mod
    return time_mod.strftime("%Y-%m-%dT%H:%M:%SZ", time_mod.gmtime(t))


def _namespace_tenants(rows, tenants, label):
    out = {}
    if label:
        key = _label_key(label)
        for s in rows:
            if s["metric"].get(key):
                out[str(s["metric"].get("namespace", ""))] = str(s["metric"][key])
    out.update(dict((str(k), str(v)) for k, v in tenants.items()))
    return out


def _last(values):
    return values[-1][1] if values else None


def _build(series, grid, shared, model, tenants, warnings):
    pods = {}  # type: Dict[Tuple[str, str, str], Dict[str, Any]]
    for s in series["gpu"]:
        key = _uid(s["metric"])
        e = pods.setdefault(key, {"req": {}, "seen": set(), "cpu": 0.0, "mem": 0.0, "phases": []})
        res = str(s["metric"].get("resource", ""))
        e["req"][res] = max([e["req"].get(res, 0.0)] + [v for dummy, v in s["values"]])
        e["seen"].update(grid.index(t) for t, v in s["values"] if v > 0)
    for s in series.get("cpu_memory") or []:
        e = pods.get(_uid(s["metric"]))
        if e is not None:
            field = "cpu" if s["metric"].get("resource") == "cpu" else "mem"
            e[field] = max(e[field], max(v for dummy, v in s["values"]))
    for name in ("created", "completed", "deleted", "scheduled"):
        for s in series.get(name) or []:
            e = pods.get(_uid(s["metric"]))
            if e is not None and _last(s["values"]):
                e[name] = _last(s["values"])
    for s in series.get("info") or []:
        e = pods.get(_uid(s["metric"]))
        if e is not None:
            e["info"] = s["metric"]
    for s in series.get("phase") or []:
        e = pods.get(_uid(s["metric"]))
        if e is not None:
            e["phases"] += [(t, s["metric"].get("phase")) for t, dummy in s["values"]]
    last_t = grid.start + grid.n * grid.step
    out = []
    for key in sorted(pods):
        e = pods[key]
        ns, name, dummy_uid = key
        where = "%s/%s" % (ns, name)
        if not e["seen"]:
            continue
        first_seen = grid.start + (min(e["seen"]) + 1) * grid.step
        last_seen = grid.start + (max(e["seen"]) + 1) * grid.step
        created = e.get("created")
        if created is None:
            created = first_seen - grid.step
            warnings.append("%s: no %s sample; its creation is taken as the step before it was first seen" % (where, CREATED))
        phases = sorted(e["phases"])
        terminal = [t for t, ph in phases if ph in ("Succeeded", "Failed")][:1]
        if terminal and terminal[0] == grid.start + grid.step and created < grid.start:
            continue  # finished before the window (no completion time: an evicted pod kept as an object)
        # exact timestamps first; the steps (the first one seen finished, the last one seen) only without them
        ends = [t for t in (e.get("completed"), e.get("deleted")) if t] or terminal
        if last_seen < last_t:
            ends.append(last_seen)
        end = min(ends) if ends else None
        if end is not None and end <= grid.start:
            continue  # ended before the window (a finished Job's pod kept as an object)
        node = (e.get("info") or {}).get("node") or None
        num, milli, notes = gpu_shape(e["req"], node, shared, model)
        warnings.extend("%s: %s" % (where, x) for x in notes)
        if not num:
            continue
        c = max(0.0, created - grid.start)
        d = (min(end, last_t) if end is not None else last_t) - grid.start
        d = max(d, c)
        phase = phases[-1][1] if phases else None
        if end is None:
            phase = phase or "Running"
        sched = e.get("scheduled")
        sched = None if sched is None else min(max(sched - grid.start, c), d)
        prio = (e.get("info") or {}).get("priority_class") or ""
        out.append({"name": where, "cpu_milli": int(round(e["cpu"] * 1000)), "memory_mib": int(e["mem"] // 1048576),
                    "num_gpu": num, "gpu_milli": milli, "gpu_spec": "", "qos": prio, "pod_phase": phase or "",
                    "creation_time": _num(c), "deletion_time": _num(d), "scheduled_time": _num(sched),
                    "namespace": ns, "tenant": tenants.get(ns, ns), "running_at_end": end is None,
                    "gpu_resource": ",".join("%s=%d" % (usage.resource_text(r), int(round(v)))
                                             for r, v in sorted(e["req"].items()) if v > 0)})
    out.sort(key=lambda x: (x["creation_time"], x["name"]))
    return out


def _num(v):
    if v is None:
        return None
    return int(v) if float(v) == int(v) else round(float(v), 3)


def _gpus(pod):
    return pod["num_gpu"] * pod["gpu_milli"] / 1000.0


def _totals(pods, length):
    events = []
    for x in pods:
        events.append((x["creation_time"], 1, _gpus(x)))
        events.append((x["deletion_time"], 0, -_gpus(x)))
    peak = cur = 0.0
    for dummy_t, dummy_order, g in sorted(events):
        cur += g
        peak = max(peak, cur)
    by_tenant = {}  # type: Dict[str, Dict[str, Any]]
    for x in pods:
        t = by_tenant.setdefault(x["tenant"], {"name": x["tenant"], "pods": 0, "gpu_hours": 0.0})
        t["pods"] += 1
        t["gpu_hours"] += _gpus(x) * (x["deletion_time"] - x["creation_time"]) / 3600.0
    tenants = sorted(by_tenant.values(), key=lambda r: (-r["gpu_hours"], r["name"]))
    for t in tenants:
        t["gpu_hours"] = round(t["gpu_hours"], 4)
    return {"peak_gpus": round(peak, 3), "gpu_hours": round(sum(t["gpu_hours"] for t in tenants), 4),
            "tenants": tenants}


def pool_nodes(pool: Optional[Mapping[str, Any]], peak_gpus: float) -> List[Dict[str, Any]]:
    """A pool of identical nodes for the what-if (gpu_plan's node list): ``model`` (default a100_80gb),
    ``gpus_per_node`` (8) and ``gpus`` (default twice the peak concurrent GPU request, at least one node), rounded up
    to whole nodes."""
    o = dict(DEFAULT_POOL, **dict(pool or {}))
    unknown = sorted(set(o) - {"model", "gpus_per_node", "gpus"})
    if unknown:
        raise GpuOpsError("pool has unknown keys %s; valid: model, gpus_per_node, gpus" % ", ".join(unknown))
    m = gpu_catalog.find_model(o["model"])
    per = o["gpus_per_node"]
    if isinstance(per, bool) or not isinstance(per, int) or per < 1:
        raise GpuOpsError("pool.gpus_per_node must be a whole number, 1 or more; got %r" % (per,))
    gpus = o.get("gpus")
    if gpus is None:
        gpus = max(per, int(math.ceil(2 * peak_gpus)))
    if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or gpus < 1:
        raise GpuOpsError("pool.gpus must be a number of GPUs, 1 or more; got %r" % (gpus,))
    n = int(math.ceil(float(gpus) / per))
    width = len(str(n))
    return [{"name": "pool-%0*d" % (width, i + 1), "gpus": [{"model": m.key, "count": per}]} for i in range(n)]


def csv_text(pods: List[Mapping[str, Any]]) -> str:
    """The pods as an openb pod list (its columns, then namespace, tenant, gpu_resource)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for x in pods:
        w.writerow(["" if x.get(c) is None else x.get(c) for c in CSV_COLUMNS])
    return buf.getvalue()


def write_text(path: str, text: str, check_mode: bool = False) -> Dict[str, Any]:
    """Write ``text`` to ``path`` when its content differs (atomically): ``{path, changed}``."""
    path = os.path.abspath(os.path.expanduser(str(path)))
    data = text.encode("utf-8")
    try:
        with io.open(path, "rb") as f:
            same = f.read() == data
    except (IOError, OSError):
        same = False
    if not same and not check_mode:
        parent = os.path.dirname(path)
        try:
            if not os.path.isdir(parent):
                os.makedirs(parent)
            fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
            os.rename(tmp, path)
        except (IOError, OSError) as e:
            raise GpuOpsError("cannot write the pod list to %s: %s" % (path, e), path=path)
    return {"path": path, "changed": not same}


def run(params: Mapping[str, Any], check_mode: bool = False, client: Any = None,
        now: Optional[float] = None) -> Dict[str, Any]:
    """gpu_pod_history: read, build the pods, write ``pods_csv`` (when it changes) and the pool's ``nodes``."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import prometheus as prom
    p = dict(params)
    if client is None:
        client = prom.Prometheus.from_params(p)
    result = read_pods(client, p, now=now)
    result["nodes"] = pool_nodes(p.get("pool"), result["peak_gpus"])
    result["pool_gpus"] = sum(g["count"] for n in result["nodes"] for g in n["gpus"])
    result["pods_csv"] = None
    result["changed"] = False
    if p.get("pods_csv"):
        result["pods_csv"] = write_text(p["pods_csv"], csv_text(result["pods"]), check_mode=check_mode)
        result["changed"] = result["pods_csv"]["changed"]
    return result
