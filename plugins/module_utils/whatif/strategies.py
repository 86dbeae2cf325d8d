# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the options of the strategies of the replay with departures: ``priorities`` (preemption.py),
``autoscaler`` (autoscaler.py), ``planned_percentile`` and ``sharing: hindsight`` (baselines.py),
``replan_scope`` and ``replan_drain`` (replanned.py). Every error names what is valid.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

REPLAN_SCOPES = ("gpu", "node")
REPLAN_DRAINS = ("requeue", "wait")
AUTOSCALER_KEYS = ("scale_up_delay_s", "scale_down_after_s", "min_nodes", "max_nodes")
AUTOSCALER_DEFAULTS: Dict[str, Any] = {"scale_up_delay_s": 300.0, "scale_down_after_s": 600.0, "min_nodes": 0,
                                       "max_nodes": None}


def check_autoscaler(value: Any) -> Optional[Dict[str, Any]]:
    """``autoscaler`` -> a dict with every key (``max_nodes`` None: the sample's node count), or None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise GpuOpsError("autoscaler must be a mapping with %s, not %r" % (", ".join(AUTOSCALER_KEYS), value),
                          valid=list(AUTOSCALER_KEYS))
    bad = sorted(str(k) for k in value if k not in AUTOSCALER_KEYS)
    if bad:
        raise GpuOpsError("autoscaler has unknown key(s) %s; valid: %s" % (", ".join(bad), ", ".join(AUTOSCALER_KEYS)),
                          valid=list(AUTOSCALER_KEYS))
    out = dict(AUTOSCALER_DEFAULTS)
    out.update((k, v) for k, v in value.items() if v is not None)
    for k in ("scale_up_delay_s", "scale_down_after_s"):
        v = out[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise GpuOpsError("autoscaler.%s must be a number of seconds >= 0, not %r" % (k, v), valid=">= 0")
        out[k] = float(v)
    for k in ("min_nodes", "max_nodes"):
        v = out[k]
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (k == "max_nodes" and v < 1):
            raise GpuOpsError("autoscaler.%s must be an integer >= %d, not %r" % (k, 1 if k == "max_nodes" else 0, v),
                              valid="integer")
    if out["max_nodes"] is not None and out["min_nodes"] > out["max_nodes"]:
        raise GpuOpsError("autoscaler.min_nodes (%s) must not exceed max_nodes (%s)" % (out["min_nodes"], out["max_nodes"]))
    return out


def check(p: Dict[str, Any], sharings: Iterable[str]) -> None:
    """Normalise the strategy options of ``p`` in place (runner.normalise calls it)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import preemption

    p["priorities"] = preemption.check_priorities(p["priorities"])
    p["autoscaler"] = check_autoscaler(p["autoscaler"])
    q = p["planned_percentile"]
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not math.isfinite(q) or not 0 < q <= 100:
        raise GpuOpsError("planned_percentile must be a percentile in (0, 100] (e.g. 95), not %r" % (q,),
                          valid="(0, 100]")
    p["planned_percentile"] = float(q)
    if p["replan_scope"] not in REPLAN_SCOPES:
        raise GpuOpsError("replan_scope must be one of %s, not %r" % (", ".join(REPLAN_SCOPES), p["replan_scope"]),
                          valid=list(REPLAN_SCOPES))
    if p["replan_drain"] not in REPLAN_DRAINS:
        raise GpuOpsError("replan_drain must be one of %s, not %r" % (", ".join(REPLAN_DRAINS), p["replan_drain"]),
                          valid=list(REPLAN_DRAINS))
    if p.get("capacity_search") is not None and p["autoscaler"] is not None and p["autoscaler"]["max_nodes"] is not None:
        raise GpuOpsError("autoscaler.max_nodes and capacity_search do not go together: the search sizes the pool the "
                          "autoscaler may bring up (max_nodes is the size searched)")
    if not p["departures"]:
        for key in ("priorities", "autoscaler"):
            if p[key] is not None:
                raise GpuOpsError("%s needs departures: true (pods that come and go over the trace's time)" % key)
