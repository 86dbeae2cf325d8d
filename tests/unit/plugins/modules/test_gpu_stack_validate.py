"""The gpu_stack_validate module end to end (argument spec, warnings, fail_json details)."""
import json
import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE = os.path.join(TOP, "plugins", "modules", "gpu_stack_validate.py")


def _run(tmp_path, args):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.path.join(TOP, ".build", "collections"))
    proc = subprocess.run([sys.executable, MODULE, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env)
    return json.loads(proc.stdout)


def test_device_plugin_ok(tmp_path):
    res = _run(tmp_path, {"component": "device_plugin", "configs": {"default": {}, "ts": {
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2, "devices": "all"}]}}}}})
    assert res["changed"] is False
    assert res["device_plugin"]["summary"]["ts"]["sharing"] == "time-slicing"
    assert any("'devices' is ignored" in json.dumps(w) for w in res["warnings"])


def test_device_plugin_bad_strategy_fails_with_valid_values(tmp_path):
    res = _run(tmp_path, {"component": "device_plugin", "configs": {"default": {"flags": {"migStrategy": "all"}}}})
    assert res["failed"] is True
    assert "valid values: none, single, mixed" in res["msg"]
    assert res["valid_values"] == ["none", "single", "mixed"]


def test_required_if(tmp_path):
    res = _run(tmp_path, {"component": "autoscaling"})
    assert res["failed"] is True and "hpas" in res["msg"]


def test_tenancy_capacity_fail(tmp_path):
    res = _run(tmp_path, {"component": "tenancy",
                          "tenants": [{"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 3}}}],
                          "nodes": [{"metadata": {"name": "n"}, "status": {"allocatable": {
                              "nvidia.com/mig-1g.10gb": "2"}}}]})
    assert res["failed"] is True
    assert "nvidia.com/mig-1g.10gb: tenant quotas 3 > allocatable 2" in res["msg"]
    assert res["capacity"]["nvidia.com/mig-1g.10gb"]["overcommitted"] is True
