# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paired differences over seeds against a named baseline, with 95 % confidence intervals (``paired`` in the
result of a replay with departures or a capacity search).

For a field f, a run r and the baseline b replayed on the same seeds (same arrival sequence, same node sample):
d_s = f(r, s) - f(b, s) per seed s; the mean of the d_s, their standard deviation and the 95 % interval
``mean +- t(0.975, n - 1) sd / sqrt(n)`` (Student's t, n seeds). A difference whose interval holds 0 is reported
as ``none`` (inside the noise); ``higher`` / ``lower`` otherwise. With one seed there is no interval.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import math
from typing import Any, Container, Dict, Iterable, Mapping, Optional, Sequence, cast

# Student's t, two-sided 95 % (0.975 quantile), by degrees of freedom 1..30; above: 1.96 (normal)
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def percentile(values: Iterable[float], q: float) -> Optional[float]:
    """The ``q``-th percentile (0..100) by linear interpolation between the closest ranks, None for no values."""
    vals = sorted(values)
    if not vals:
        return None
    pos = (len(vals) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def t975(df: int) -> Optional[float]:
    if df < 1:
        return None
    return T975[df - 1] if df <= len(T975) else 1.96


def mean_ci(values: Iterable[Optional[float]]) -> Dict[str, Any]:
    """``{mean, sd, ci95: [low, high], n}`` of ``values`` (None values left out); ci95 None under two values."""
    vals = [float(v) for v in values if v is not None]
    n = len(vals)
    if not n:
        return {"mean": None, "sd": None, "ci95": None, "n": 0}
    m = sum(vals) / n
    if n < 2:
        return {"mean": round(m, 4), "sd": None, "ci95": None, "n": n}
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (n - 1))
    half = cast(float, t975(n - 1)) * sd / math.sqrt(n)  # n >= 2 here: df >= 1
    return {"mean": round(m, 4), "sd": round(sd, 4), "ci95": [round(m - half, 4), round(m + half, 4)], "n": n}


def verdict(ci: Optional[Mapping[str, Any]]) -> Optional[str]:
    if not ci or ci["ci95"] is None:
        return None
    lo, hi = ci["ci95"]
    if lo <= 0 <= hi:
        return "none"
    return "higher" if lo > 0 else "lower"


def paired(per_run: Mapping[str, Sequence[Mapping[str, Any]]], baseline: str, fields: Sequence[str],
           relative: Container[str] = ()) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """``{run label: {field: {mean, sd, ci95, n, verdict}}}`` of the paired differences against ``baseline``.

    ``per_run``: ``{label: [per-seed dict]}`` (the same seeds, in the same order, for every label); ``relative``:
    fields also given as a relative difference in % of the baseline (``<field>_rel_pct``).
    """
    base = per_run[baseline]
    out = {}
    for label, seeds in per_run.items():
        if label == baseline:
            continue
        row = {}
        for f in fields:
            diffs = [None if (a.get(f) is None or b.get(f) is None) else a[f] - b[f] for a, b in zip(seeds, base)]
            ci = mean_ci(diffs)
            ci["verdict"] = verdict(ci)
            row[f] = ci
            if f in relative:
                rel = [None if (a.get(f) is None or not b.get(f)) else 100.0 * (a[f] - b[f]) / b[f]
                       for a, b in zip(seeds, base)]
                ci = mean_ci(rel)
                ci["verdict"] = verdict(ci)
                row[f + "_rel_pct"] = ci
        out[label] = row
    return out


def fmt(ci: Optional[Mapping[str, Any]], pattern: str = "%+.2f") -> str:
    """``+1.23 [0.50, 1.96]`` (or ``+1.23`` without an interval, ``n/a`` without a value)."""
    if not ci or ci["mean"] is None:
        return "n/a"
    if ci["ci95"] is None:
        return pattern % ci["mean"]
    return (pattern + " [" + pattern + ", " + pattern + "]") % (ci["mean"], ci["ci95"][0], ci["ci95"][1])
