# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health: evaluate one host, then decide what to do with every GPU node of a cluster.

Two pure steps, both unit-tested without NVML or Kubernetes:

* :func:`evaluate_host` turns ``gpu_info`` facts (shape in docs/architecture.md), the expected
  GPU count and the kernel log text into a verdict: ``healthy`` plus the list of ``problems``
  (uncorrected ECC errors over a threshold, pending retired pages, remapped-row failure,
  temperature over a threshold, GPUs missing, Xid errors that need a drain or a reset).
* :func:`plan_actions` takes the verdicts of all hosts and the Kubernetes Node objects and
  returns one action per node (``cordon``, ``uncordon``, ``keep``, ``wait``, ``none``,
  ``blocked``) with the exact patch to apply: taint, ``spec.unschedulable`` and audit
  annotations. It applies the hysteresis (a node is uncordoned only after N healthy checks in a
  row), the circuit breaker (never more than a set share of the GPU nodes quarantined), and it
  never touches a node that someone else cordoned.

Python 3.9 compatible.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

# Annotation / label / taint names the health check owns (NVSentinel-style audit trail).
PREFIX = "gpuops.k8s/"
ANN_CORDONED_BY = PREFIX + "health.cordoned-by"
ANN_REASON = PREFIX + "health.reason"
ANN_SINCE = PREFIX + "health.since"
ANN_STREAK = PREFIX + "health.healthy-streak"
ANN_UNCORDONED_AT = PREFIX + "health.uncordoned-at"
ANN_ALERTS = PREFIX + "health.alerts"  # JSON {alert key: problem}: firing alerts that hold the node
LABEL_OPT_OUT = PREFIX + "health.managed"  # "false" = leave this node alone
LABEL_FAULT = PREFIX + "gpu-fault"
CORDONED_BY_VALUE = "gpuops.k8s/gpu_health"
DEFAULT_TAINT = {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"}

DEFAULTS: Dict[str, Any] = {
    "temperature_threshold_c": 90,
    "ecc_error_threshold": 10,
    "xid_ignore": [13, 31, 43, 45, 68, 109],
    "xid_unknown_action": "drain",
    "xid_actions": {},
}


def policy_argument_spec() -> Dict[str, Any]:
    """The argument spec of the health policy options, as gpu_health_check and gpu_health_alert take them
    (documented once: doc fragment gpuops.k8s.health_policy)."""
    return dict(
        temperature_threshold_c=dict(type="float", default=DEFAULTS["temperature_threshold_c"]),
        ecc_error_threshold=dict(type="int", default=DEFAULTS["ecc_error_threshold"]),
        xid_ignore=dict(type="list", elements="int", default=list(DEFAULTS["xid_ignore"])),
        xid_actions=dict(type="dict", default={}),
        xid_unknown_action=dict(type="str", default=DEFAULTS["xid_unknown_action"], choices=list(VALID_XID_ACTIONS)),
    )


# What an Xid means for the node (Ampere and newer; NVIDIA's Xid catalog buckets, coarse).
# ``ignore`` = application error, the workload is at fault (the device plugin ignores these too);
# ``reset_gpu`` = drain, then a GPU reset clears it; ``reboot`` = drain and reboot the node.
XID_ACTIONS = {
    13: "ignore",  # graphics engine exception (application)
    31: "ignore",  # GPU memory page fault (application)
    43: "ignore",  # GPU stopped processing (application)
    45: "ignore",  # preemptive cleanup
    68: "ignore",  # video processor exception
    109: "ignore",  # context switch timeout
    46: "reset_gpu",  # GPU stopped processing (critical: drain, reset)
    48: "reset_gpu",  # double bit ECC error
    61: "reset_gpu",  # internal micro-controller breakpoint/warning
    62: "reset_gpu",  # internal micro-controller halt
    63: "reset_gpu",  # page retirement / row remap pending: reset to activate
    64: "reset_gpu",  # page retirement or row remap failure
    74: "reset_gpu",  # NVLink error
    79: "reboot",  # GPU has fallen off the bus
    92: "reset_gpu",  # high single-bit ECC error rate
    94: "reset_gpu",  # contained ECC error
    95: "reset_gpu",  # uncontained ECC error
    119: "reboot",  # GSP RPC timeout
    120: "reboot",  # GSP error
    140: "reset_gpu",  # unrecovered ECC error
}
VALID_XID_ACTIONS = ("ignore", "drain", "reset_gpu", "reboot")

# "NVRM: Xid (PCI:0000:17:00): 79, pid=..., GPU has fallen off the bus."
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F:.]+)(?:[^)]*)\): (?P<xid>\d+)(?:, (?P<rest>.*))?$"
)
# Leading timestamps: ISO 8601 (journalctl -o short-iso, dmesg --time-format iso) or
# "[ 1234.567890]" (seconds since boot).
_ISO_RE = re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)")
_MONO_RE = re.compile(r"^\[\s*(?P<ts>\d+\.\d+)\]")


def _bus_key(bus):
    """Normalise a PCI bus id for matching: the domain:bus:device part, lower case.

    NVML prints ``00000000:17:00.0``; the kernel log prints ``0000:17:00``.
    """
    bus = (bus or "").lower().strip()
    parts = bus.split(":")
    if len(parts) >= 3:
        domain = parts[-3].lstrip("0") or "0"
        return "%s:%s:%s" % (domain, parts[-2], parts[-1].split(".")[0])
    return bus


def xid_action(xid: int, policy: Optional[Dict[str, Any]] = None) -> str:
    """The action an Xid calls for under ``policy`` (see DEFAULTS)."""
    policy = policy or {}
    overrides = policy.get("xid_actions") or {}
    if xid in overrides:
        return overrides[xid]
    if str(xid) in overrides:
        return overrides[str(xid)]
    ignore = policy.get("xid_ignore", DEFAULTS["xid_ignore"])
    if xid in ignore:
        return "ignore"
    return XID_ACTIONS.get(xid, policy.get("xid_unknown_action", DEFAULTS["xid_unknown_action"]))


def parse_xids(text: str, policy: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Every Xid event in kernel log ``text``, in order.

    Returns a list of ``{"xid", "pci_bus_id", "timestamp", "message", "action", "line"}``;
    ``timestamp`` is the ISO string or seconds since boot found at the start of the line, or None.
    """
    events = []
    for line in (text or "").splitlines():
        idx = line.find("NVRM: Xid")
        if idx < 0:
            continue
        match = _XID_RE.search(line[idx:].rstrip())
        if not match:
            continue
        xid = int(match.group("xid"))
        stamp = None
        iso = _ISO_RE.match(line.strip())
        if iso:
            stamp = iso.group("ts")
        else:
            mono = _MONO_RE.match(line.strip())
            if mono:
                stamp = float(mono.group("ts"))
        events.append({
            "xid": xid,
            "pci_bus_id": match.group("bus"),
            "timestamp": stamp,
            "message": (match.group("rest") or "").strip(),
            "action": xid_action(xid, policy),
            "line": line.strip(),
        })
    return events


def validate_policy(policy: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Merge ``policy`` over DEFAULTS and check it; GpuOpsError names what is valid."""
    merged = dict(DEFAULTS)
    merged.update({k: v for k, v in (policy or {}).items() if v is not None})
    for key in ("temperature_threshold_c", "ecc_error_threshold"):
        value = merged[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise GpuOpsError("%s must be a number >= 0, got %r" % (key, value))
    if merged["xid_unknown_action"] not in VALID_XID_ACTIONS:
        raise GpuOpsError("xid_unknown_action must be one of %s, got %r"
                          % (", ".join(VALID_XID_ACTIONS), merged["xid_unknown_action"]))
    actions = {}
    for key, value in (merged.get("xid_actions") or {}).items():
        try:
            xid = int(key)
        except (TypeError, ValueError):
            raise GpuOpsError("xid_actions keys must be Xid numbers, got %r" % (key,))
        if value not in VALID_XID_ACTIONS:
            raise GpuOpsError("xid_actions[%s] must be one of %s, got %r"
                              % (key, ", ".join(VALID_XID_ACTIONS), value))
        actions[xid] = value
    merged["xid_actions"] = actions
    merged["xid_ignore"] = [int(x) for x in merged.get("xid_ignore") or []]
    return merged


def _problem(check, detail, gpu=None, action="drain", value=None, threshold=None):
    out = {"check": check, "detail": detail, "gpu": gpu, "action": action}
    if value is not None:
        out["value"] = value
    if threshold is not None:
        out["threshold"] = threshold
    return out


def evaluate_host(facts: Dict[str, Any], expected_gpus: Optional[int] = None, kernel_log: str = "",
                  policy: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Health verdict of one host.

    ``facts``: the ``gpu_info`` result (``{"gpus": [...]}``). ``expected_gpus``: how many GPUs the
    host should have (None = do not check). ``kernel_log``: kernel log text to scan for Xids.

    Returns ``{"healthy", "problems", "xids", "gpu_count", "expected_gpus", "reason",
    "remediation"}``; ``remediation`` is the strongest action among the problems (``none`` <
    ``drain`` < ``reset_gpu`` < ``reboot``).
    """
    policy = validate_policy(policy)
    gpus = (facts or {}).get("gpus") or []
    problems = []
    ecc_limit = policy["ecc_error_threshold"]
    temp_limit = policy["temperature_threshold_c"]
    by_bus = {}
    for gpu in gpus:
        index = gpu.get("index")
        by_bus[_bus_key(gpu.get("pci_bus_id"))] = index
        ecc = gpu.get("ecc_errors") or {}
        for counter in ("volatile_uncorrected", "aggregate_uncorrected"):
            count = ecc.get(counter)
            if count is not None and count > ecc_limit:
                problems.append(_problem(
                    "ecc_uncorrected", "GPU %s: %s uncorrected ECC errors %d > %d"
                    % (index, counter.split("_", 1)[0], count, ecc_limit),
                    gpu=index, action="reset_gpu", value=count, threshold=ecc_limit))
                break
        if gpu.get("retired_pages_pending"):
            problems.append(_problem("retired_pages_pending",
                                     "GPU %s: retired pages pending (reset to retire them)" % index,
                                     gpu=index, action="reset_gpu"))
        if gpu.get("remapped_rows_failure"):
            problems.append(_problem("remapped_rows_failure",
                                     "GPU %s: row remapping failed" % index, gpu=index, action="reboot"))
        temp = gpu.get("temperature_c")
        if temp is not None and temp > temp_limit:
            problems.append(_problem("temperature", "GPU %s: temperature %s C > %s C" % (index, temp, temp_limit),
                                     gpu=index, action="drain", value=temp, threshold=temp_limit))
    if expected_gpus is not None and len(gpus) < expected_gpus:
        problems.append(_problem("gpus_missing", "%d of %d GPUs visible" % (len(gpus), expected_gpus),
                                 action="reboot", value=len(gpus), threshold=expected_gpus))
    xids = parse_xids(kernel_log, policy)
    seen = set()
    for event in xids:
        if event["action"] == "ignore":
            continue
        gpu = by_bus.get(_bus_key(event["pci_bus_id"]))
        key = (event["xid"], event["pci_bus_id"])
        if key in seen:
            continue
        seen.add(key)
        label = "GPU %s" % gpu if gpu is not None else "PCI %s" % event["pci_bus_id"]
        problems.append(_problem("xid", "%s: Xid %d%s" % (label, event["xid"],
                                                          (" (%s)" % event["message"]) if event["message"] else ""),
                                 gpu=gpu, action=event["action"], value=event["xid"]))
    rank = {"none": 0, "drain": 1, "reset_gpu": 2, "reboot": 3}
    remediation = "none"
    for problem in problems:
        if rank.get(problem["action"], 1) > rank[remediation]:
            remediation = problem["action"]
    return {
        "healthy": not problems,
        "problems": problems,
        "xids": xids,
        "gpu_count": len(gpus),
        "expected_gpus": expected_gpus,
        "reason": "; ".join(p["detail"] for p in problems),
        "remediation": remediation,
    }


# --- fleet decisions ---------------------------------------------------------------------------

def _meta(node):
    return node.get("metadata") or {}


def _annotations(node):
    return dict(_meta(node).get("annotations") or {})


def _taints(node):
    return list((node.get("spec") or {}).get("taints") or [])


def _same_taint(a, b):
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def node_status(node: Dict[str, Any]) -> Dict[str, Any]:
    """What the health check knows about one Node object."""
    ann = _annotations(node)
    labels = _meta(node).get("labels") or {}
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    ours = ann.get(ANN_CORDONED_BY) == CORDONED_BY_VALUE
    try:
        streak = int(ann.get(ANN_STREAK, "0"))
    except ValueError:
        streak = 0
    return {
        "name": _meta(node).get("name"),
        "unschedulable": unschedulable,
        "quarantined_by_us": ours,
        "cordoned_by_other": unschedulable and not ours,
        "opted_out": str(labels.get(LABEL_OPT_OUT, "true")).lower() == "false",
        "streak": streak,
        "reason": ann.get(ANN_REASON),
    }


def node_alerts(node: Dict[str, Any]) -> Dict[str, Any]:
    """The firing alerts recorded on a Node (``{key: problem}``); an unreadable annotation counts as none."""
    try:
        data = json.loads(_annotations(node).get(ANN_ALERTS) or "{}")
    except ValueError:
        return {}
    return dict((str(k), v) for k, v in data.items() if isinstance(v, dict)) if isinstance(data, dict) else {}


def _with_alerts(verdict, active):
    """``verdict`` with the problems of the firing alerts ``active`` added (reason, remediation recomputed)."""
    if not active:
        return verdict
    problems = list(verdict.get("problems") or [])
    details = set(p.get("detail") for p in problems)
    for key in sorted(active):
        problem = dict(active[key])
        if problem.get("detail") not in details:
            problems.append(problem)
    rank = {"none": 0, "drain": 1, "reset_gpu": 2, "reboot": 3}
    remediation = "none"
    for problem in problems:
        if rank.get(problem.get("action"), 1) > rank[remediation]:
            remediation = problem.get("action")
    return dict(verdict, healthy=not problems, problems=problems, remediation=remediation,
                reason="; ".join(p["detail"] for p in problems))


def plan_actions(verdicts: Dict[str, Any], nodes: List[Dict[str, Any]], policy: Optional[Dict[str, Any]] = None,
                 now: Optional[str] = None, alerts: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Decide, for every GPU node, what the health check does now.

    ``verdicts``: ``{node_name: evaluate_host(...) result}`` (a node without a verdict - host not
    reached - is left as it is). ``nodes``: the Kubernetes Node objects of the GPU node pool
    (the breaker's denominator). ``policy`` keys: ``auto_cordon`` (bool), ``taint`` (dict or
    None), ``uncordon_after`` (healthy checks in a row before uncordon, >= 1),
    ``max_unhealthy_fraction`` (0..1: the circuit breaker), ``dry_run`` (plan only).

    ``alerts``: ``{node_name: [gpu_alerts.read_alert(...) results]}``, the GPU health alerts of this run
    (event-driven remediation). A firing alert adds its problem to the node's verdict; a node quarantined
    while alerts fire keeps them in the ``gpuops.k8s/health.alerts`` annotation, so later checks (which see
    no alert) keep it quarantined until the resolved alert arrives; only then does the hysteresis count.

    Returns ``{"actions": [...], "breaker": {...}, "summary": {...}}``; each action has
    ``node``, ``action``, ``reason``, ``patch`` (a Node merge patch, None when nothing to write)
    and ``applied`` (False under dry run).
    """
    policy = dict(policy or {})
    auto_cordon = policy.get("auto_cordon", True)
    taint = policy.get("taint", DEFAULT_TAINT)
    uncordon_after = int(policy.get("uncordon_after", 3))
    fraction = float(policy.get("max_unhealthy_fraction", 0.25))
    dry_run = bool(policy.get("dry_run", True))
    if uncordon_after < 1:
        raise GpuOpsError("uncordon_after must be >= 1, got %d" % uncordon_after)
    if not 0 <= fraction <= 1:
        raise GpuOpsError("max_unhealthy_fraction must be between 0 and 1, got %s" % fraction)
    if taint is not None and (not taint.get("key") or taint.get("effect") not in
                              ("NoSchedule", "PreferNoSchedule", "NoExecute")):
        raise GpuOpsError("taint needs a key and an effect of NoSchedule, PreferNoSchedule or NoExecute, got %r"
                          % (taint,))
    stamp = now or ""

    statuses = {}
    for node in nodes:
        status = node_status(node)
        statuses[status["name"]] = (node, status)
    unknown = sorted(set(verdicts) - set(statuses))
    if unknown:
        raise GpuOpsError("verdicts name nodes that are not in the node list: %s" % ", ".join(unknown),
                          nodes=sorted(statuses))
    alerts = alerts or {}
    unknown = sorted(n for n in alerts if alerts[n] and n not in statuses)
    if unknown:
        raise GpuOpsError("alerts name nodes that are not in the GPU node pool (%s): %s"
                          % (policy.get("node_selector") or "the node list", ", ".join(unknown)),
                          nodes=sorted(statuses))
    # firing alerts per node after this run: those recorded on the node, plus firing, minus resolved ones
    active_alerts = {}
    for name, (node, _status) in statuses.items():
        active = node_alerts(node)
        for alert in alerts.get(name) or []:
            if not alert.get("accepted"):
                continue
            if alert.get("status") == "firing" and alert.get("problem"):
                active[alert["key"]] = alert["problem"]
            elif alert.get("status") == "resolved":
                active.pop(alert["key"], None)
        active_alerts[name] = active
    total = len(statuses)
    limit = int(math.floor(total * fraction))
    quarantined = set(name for name, (_n, s) in statuses.items() if s["quarantined_by_us"])

    actions = []
    want_cordon = []
    for name in sorted(statuses):
        node, status = statuses[name]
        verdict = verdicts.get(name)
        base = {"node": name, "reason": "", "patch": None, "applied": False,
                "problems": (verdict or {}).get("problems", []),
                "remediation": (verdict or {}).get("remediation", "none")}
        if verdict is None:
            actions.append(dict(base, action="none", reason="no health data (host not checked)"))
            continue
        verdict = _with_alerts(verdict, active_alerts[name])
        base["problems"] = verdict.get("problems", [])
        base["remediation"] = verdict.get("remediation", "none")
        alerts_value = json.dumps(active_alerts[name], sort_keys=True) if active_alerts[name] else None
        alerts_changed = _annotations(node).get(ANN_ALERTS) != alerts_value
        if status["opted_out"]:
            actions.append(dict(base, action="none", reason="opted out (%s=false)" % LABEL_OPT_OUT))
            continue
        if not verdict["healthy"]:
            if status["quarantined_by_us"]:
                patch: Optional[Dict[str, Any]] = None
                ann = _annotations(node)
                if ann.get(ANN_STREAK, "0") != "0" or ann.get(ANN_REASON) != verdict["reason"] or alerts_changed:
                    patch = {"metadata": {"annotations": {ANN_STREAK: "0", ANN_REASON: verdict["reason"]}}}
                    if alerts_changed:
                        patch["metadata"]["annotations"][ANN_ALERTS] = alerts_value
                actions.append(dict(base, action="keep", reason=verdict["reason"], patch=patch))
            elif status["cordoned_by_other"]:
                actions.append(dict(base, action="none",
                                    reason="unhealthy but cordoned by someone else; left alone: " + verdict["reason"]))
            elif not auto_cordon:
                actions.append(dict(base, action="report", reason=verdict["reason"]))
            else:
                want_cordon.append(name)
                actions.append(dict(base, action="cordon", reason=verdict["reason"]))
            continue
        # healthy
        if status["quarantined_by_us"]:
            streak = status["streak"] + 1
            if streak >= uncordon_after:
                taints = [t for t in _taints(node) if not (taint and _same_taint(t, taint))]
                patch = {
                    "spec": {"unschedulable": None, "taints": taints or None},
                    "metadata": {
                        "annotations": {ANN_CORDONED_BY: None, ANN_REASON: None, ANN_SINCE: None,
                                        ANN_STREAK: None, ANN_ALERTS: None, ANN_UNCORDONED_AT: stamp or None},
                        "labels": {LABEL_FAULT: None},
                    },
                }
                actions.append(dict(base, action="uncordon",
                                    reason="healthy for %d checks in a row (needed %d)" % (streak, uncordon_after),
                                    patch=patch))
                quarantined.discard(name)
            else:
                patch = {"metadata": {"annotations": {ANN_STREAK: str(streak)}}}
                if alerts_changed:
                    patch["metadata"]["annotations"][ANN_ALERTS] = None
                actions.append(dict(base, action="wait",
                                    reason="healthy %d of %d checks before uncordon" % (streak, uncordon_after),
                                    patch=patch))
        else:
            actions.append(dict(base, action="none", reason="healthy"))

    # circuit breaker: quarantine new nodes only while the total stays within the limit
    room = max(0, limit - len(quarantined))
    allowed = want_cordon[:room]
    blocked = want_cordon[room:]
    for action in actions:
        if action["node"] in allowed:
            node, _status = statuses[action["node"]]
            taints = _taints(node)
            if taint and not any(_same_taint(t, taint) for t in taints):
                taints.append(dict(taint))
            action["patch"] = {
                "spec": {"unschedulable": True, "taints": taints},
                "metadata": {
                    "annotations": {ANN_CORDONED_BY: CORDONED_BY_VALUE, ANN_REASON: action["reason"],
                                    ANN_SINCE: stamp or None, ANN_STREAK: "0",
                                    ANN_ALERTS: (json.dumps(active_alerts[action["node"]], sort_keys=True)
                                                 if active_alerts[action["node"]] else None)},
                    "labels": {LABEL_FAULT: "active"},
                },
            }
        elif action["node"] in blocked:
            action["action"] = "blocked"
            action["reason"] = ("circuit breaker open: %d of %d GPU nodes already quarantined (limit %d); "
                                % (len(quarantined) + len(allowed), total, limit)) + action["reason"]
    for action in actions:
        action["applied"] = bool(action["patch"]) and not dry_run
    counts = {}
    for action in actions:
        counts[action["action"]] = counts.get(action["action"], 0) + 1
    return {
        "actions": actions,
        "breaker": {"total_nodes": total, "limit": limit, "fraction": fraction,
                    "quarantined_before": sorted(set(n for n, (_x, s) in statuses.items() if s["quarantined_by_us"])),
                    "open": bool(blocked), "blocked": blocked},
        "summary": counts,
        "dry_run": dry_run,
        "changed": any(a["patch"] for a in actions),
    }


# --- host-side runner (the gpu_health_check module) -------------------------------------------

def _parse_iso(stamp):
    """Seconds since the epoch of an ISO 8601 stamp as journalctl/dmesg print it, or None."""
    import datetime

    text = stamp.replace(",", ".")
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    match = re.match(r"^(.*[T ]\d{2}:\d{2}:\d{2})(\.\d+)?([+-]\d{2}):?(\d{2})?$", text)
    if match:
        frac = (match.group(2) or "")[:7]
        text = "%s%s%s:%s" % (match.group(1), frac, match.group(3), match.group(4) or "00")
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()


def recent_log(text: str, now: float, window: int) -> str:
    """Keep the lines of ``text`` whose ISO timestamp lies within ``window`` seconds of ``now``
    (epoch seconds). Lines without an ISO timestamp are kept: their age is unknown."""
    if not window:
        return text
    kept = []
    for line in (text or "").splitlines():
        iso = _ISO_RE.match(line.strip())
        if iso:
            when = _parse_iso(iso.group("ts"))
            if when is not None and now - when > window:
                continue
        kept.append(line)
    return "\n".join(kept)


def read_kernel_log(params: Dict[str, Any], run_command: Callable[..., Any],
                    exists: Callable[..., Any]) -> Tuple[str, str]:
    """Kernel log text per ``kernel_log_source``; ``run_command(argv) -> (rc, out, err)``."""
    source = params.get("kernel_log_source") or "auto"
    path = params.get("kernel_log_path")
    if params.get("kernel_log") is not None:
        return params["kernel_log"], "inline"
    if source == "none":
        return "", "none"
    if source == "file" or (source == "auto" and path):
        if not path:
            raise GpuOpsError("kernel_log_source=file needs kernel_log_path")
        if not exists(path):
            return "", "file (absent)"
        with open(path) as handle:
            return handle.read(), "file"
    window = int(params.get("xid_window") or 0)
    if source in ("auto", "journal") and (source == "journal" or exists("/usr/bin/journalctl") or exists("/bin/journalctl")):
        argv = ["journalctl", "-k", "--no-pager", "-o", "short-iso", "--grep", "NVRM: Xid"]
        if window:
            argv += ["--since", "-%ds" % window]
        rc, out, err = run_command(argv)
        # rc 1 with no output: no matching entries
        if rc == 0 or (rc == 1 and not out.strip()):
            return out, "journal"
        if source == "journal":
            raise GpuOpsError("journalctl -k failed (rc %d): %s" % (rc, err.strip()))
    rc, out, err = run_command(["dmesg", "--time-format", "iso"])
    if rc != 0:
        raise GpuOpsError("cannot read the kernel log: dmesg failed (rc %d): %s. Run as root, or set "
                          "kernel_log_source=none to skip the Xid check" % (rc, err.strip()))
    return out, "dmesg"


def read_gpu_facts(simulator: Optional[str] = None) -> Dict[str, Any]:
    """``gpu_info``-shaped facts of this host, through the collection's NVML layer."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.factory import open_nvml

    with open_nvml(simulator=simulator) as backend:
        return gpu_state.read_host(backend)


def run_health_check(params: Dict[str, Any], run_command: Callable[..., Any],
                     exists: Callable[..., Any], now: float,
                     read_facts: Callable[..., Any] = read_gpu_facts) -> Dict[str, Any]:
    """Runner of the ``gpu_health_check`` module: facts + kernel log -> verdict."""
    facts = {"gpus": params["gpus"]} if params.get("gpus") is not None else read_facts(params.get("simulator"))
    text, source = read_kernel_log(params, run_command, exists)
    text = recent_log(text, now, int(params.get("xid_window") or 0))
    policy = {key: params.get(key) for key in DEFAULTS}
    verdict = evaluate_host(facts, params.get("expected_gpus"), text, policy)
    verdict["kernel_log_source"] = source
    return verdict
