# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small client of Prometheus' HTTP API (``/api/v1/query``, ``/api/v1/query_range``,
``/api/v1/status/buildinfo``) over urllib, for the controller side (gpu_rightsize, gpu_usage_report).

Bearer token, CA file or ``validate_certs: false``, a timeout. Every failure is a GpuOpsError that names the URL
and what went wrong: connection refused, a name that does not resolve, an HTTP status with Prometheus' own
``error`` text, a body that is not Prometheus' JSON, or "not a Prometheus API" when the URL answers something else.
"""
from __future__ import annotations

import json
import os
import re
import socket
import ssl
import urllib.error
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional

from ansible.module_utils.urls import SSLValidationError, open_url
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def connection_options() -> Dict[str, Dict[str, Any]]:
    """The argument spec of the connection options (doc fragment gpuops.k8s.prometheus) of the modules that read
    Prometheus (gpu_rightsize, gpu_usage_report), a new dict each call; ``Prometheus(...)`` takes their values."""
    return dict(
        prometheus_url=dict(type="str", required=True),
        prometheus_token=dict(type="str", no_log=True),
        validate_certs=dict(type="bool", default=True),
        ca_path=dict(type="path"),
        timeout_s=dict(type="float", default=30),
    )


def window_options() -> Dict[str, Dict[str, Any]]:
    """The argument spec of the window options (``window`` or ``start``, ``end``, ``step``) of the modules that read a
    window of range queries (gpu_usage_report, gpu_pod_history), a new dict each call."""
    return dict(
        window=dict(type="str"),
        start=dict(type="str"),
        end=dict(type="str"),
        step=dict(type="str", default="5m"),
    )


def duration_s(value: Any, where: str) -> float:
    """Seconds of a Prometheus duration (``30s``, ``15m``, ``24h``, ``7d``) or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value <= 0:
            raise GpuOpsError("%s must be positive, got %r" % (where, value))
        return float(value)
    m = _DURATION_RE.match(str(value).strip())
    if not m or float(m.group(1)) <= 0:
        raise GpuOpsError("%s %r is not a duration; valid: a positive number followed by one of ms, s, m, h, d, w, y "
                          "(e.g. 30s, 15m, 24h, 7d)" % (where, value))
    return float(m.group(1)) * _UNITS[m.group(2)]


def prom_duration(seconds: float) -> str:
    """A Prometheus duration string for a number of seconds (whole seconds)."""
    return "%ds" % max(1, int(round(seconds)))


class Prometheus(object):
    """``Prometheus(url, token=None, ca_path=None, validate_certs=True, timeout_s=30)``."""

    def __init__(self, url: str, token: Optional[str] = None, ca_path: Any = None, validate_certs: bool = True,
                 timeout_s: float = 30.0) -> None:
        url = str(url or "").strip()
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise GpuOpsError("prometheus_url %r is not an http:// or https:// URL" % url, url=url)
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = float(timeout_s)
        self.validate_certs = bool(validate_certs)
        self.ca_path = ca_path or None
        if self.ca_path and not os.path.isfile(self.ca_path):
            raise GpuOpsError("ca_path %s is not a file" % self.ca_path, url=self.url)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "Prometheus":
        """The client of a module's connection options (``connection_options()``)."""
        return cls(params["prometheus_url"], token=params.get("prometheus_token"), ca_path=params.get("ca_path"),
                   validate_certs=params.get("validate_certs", True), timeout_s=params.get("timeout_s") or 30)

    def _get(self, path, params=None):
        full = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer %s" % self.token
        where = "Prometheus at %s (%s)" % (self.url, path)
        try:
            r = open_url(full, headers=headers, validate_certs=self.validate_certs, ca_path=self.ca_path,
                         timeout=self.timeout_s, follow_redirects="safe")
            status, body = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        except SSLValidationError as e:
            raise GpuOpsError("%s: TLS failed (%s; set ca_path, or validate_certs: false)" % (where, e), url=self.url)
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ConnectionRefusedError):
                text = "connection refused (is Prometheus listening there?)"
            elif isinstance(reason, socket.gaierror):
                text = "the host name does not resolve (%s)" % reason
            elif isinstance(reason, ssl.SSLError):
                text = "TLS failed (%s; set ca_path, or validate_certs: false)" % reason
            elif isinstance(reason, socket.timeout):
                text = "no answer within %ss (timeout_s)" % self.timeout_s
            else:
                text = str(reason)
            raise GpuOpsError("%s: %s" % (where, text), url=self.url)
        except socket.timeout:
            raise GpuOpsError("%s: no answer within %ss (timeout_s)" % (where, self.timeout_s), url=self.url)
        except (OSError, ValueError) as e:
            raise GpuOpsError("%s: %s" % (where, e), url=self.url)
        try:
            doc = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            doc = None
        if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
            if status == 200:
                raise GpuOpsError("%s: the answer is not Prometheus' JSON (%s); this is not a Prometheus API - give the "
                                  "server's base URL, e.g. http://prometheus:9090" % (where, _snippet(body)),
                                  url=self.url, http_status=status)
            raise GpuOpsError("%s: HTTP %d (%s); this is not a Prometheus API, or not its base URL"
                              % (where, status, _snippet(body)), url=self.url, http_status=status)
        if doc["status"] == "error" or status != 200:
            raise GpuOpsError("%s: HTTP %d, Prometheus says: %s: %s"
                              % (where, status, doc.get("errorType", "error"), doc.get("error", "")),
                              url=self.url, http_status=status)
        return doc.get("data")

    def buildinfo(self) -> Dict[str, Any]:
        """``{version, revision, ...}``: checks that the URL is a Prometheus API."""
        data = self._get("/api/v1/status/buildinfo")
        if not isinstance(data, dict) or "version" not in data:
            raise GpuOpsError("Prometheus at %s: /api/v1/status/buildinfo has no version; this is not a Prometheus API"
                              % self.url, url=self.url)
        return data

    def query(self, promql: str, time: Optional[float] = None) -> List[Dict[str, Any]]:
        """An instant query: ``[{metric: {labels}, value: float}]`` (vector results)."""
        params = {"query": promql}
        if time is not None:
            params["time"] = "%.3f" % time
        data = self._get("/api/v1/query", params)
        return [{"metric": s.get("metric") or {}, "value": _float(s.get("value", [0, "NaN"])[1])}
                for s in _result(data, "vector", self.url)]

    def query_range(self, promql: str, start: float, end: float, step: float) -> List[Dict[str, Any]]:
        """A range query: ``[{metric: {labels}, values: [(t, float)]}]``."""
        params = {"query": promql, "start": "%.3f" % start, "end": "%.3f" % end, "step": str(step)}
        data = self._get("/api/v1/query_range", params)
        return [{"metric": s.get("metric") or {}, "values": [(float(t), _float(v)) for t, v in s.get("values") or []]}
                for s in _result(data, "matrix", self.url)]


def _result(data, kind, url):
    if not isinstance(data, dict) or data.get("resultType") != kind or not isinstance(data.get("result"), list):
        raise GpuOpsError("Prometheus at %s: expected a %s result, got %s" % (url, kind, _snippet(json.dumps(data))),
                          url=url)
    return data["result"]


def _float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _snippet(body, n=120):
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    body = " ".join(str(body).split())
    return repr(body[:n] + ("..." if len(body) > n else ""))
