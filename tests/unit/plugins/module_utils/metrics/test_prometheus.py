# -*- coding: utf-8 -*-
"""metrics/prometheus.py against a local http.server serving canned Prometheus answers."""
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import prometheus as prom

from fake_prometheus import FakePrometheus


@pytest.fixture
def fake():
    f = FakePrometheus(vectors=lambda q: [({"namespace": "a", "pod": "p"}, 42.5)], token="s3cret")
    yield f
    f.stop()


def test_query_and_buildinfo_with_bearer_token(fake):
    c = prom.Prometheus(fake.url, token="s3cret", timeout_s=5)
    assert c.buildinfo()["version"] == "3.0.0"
    assert c.query("up", time=10) == [{"metric": {"namespace": "a", "pod": "p"}, "value": 42.5}]
    path, params, auth = fake.requests[-1]
    assert path == "/api/v1/query" and params == {"query": "up", "time": "10.000"} and auth == "Bearer s3cret"


def test_prometheus_error_text_is_passed_on(fake):
    with pytest.raises(GpuOpsError) as e:
        prom.Prometheus(fake.url, token="wrong").query("up")
    assert "HTTP 401" in e.value.msg and "bad token" in e.value.msg and fake.url in e.value.msg
    with pytest.raises(GpuOpsError) as e:
        prom.Prometheus(fake.url, token="s3cret").query("sum(((")
    assert "HTTP 400" in e.value.msg and "bad_data: parse error" in e.value.msg


def test_connection_refused_names_the_url():
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:%d" % s.getsockname()[1]
    with pytest.raises(GpuOpsError) as e:
        prom.Prometheus(url, timeout_s=3).query("up")
    assert url in e.value.msg and "connection refused" in e.value.msg and e.value.details["url"] == url


def test_dns_failure_and_bad_url():
    with pytest.raises(GpuOpsError) as e:
        prom.Prometheus("http://no-such-host.invalid:9090", timeout_s=5).query("up")
    assert "does not resolve" in e.value.msg and "no-such-host.invalid" in e.value.msg
    with pytest.raises(GpuOpsError) as e:
        prom.Prometheus("prometheus:9090")
    assert "is not an http:// or https:// URL" in e.value.msg


def test_wrong_url_is_not_a_prometheus_api(fake):
    with pytest.raises(GpuOpsError) as e:
        prom.Prometheus(fake.url + "/grafana", token="s3cret").query("up")
    assert "HTTP 404" in e.value.msg and "not a Prometheus API" in e.value.msg


class _Html(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        data = b"<html><body>Grafana</body></html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_a_200_that_is_not_prometheus_json():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Html)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        with pytest.raises(GpuOpsError) as e:
            prom.Prometheus(url).buildinfo()
        assert "not Prometheus' JSON" in e.value.msg and "Grafana" in e.value.msg and url in e.value.msg
    finally:
        srv.shutdown()
        srv.server_close()


def test_durations():
    assert prom.duration_s("7d", "w") == 7 * 86400
    assert prom.duration_s("90s", "w") == 90 and prom.duration_s(30, "w") == 30
    assert prom.prom_duration(86400) == "86400s"
    with pytest.raises(GpuOpsError) as e:
        prom.duration_s("a week", "window")
    assert "window 'a week' is not a duration" in e.value.msg and "7d" in e.value.msg
