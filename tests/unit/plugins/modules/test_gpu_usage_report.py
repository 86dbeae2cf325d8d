# -*- coding: utf-8 -*-
"""gpu_usage_report run in-process against a local canned Prometheus: result, report, check mode, errors."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils", "metrics"))

from ansible_collections.gpuops.k8s.plugins.modules import gpu_usage_report  # noqa: E402
from fake_prometheus import FakePrometheus  # noqa: E402
from module_harness import Fail, call  # noqa: E402
from test_usage import T0, matrices, two_tenants  # noqa: E402


def test_module_result_report_and_errors(tmp_path):
    fake = FakePrometheus(matrices=matrices(two_tenants()))
    try:
        out = str(tmp_path / "usage")
        args = {"prometheus_url": fake.url, "start": str(int(T0)), "end": "2027-01-15T11:00:00Z", "step": "15m",
                "report": out}
        assert T0 + 3 * 3600 == 1800010800  # 2027-01-15T11:00:00Z, the same window as test_usage's
        check = call(gpu_usage_report, dict(args, _ansible_check_mode=True, _ansible_diff=True))
        assert check["changed"] is True and not os.path.exists(out) and "team-b" in check["diff"]["after"]
        res = call(gpu_usage_report, args)
        assert res["changed"] is True and [t["name"] for t in res["tenants"]] == ["team-a", "team-b"]
        assert res["tenants"][0]["allocated_gpu_hours"] == 2.0 and res["idle_holders"][0]["namespace"] == "team-b"
        assert os.path.isfile(os.path.join(out, "usage-report.md"))
        assert call(gpu_usage_report, args)["changed"] is False
        both = call(gpu_usage_report, dict(args, window="1h"), Fail)
        assert "mutually exclusive" in both["msg"]
        bad = call(gpu_usage_report, dict(args, prometheus_url="http://127.0.0.1:1"), Fail)
        assert "connection refused" in bad["msg"]
        data = two_tenants()
        del data["DCGM_FI_DEV_FB_USED"]
        fake.matrices = matrices(data)
        missing = call(gpu_usage_report, args, Fail)
        assert "no series of DCGM_FI_DEV_FB_USED" in missing["msg"] and missing["metric"] == "DCGM_FI_DEV_FB_USED"
    finally:
        fake.stop()
