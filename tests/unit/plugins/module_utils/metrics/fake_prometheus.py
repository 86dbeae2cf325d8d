# -*- coding: utf-8 -*-
"""A local http.server that answers like Prometheus' HTTP API with canned results (a test double of a third-party
HTTP API, for unit tests; the e2e uses the real Prometheus)."""
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakePrometheus(object):
    """``answer(path, params) -> (status, body)``; by default: buildinfo, and instant queries looked up in
    ``self.vectors`` by the query's first word pattern (``fn(query) -> [(labels, value)]``), and range queries in
    ``self.matrices`` (``fn(query, start, end, step) -> [(labels, [(t, value)])]``)."""

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
            result = [{"metric": dict(labels), "value": [1.0, str(v)]} for labels, v in self.vectors(q)]
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
