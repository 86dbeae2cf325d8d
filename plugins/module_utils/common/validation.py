# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input validation helpers every layer shares: errors that name the valid keys and values (with a
"did you mean"), whole numbers within bounds, Kubernetes quantities and name rules.

Pure Python, Python 3.9 compatible. Each helper raises ``GpuOpsError`` before anything changes.
"""

from __future__ import annotations

from typing import Any, Collection, Dict, Iterable, Mapping, Optional, Union

import difflib
import math
import re

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

# Kubernetes name rules
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CONFIGMAP_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")


def fmt(values: Iterable[Any]) -> str:
    """``a, b, c``: values as an error message lists them."""
    return ", ".join(str(v) for v in values)


def closest(value: Any, valid: Iterable[Any]) -> str:
    """`` (did you mean x?)`` when ``value`` is close to one of ``valid``, else ``""``."""
    near = difflib.get_close_matches(str(value), [str(v) for v in valid], n=3, cutoff=0.6)
    return (" (did you mean %s?)" % " or ".join(near)) if near else ""


def check_keys(obj: Optional[Mapping[str, Any]], valid: Collection[str], where: str) -> Dict[str, Any]:
    """``obj`` (a mapping, ``{}`` for None) when it has only ``valid`` keys; else the error names them."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise GpuOpsError("%s must be a mapping, got %s" % (where, type(obj).__name__))
    unknown = sorted(k for k in obj if k not in valid)
    if unknown:
        raise GpuOpsError(
            "%s: unknown key(s) %s%s; valid keys: %s" % (where, fmt(unknown), closest(unknown[0], valid), fmt(valid)),
            valid_keys=list(valid),
        )
    return obj


def choice(value: Any, valid: Collection[Any], where: str) -> Any:
    """``value`` when it is one of ``valid``; else the error names them."""
    if value not in valid:
        raise GpuOpsError("%s: %r is not valid%s; valid values: %s" % (where, value, closest(value, valid), fmt(valid)),
                          valid_values=list(valid))
    return value


def number(value: Any, where: str, minimum: Optional[float] = None, maximum: Optional[float] = None,
           integer: bool = False, strict_min: bool = False) -> Union[int, float]:
    """``value`` as a finite float (or an int with ``integer``; not a bool, not a fraction), within ``minimum``
    (exclusive with ``strict_min``) and ``maximum`` when given; the error names ``where`` and the bound."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or value is None:
        raise GpuOpsError("%s must be %s, got %r" % (where, kind, value))
    try:
        if not integer:
            num = float(value)
        elif isinstance(value, float):
            num = int(value)
            if num != value:
                raise ValueError(value)
        else:
            num = int(str(value).strip())
    except (TypeError, ValueError, OverflowError):
        raise GpuOpsError("%s must be %s, got %r" % (where, kind, value))
    if not integer and (math.isnan(num) or math.isinf(num)):
        raise GpuOpsError("%s must be a finite number, got %r" % (where, value))
    shown = num if integer else value
    if minimum is not None and (num < minimum or (strict_min and num <= minimum)):
        raise GpuOpsError("%s must be %s %s, got %r" % (where, ">" if strict_min else ">=", minimum, shown))
    if maximum is not None and num > maximum:
        raise GpuOpsError("%s must be <= %s, got %r" % (where, maximum, shown))
    return num


def integer(value: Any, where: str, minimum: Optional[int] = None, maximum: Optional[int] = None) -> int:
    """``value`` as an int (not a bool), within ``minimum`` and ``maximum`` when given."""
    return int(number(value, where, minimum=minimum, maximum=maximum, integer=True))


def quantity_int(value: Any, where: str) -> int:
    """GPU quantities are whole numbers (extended resources cannot be fractional)."""
    text = str(value).strip()
    if text.endswith("k") and text[:-1].isdigit():
        return int(text[:-1]) * 1000
    if not re.match(r"^\d+$", text):
        raise GpuOpsError("%s: %r is not a whole number; GPU and MIG quantities are integers" % (where, value))
    return int(text)


_QTY_RE = re.compile(r"^(\d+(\.\d+)?|\.\d+)(m|k|M|G|Ki|Mi|Gi)?$")
_QTY_MULT = {None: 1.0, "m": 0.001, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3}


def parse_quantity(value: Any, where: str) -> float:
    """A Kubernetes quantity (``700m``, ``0.7``, ``2Gi``) as a float."""
    text = str(value).strip()
    m = _QTY_RE.match(text)
    if not m:
        raise GpuOpsError("%s: %r is not a Kubernetes quantity (for example 700m, 0.7, 20, 250)" % (where, value))
    return float(m.group(1)) * _QTY_MULT[m.group(3)]
