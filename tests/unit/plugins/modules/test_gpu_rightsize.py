# -*- coding: utf-8 -*-
"""gpu_rightsize run in-process against a local canned Prometheus: result, demand_out, check mode, errors."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils", "metrics"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils", "plan"))

from ansible_collections.gpuops.k8s.plugins.modules import gpu_rightsize  # noqa: E402
from fake_prometheus import FakePrometheus  # noqa: E402
from module_harness import Fail, call  # noqa: E402
from test_rightsize import _item, _plan, _pods, series_vectors  # noqa: E402


def test_module_result_file_and_errors(tmp_path):
    fake = FakePrometheus(vectors=series_vectors(_pods([7.0] * 95 + [9.0] * 5, first=time.time() - 48 * 3600)))
    try:
        out_file = str(tmp_path / "demand.yml")
        args = {"prometheus_url": fake.url, "demand": [_item()], "plan": _plan("a100_80gb", "3g.40gb"),
                "demand_out": out_file, "min_history": "1m"}
        check = call(gpu_rightsize, dict(args, _ansible_check_mode=True, _ansible_diff=True))
        assert check["changed"] is True and not os.path.exists(out_file) and check["diff"]["after"]
        res = call(gpu_rightsize, args)
        assert res["changed"] is True and res["items"][0]["after"]["profile"] == "1g.10gb"
        assert [c["field"] for c in res["changes"]] == ["memory_gb"] and res["demand"][0]["memory_gb"] == 9.0
        again = call(gpu_rightsize, dict([(k, v) for k, v in args.items() if k != "demand"], demand_file=out_file))
        assert again["changed"] is False  # the file's demand, right-sized again, is the same file
        bad = call(gpu_rightsize, dict(args, prometheus_url="http://127.0.0.1:1", demand_out=out_file + ".x"), Fail)
        assert "connection refused" in bad["msg"] and not os.path.exists(out_file + ".x")
        fake.vectors = series_vectors([])
        missing = call(gpu_rightsize, args, Fail)
        assert "no series of DCGM_FI_DEV_FB_USED" in missing["msg"]
    finally:
        fake.stop()
