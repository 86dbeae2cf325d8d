# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health alerts (Alertmanager webhook alerts on dcgm-exporter metrics) as health-check evidence.

The event-driven path (extensions/eda/rulebooks/gpu_health_alerts.yml) hands one Alertmanager alert to
``playbooks/health.yml``; :func:`read_alert` validates it and turns it into the same kind of *problem* that
:func:`gpu_health.evaluate_host` produces, judged with the same policy (Xid table, thresholds). The verdict,
the hysteresis and the circuit breaker stay in :mod:`gpu_health` (``plan_actions`` takes the alerts), so an
alert never decides more than the scheduled health check would.

An alert is *dropped* (``accepted: False`` with a ``reason``) when it is not one Alertmanager alert, has no
node label, names a node that is not a host of the GPU pool inventory, is not a GPU health alert, carries a
value that is not a number, or when the policy says the condition needs nothing (an application Xid, an ECC
count or temperature at or under the threshold). Nothing is cordoned for a dropped alert.

Python 3.9 compatible.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.health.checks import validate_policy, xid_action

# The label of the health check an alert stands for (set by the dcgm_exporter role's PrometheusRule); alerts
# without it are recognised by name.
CHECK_LABEL = "gpuops_check"
ALERT_CHECKS = {
    "GpuXidError": "xid",
    "GpuEccUncorrectedErrors": "ecc_uncorrected",
    "GpuRetiredPagesPending": "retired_pages_pending",
    "GpuRowRemapFailure": "remapped_rows_failure",
    "GpuTemperatureHigh": "temperature",
    "GpuMissing": "gpus_missing",
}
CHECKS = tuple(sorted(set(ALERT_CHECKS.values())))
# Where the node name may be: our ServiceMonitor's relabeling (node), dcgm-exporter's own label (Hostname
# up to 4.5.x, hostname after the rename upstream).
NODE_LABELS = ("node", "Hostname", "hostname")
STATUSES = ("firing", "resolved")
_NODE_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# what each check calls for (as evaluate_host says for the same condition)
_CHECK_ACTIONS = {
    "ecc_uncorrected": "reset_gpu",
    "retired_pages_pending": "reset_gpu",
    "remapped_rows_failure": "reboot",
    "temperature": "drain",
    "gpus_missing": "reboot",
}


def _drop(reason, **extra):
    out = {"accepted": False, "reason": reason, "node": None, "host": None, "status": None, "check": None,
           "key": None, "problem": None}
    out.update(extra)
    return out


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        text = str(value).strip()
        return int(text) if re.match(r"^[+-]?\d+$", text) else float(text)
    except (TypeError, ValueError):
        return None


def _alert_value(alert, label):
    """The alert's value: a label (the Xid rule puts the Xid there), else annotations.value."""
    labels = alert.get("labels") or {}
    annotations = alert.get("annotations") or {}
    if label and labels.get(label) not in (None, ""):
        return labels.get(label)
    return annotations.get("value")


def read_alert(alert: Any, hosts: List[str], node_names: Optional[Dict[str, Any]] = None,
               policy: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Validate one Alertmanager alert and say what it means for the GPU pool.

    ``alert``: one entry of an Alertmanager webhook's ``alerts`` list (``status``, ``labels``, ``annotations``,
    ``startsAt``, ``fingerprint``). ``hosts``: the inventory hosts of the GPU pool. ``node_names``: host ->
    Kubernetes node name where they differ (``gpuops_k8s_node_name``). ``policy``: the gpu_health policy
    (``xid_actions``, ``xid_ignore``, ``xid_unknown_action``, ``ecc_error_threshold``,
    ``temperature_threshold_c``).

    Returns ``{"accepted", "reason", "node", "host", "status", "check", "key", "alertname", "problem"}``;
    ``problem`` (firing alerts only) has the shape of :func:`gpu_health.evaluate_host`'s problems plus
    ``source: alert``; ``key`` identifies the alert across its firing and resolved notifications.
    """
    policy = validate_policy(policy)
    if not isinstance(alert, dict):
        return _drop("malformed alert: expected one Alertmanager alert (a JSON object), got %s"
                     % type(alert).__name__)
    if "alerts" in alert and "labels" not in alert:
        return _drop("malformed alert: this is a whole Alertmanager notification; the rulebook hands over one "
                     "alert of its alerts list at a time")
    labels = alert.get("labels")
    if not isinstance(labels, dict):
        return _drop("malformed alert: no labels object")
    status = alert.get("status")
    if status not in STATUSES:
        return _drop("malformed alert: status must be firing or resolved, got %r" % (status,))
    alertname: Any = labels.get("alertname")
    node = None
    for name in NODE_LABELS:
        if labels.get(name):
            node = labels[name]
            break
    if node is None:
        return _drop("alert %s without a node: none of the labels %s is set"
                     % (alertname or "(no alertname)", ", ".join(NODE_LABELS)), status=status)
    if not isinstance(node, str) or not _NODE_RE.match(node):
        return _drop("malformed alert: node label %r is not a Kubernetes node name" % (node,), status=status)
    by_node = {}
    for host in hosts or []:
        by_node[(node_names or {}).get(host) or host] = host
    if node not in by_node:
        return _drop("unknown node %s: not a host of the GPU pool inventory (%d hosts)" % (node, len(by_node)),
                     node=node, status=status)
    host = by_node[node]
    check = labels.get(CHECK_LABEL) or ALERT_CHECKS.get(alertname)
    if check not in CHECKS:
        return _drop("alert %s on %s is not a GPU health alert (known: %s, or a %s label of %s)"
                     % (alertname, node, ", ".join(sorted(ALERT_CHECKS)), CHECK_LABEL, ", ".join(CHECKS)),
                     node=node, host=host, status=status)
    gpu = _number(labels.get("gpu"))
    gpu = gpu if isinstance(gpu, int) else None
    key = alert.get("fingerprint") or "%s/%s/gpu%s" % (alertname or check, check, "" if gpu is None else gpu)
    base = {"accepted": True, "node": node, "host": host, "status": status, "check": check, "key": str(key),
            "alertname": alertname, "problem": None}
    where = "GPU %s" % gpu if gpu is not None else "node %s" % node
    if status == "resolved":
        return dict(base, reason="%s resolved on %s (%s)" % (alertname or check, node, where))

    raw = _alert_value(alert, "xid" if check == "xid" else None)
    value = _number(raw) if raw is not None else None
    if raw is not None and value is None:
        return _drop("malformed alert: %s value %r is not a number" % (alertname or check, raw),
                     node=node, host=host, status=status)
    suffix = " (alert %s)" % alertname if alertname else " (alert)"
    if check == "xid":
        if not isinstance(value, int) or value <= 0:
            return _drop("malformed alert: %s on %s carries no Xid number (label xid or annotation value)"
                         % (alertname, node), node=node, host=host, status=status)
        action = xid_action(value, policy)
        if action == "ignore":
            return _drop("Xid %d on %s is ignored by the gpu_health policy (application error)" % (value, node),
                         node=node, host=host, status=status, check=check)
        detail = "%s: Xid %d%s" % (where, value, suffix)
    elif check in ("ecc_uncorrected", "temperature"):
        limit = policy["ecc_error_threshold"] if check == "ecc_uncorrected" else policy["temperature_threshold_c"]
        if value is None:
            return _drop("malformed alert: %s on %s carries no value (annotation value)" % (alertname, node),
                         node=node, host=host, status=status)
        if value <= limit:
            return _drop("%s on %s: %s is not over the gpu_health threshold %s" % (alertname, node, value, limit),
                         node=node, host=host, status=status, check=check)
        action = _CHECK_ACTIONS[check]
        if check == "ecc_uncorrected":
            detail = "%s: uncorrected ECC errors %s > %s%s" % (where, value, limit, suffix)
        else:
            detail = "%s: temperature %s C > %s C%s" % (where, value, limit, suffix)
    else:
        action = _CHECK_ACTIONS[check]
        detail = {
            "retired_pages_pending": "%s: retired pages pending%s",
            "remapped_rows_failure": "%s: row remapping failed%s",
            "gpus_missing": "%s: GPUs missing%s",
        }[check] % (where, suffix)
    problem = {"check": check, "detail": detail, "gpu": gpu, "action": action, "source": "alert",
               "alert": alertname, "key": str(key)}
    if value is not None:
        problem["value"] = value
    if alert.get("startsAt"):
        problem["since"] = str(alert["startsAt"])
    return dict(base, reason=detail, problem=problem)
