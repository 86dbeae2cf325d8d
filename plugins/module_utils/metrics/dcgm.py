# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dcgm-exporter's Prometheus exposition, for the simulated lab's exporter and for tests.

dcgm-exporter writes one ``# HELP`` / ``# TYPE`` pair per field (the type from its collectors CSV) and one
sample per device: labels ``gpu`` (the GPU index), ``UUID`` (the GPU's, also for its MIG instances),
``pci_bus_id``, ``device`` (``nvidia<index>``), ``modelName``, on MIG devices ``GPU_I_PROFILE`` and
``GPU_I_ID``, ``Hostname``, and, with the Kubernetes pod mapping on, ``container``, ``namespace`` and
``pod`` of the pod the device is allocated to (no pod labels on an idle device).
"""
from __future__ import annotations

import re
import uuid as uuidlib
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import GPU_RESOURCE, MIG_PREFIX
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import check_keys, choice

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"

# field -> (type, help) as in dcgm-exporter's default collectors / the dcgm_exporter role's CSV
FIELDS = {
    GPU_UTIL: ("gauge", "GPU utilization (in %)."),
    ENGINE_ACTIVE: ("gauge", "Ratio of time the graphics engine is active."),
    FB_USED: ("gauge", "Framebuffer memory used (in MiB)."),
    FB_FREE: ("gauge", "Framebuffer memory free (in MiB)."),
}
LABEL_ORDER = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "Hostname",
               "container", "namespace", "pod")


def gpu_uuid(node: str, index: int) -> str:
    """A stable, UUID-shaped identifier for simulated GPU ``index`` of ``node``."""
    return "GPU-%s" % uuidlib.uuid5(uuidlib.NAMESPACE_DNS, "%s.gpu%d.gpuops.sim" % (node, index))


def node_devices(node: str, capacity: Dict[str, Any], gpu_count: int, model: str = "NVIDIA GPU",
                 memory_mib: int = 81920) -> List[Dict[str, Any]]:
    """The devices dcgm-exporter would report on a node, from what the device plugin advertises.

    ``capacity``: the node's ``nvidia.com/*`` capacity; ``gpu_count``: physical GPUs (label
    ``nvidia.com/gpu.count``). MIG instances of each profile are spread evenly over the GPUs, numbered
    per GPU (``GPU_I_ID``); full GPUs (``nvidia.com/gpu``) are the GPUs without instances.
    Returns ``[{key, resource, gpu, uuid, profile, instance, memory_mib}]`` in a stable order.
    """
    gpu_count = int(gpu_count or 0)
    if gpu_count < 1:
        return []
    devices = []
    next_id = dict((g, 1) for g in range(gpu_count))
    used = set()
    for res in sorted(k for k in capacity if k.startswith(MIG_PREFIX)):
        count = int(capacity[res])
        profile = res[len(MIG_PREFIX):]
        per_gpu = -(-count // gpu_count)
        try:
            mem = int(float(profile.split(".", 1)[1].rstrip("gb")) * 1024)
        except (IndexError, ValueError):
            mem = memory_mib // 7
        for i in range(count):
            g = min(i // per_gpu, gpu_count - 1)
            used.add(g)
            devices.append({"key": "%s/%d" % (res, i), "resource": res, "gpu": g, "uuid": gpu_uuid(node, g),
                            "profile": profile, "instance": next_id[g], "memory_mib": mem})
            next_id[g] += 1
    full = int(capacity.get(GPU_RESOURCE, 0) or 0)
    free_gpus = [g for g in range(gpu_count) if g not in used][:full]
    for i, g in enumerate(free_gpus):
        devices.append({"key": "%s/%d" % (GPU_RESOURCE, i), "resource": GPU_RESOURCE, "gpu": g,
                        "uuid": gpu_uuid(node, g), "profile": None, "instance": None, "memory_mib": memory_mib})
    return devices


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels):
    return ",".join('%s="%s"' % (k, _escape(labels[k])) for k in LABEL_ORDER if labels.get(k) is not None)


def render(node: str, devices: List[Dict[str, Any]], alloc: Dict[str, Any], utilisation: Callable[..., Any],
           model: str = "NVIDIA GPU", fields: Optional[List[str]] = None,
           memory: Optional[Callable[..., Any]] = None) -> str:
    """dcgm-exporter's exposition text for one node.

    ``utilisation(owner)`` returns the activity 0-100 (percent) of the device's pod (``owner`` is the
    allocation entry, ``None`` for an idle device). MIG devices report ``DCGM_FI_DEV_GPU_UTIL`` 0, as
    the real exporter does; ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is the 0-1 ratio on every device.
    ``memory(owner)``, when given, returns the framebuffer MiB the device's pod uses (None: derived from the
    activity), capped at the device's memory.
    """
    fields = list(fields or (GPU_UTIL, ENGINE_ACTIVE, FB_USED, FB_FREE))
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        raise GpuOpsError("simulated DCGM exporter: unknown fields %s; valid: %s" % (unknown, sorted(FIELDS)))
    rows = []
    for d in devices:
        owner = alloc.get(d["key"])
        util = float(utilisation(owner))
        if not 0.0 <= util <= 100.0:
            raise GpuOpsError("simulated DCGM exporter: utilisation %r of %s is outside 0-100" % (util, d["key"]))
        labels = {"gpu": str(d["gpu"]), "UUID": d["uuid"], "pci_bus_id": "00000000:%02X:00.0" % (0x10 + d["gpu"]),
                  "device": "nvidia%d" % d["gpu"], "modelName": model, "Hostname": node}
        if d["profile"]:
            labels["GPU_I_PROFILE"] = d["profile"]
            labels["GPU_I_ID"] = str(d["instance"])
        if owner:
            labels.update({"container": owner.get("container") or "", "namespace": owner["namespace"],
                           "pod": owner["pod"]})
        used = int(d["memory_mib"] * (0.1 + 0.8 * util / 100.0)) if owner else 0
        fb = memory(owner) if (owner and memory is not None) else None
        if fb is not None:
            used = max(0, min(d["memory_mib"], int(fb)))
        values = {GPU_UTIL: 0 if d["profile"] else int(round(util)), ENGINE_ACTIVE: round(util / 100.0, 6),
                  FB_USED: used, FB_FREE: d["memory_mib"] - used}
        rows.append((labels, values))
    out = []
    for f in fields:
        ftype, help_text = FIELDS[f]
        out.append("# HELP %s %s" % (f, help_text))
        out.append("# TYPE %s %s" % (f, ftype))
        for labels, values in rows:
            out.append("%s{%s} %s" % (f, _labels(labels), values[f]))
    return "\n".join(out) + "\n"


def parse(text: str) -> Dict[str, Any]:
    """Parse exposition text into ``{"types": {name: type}, "samples": [(name, {labels}, value)]}`` (for
    tests and the lab's own checks; the format subset Prometheus' text parser reads from the exporters)."""
    types, samples = {}, []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("# TYPE "):
            name, ftype = line[7:].split(" ", 1)
            types[name] = ftype.strip()
            continue
        if line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            body, value = rest.rsplit("}", 1)
            labels = {}
            i = 0
            while i < len(body):
                eq = body.index("=", i)
                key = body[i:eq].strip().lstrip(",")
                j = eq + 2
                val = []
                while body[j] != '"':
                    if body[j] == "\\":
                        j += 1
                        val.append({"n": "\n"}.get(body[j], body[j]))
                    else:
                        val.append(body[j])
                    j += 1
                labels[key] = "".join(val)
                i = j + 1
                if i < len(body) and body[i] == ",":
                    i += 1
        else:
            name, value = line.split(None, 1)
            labels = {}
        samples.append((name, labels, float(value.split()[0])))
    return {"types": types, "samples": samples}


def histogram(name: str, series: List[Tuple[Any, Any, float, int]], buckets: List[str],
              help_text: str = "Request latency (seconds).") -> str:
    """A Prometheus histogram in exposition format: ``series`` is ``[(labels, {le: cumulative count}, sum,
    count)]``; ``buckets`` the upper bounds (``+Inf`` is added)."""
    out = ["# HELP %s %s" % (name, help_text), "# TYPE %s histogram" % name]
    for labels, cumulative, total, count in series:
        base = ",".join('%s="%s"' % (k, _escape(v)) for k, v in sorted(labels.items()))
        for le in list(buckets) + ["+Inf"]:
            out.append('%s_bucket{%s,le="%s"} %s' % (name, base, le, cumulative.get(le, count)))
        out.append("%s_sum{%s} %s" % (name, base, total))
        out.append("%s_count{%s} %s" % (name, base, count))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# DCGM exporter metrics

DCGM_METRIC_TYPES = ("gauge", "counter", "label")
DCGM_PROFILING_MIG_METRIC = ENGINE_ACTIVE


# dcgm-exporter -d / DCGM_EXPORTER_DEVICES_STR (pkg/cmd/app.go parseDeviceOptions): f, g[:range], i[:range];
# a range is comma-separated indexes or a-b spans.
_DCGM_DEVICES_RE = re.compile(r"^(f|[gi](:[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?)$")


def validate_dcgm_devices(value: str) -> str:
    """The devices dcgm-exporter watches (DCGM_EXPORTER_DEVICES_STR); GpuOpsError naming the valid forms."""
    text = "" if value is None else str(value)
    if not _DCGM_DEVICES_RE.match(text):
        raise GpuOpsError("DCGM_EXPORTER_DEVICES_STR (dcgm_exporter_devices) %r is not valid; valid values: f (GPUs, or "
                          "their GPU instances where MIG is enabled), g[:range] (GPUs), i[:range] (GPU instances), "
                          "a range being indexes or spans such as 0,2-4" % text, valid_values=["f", "g[:range]", "i[:range]"])
    return text


# DCGM profiling (DCP) fields are ratios and rates (bytes per second): gauges in dcgm-exporter's own CSVs.
_DCGM_GAUGE_PREFIXES = ("DCGM_FI_PROF_",)


def validate_dcgm_metrics(metrics: Optional[List[Dict[str, Any]]]) -> str:
    """Validate the metrics list ``[{field, type, help}]``; returns the CSV text the exporter reads."""
    if not isinstance(metrics, list) or not metrics:
        raise GpuOpsError("DCGM exporter metrics: give at least one {field, type, help}")
    lines = []
    seen = set()
    for i, m in enumerate(metrics):
        where = "DCGM exporter metrics[%d]" % i
        check_keys(m, ("field", "type", "help"), where)
        field = str(m.get("field") or "")
        if not re.match(r"^DCGM_(FI|EXP)_[A-Z0-9_]+$", field):
            raise GpuOpsError("%s: %r is not a DCGM field name (DCGM_FI_... or DCGM_EXP_...)" % (where, field))
        if field in seen:
            raise GpuOpsError("%s: %s is listed twice" % (where, field))
        seen.add(field)
        mtype = choice(m.get("type", "gauge"), DCGM_METRIC_TYPES, where + " type")
        if mtype == "counter" and field.startswith(_DCGM_GAUGE_PREFIXES):
            raise GpuOpsError("%s: %s is a ratio or a rate (DCGM profiling field), a gauge upstream, not a counter; "
                              "rate() over it is meaningless" % (where, field))
        text = str(m.get("help") or field).replace(",", ";").replace("\n", " ")
        lines.append("%s, %s, %s" % (field, mtype, text))
    return "\n".join(lines) + "\n"
