# -*- coding: utf-8 -*-
"""gpu_pod_history run in-process against the recorded Prometheus answers of test_pod_history: result, pod list,
check mode, a second run, errors."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils", "metrics"))

from ansible_collections.gpuops.k8s.plugins.modules import gpu_pod_history  # noqa: E402
from module_harness import Fail, call  # noqa: E402
from test_pod_history import T0, Recorded, recorded  # noqa: E402


def test_module_result_pod_list_check_mode_and_errors(tmp_path):
    fake = Recorded(recorded())
    try:
        path = tmp_path / "hist" / "pods.csv"
        args = {"prometheus_url": fake.url, "start": str(T0), "end": "2027-01-15T08:10:00Z", "step": "1m",
                "pods_csv": str(path)}
        check = call(gpu_pod_history, dict(args, _ansible_check_mode=True))
        assert check["changed"] is True and not path.exists()
        res = call(gpu_pod_history, args)
        assert res["changed"] is True and path.is_file() and res["pods_csv"]["path"] == str(path)
        assert [p["name"] for p in res["pods"]] == ["team-a/train-1", "team-a/infer-1", "team-b/job-2", "team-b/job-3"]
        assert res["window"]["seconds"] == 600 and res["pool_gpus"] == 16
        assert call(gpu_pod_history, args)["changed"] is False
        both = call(gpu_pod_history, dict(args, window="1h"), Fail)
        assert "mutually exclusive" in both["msg"]
        bodies = recorded()
        del bodies["info"]
        fake.bodies = bodies
        missing = call(gpu_pod_history, args, Fail)
        assert "no series of kube_pod_info" in missing["msg"] and missing["metric"] == "kube_pod_info"
    finally:
        fake.stop()
