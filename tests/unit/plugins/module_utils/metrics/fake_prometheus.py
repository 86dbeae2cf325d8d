# -*- coding: utf-8 -*-
"""A local http.server that answers like Prometheus' HTTP API with canned results (a test double of a third-party
HTTP API, for unit tests; the e2e uses the real Prometheus)."""
import json
import math
import re
import threading
import time as _time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakePrometheus(object):
    """``answer(path, params) -> (status, body)``; by default: buildinfo, and instant queries answered by
    ``self.vectors``: ``fn(query) -> [(labels, value)]``, or ``fn(query, time)`` where it has ``wants_time``
    (``series_answer``: PromQL evaluated over stored series); range queries by ``self.matrices``
    (``fn(query, start, end, step) -> [(labels, [(t, value)])]``)."""

    def __init__(self, vectors=None, token=None, matrices=None):
        self.vectors = vectors or (lambda q: [])
        self.matrices = matrices or (lambda q, start, end, step: [])
        self.token = token
        self.requests = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                params = dict(urllib.parse.parse_qsl(u.query))
                owner.requests.append((u.path, params, self.headers.get("Authorization")))
                status, body, ctype = owner.answer(u.path, params, self.headers.get("Authorization"))
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, path, params, auth):
        js = "application/json"
        if self.token and auth != "Bearer " + self.token:
            return 401, {"status": "error", "errorType": "unauthorized", "error": "bad token"}, js
        if path == "/api/v1/status/buildinfo":
            return 200, {"status": "success", "data": {"version": "3.0.0", "revision": "x"}}, js
        if path == "/api/v1/query":
            q = params.get("query", "")
            if "(((" in q:
                return 400, {"status": "error", "errorType": "bad_data", "error": "parse error: unexpected"}, js
            at = float(params.get("time") or _time.time())
            rows = self.vectors(q, at) if getattr(self.vectors, "wants_time", False) else self.vectors(q)
            result = [{"metric": dict(labels), "value": [at, str(v)]} for labels, v in rows]
            return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}, js
        if path == "/api/v1/query_range":
            q = params.get("query", "")
            rows = self.matrices(q, float(params["start"]), float(params["end"]), params["step"])
            result = [{"metric": dict(labels), "values": [[t, str(v)] for t, v in values]} for labels, values in rows]
            return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}, js
        return 404, "404 page not found\n", "text/plain"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# --- a small PromQL evaluator over stored series (the forms gpu_rightsize sends), after Prometheus' documentation:
# a range selector M[W] at time t holds the samples with t - W < ts <= t; <fn>_over_time aggregates each series'
# samples on its own; quantile_over_time(phi, ...) is the phi-quantile of those samples with linear interpolation
# between ranks (rank phi * (n - 1)); "<agg> by (L) (...)" groups the series by the values of the labels L that they
# have (missing labels count as empty) and keeps only those labels; count(...) counts the series.

_DUR = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_AGG = {"max": max, "min": min, "sum": sum, "avg": lambda v: sum(v) / len(v), "count": len}


def _seconds(text):
    return sum(int(n) * _DUR[u] for n, u in re.findall(r"(\d+)([smhd])", text))


def quantile(phi, values):
    """PromQL's quantile over values: linear interpolation between the two nearest ranks (phi * (n - 1))."""
    v = sorted(values)
    if not v:
        return float("nan")
    if phi < 0:
        return float("-inf")
    if phi > 1:
        return float("inf")
    rank = phi * (len(v) - 1)
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] * (1 - (rank - lo)) + v[hi] * (rank - lo)


def _over_time(inner, series, at):
    """``[(labels without __name__, value)]`` of one ``fn_over_time(...)`` expression."""
    m = re.match(r"^min_over_time\(timestamp\((\w+)\)\[(\w+):(\w+)\]\)$", inner)
    if m:  # the earliest sample's timestamp in the window (what the subquery yields on the step grid)
        name, w, fn, phi = m.group(1), _seconds(m.group(2)), "first", None
    else:
        m = re.match(r"^(\w+)_over_time\((?:([0-9.]+),\s*)?(\w+)\[(\w+)\]\)$", inner)
        if not m:
            raise AssertionError("the fake Prometheus cannot evaluate %r" % inner)
        fn, phi, name, w = m.group(1), m.group(2), m.group(3), _seconds(m.group(4))
    out = []
    for s in series:
        if s["labels"].get("__name__") != name:
            continue
        pts = [(t, v) for t, v in s["samples"] if at - w < t <= at]
        if not pts:
            continue
        vals = [v for dummy, v in pts]
        value = {"max": lambda: max(vals), "min": lambda: min(vals), "count": lambda: len(vals),
                 "avg": lambda: sum(vals) / len(vals), "first": lambda: min(t for t, dummy in pts),
                 "quantile": lambda: quantile(float(phi), vals)}[fn]()
        out.append((dict((k, v) for k, v in s["labels"].items() if k != "__name__"), value))
    return out


def evaluate(query, series, at):
    """``[(labels, value)]`` of ``query`` at time ``at`` over ``series`` = ``[{labels (with __name__), samples:
    [(ts, value)]}]``."""
    m = re.match(r"^(max|min|sum|avg|count)(?: by \(([^)]*)\))? \((.*)\)$", query) or \
        re.match(r"^(count)()\((.*)\)$", query)
    if not m:
        return _over_time(query, series, at)
    agg, by, inner = m.group(1), [x.strip() for x in (m.group(2) or "").split(",") if x.strip()], m.group(3)
    groups = {}
    for labels, value in _over_time(inner, series, at):
        key = tuple((k, labels[k]) for k in by if labels.get(k, "") != "")
        groups.setdefault(key, []).append(value)
    return [(dict(k), _AGG[agg](vals)) for k, vals in groups.items()]


def series_answer(series):
    """A ``vectors`` callback for FakePrometheus that evaluates each query over ``series`` at the query's time."""
    def vectors(query, at):
        return evaluate(query, series, at)
    vectors.wants_time = True
    return vectors
