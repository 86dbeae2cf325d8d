"""`make demo` as a new user runs it: hack/demo.py starts its own control plane, plays
playbooks/lab/demo.yml (the collection's playbooks, act by act) and stops everything it started.

The acts' summaries (<dir>/acts/act-<n>.json) are written by the playbook from what the modules and
the API server returned; this test checks them against what the lab must show, then that nothing is
left running and that `--clean` removes the outputs.
"""
import json
import os
import subprocess
import sys

from lib import gpu_nodes

TOP = gpu_nodes.TOP
HOSTS = ("dgx-a100-01", "hgx-h100-01", "hgx-h200-01", "l40s-01")


def _act(demo_dir, n):
    with open(os.path.join(demo_dir, "acts", "act-%d.json" % n)) as f:
        return json.load(f)


def _pids_alive(state_dir):
    path = os.path.join(state_dir, "state.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        state = json.load(f)
    pids = list(state.get("pids", {}).values()) + list(state.get("helpers", {}).values())
    return [p for p in pids if os.path.exists("/proc/%d" % p)]


def _procs_using(path):
    """Processes whose command line names ``path``: the control plane, the simulated device plugin and the
    metric path (exporter, Prometheus, stand-in) all take files under the demo directory as arguments."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(path in a for a in argv):
            found.append((int(pid), " ".join(argv)[:200]))
    return found


def test_demo_tells_the_whole_story_and_cleans_up(tmp_path):
    demo_dir = str(tmp_path / "demo")
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    proc = subprocess.run([sys.executable, os.path.join(TOP, "hack", "demo.py"), "--dir", demo_dir], cwd=TOP, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900,
                          check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-8000:]
    for n in range(1, 8):
        assert "act %d of 7" % n in out, out[-4000:]
    assert "demo finished" in out

    assert _act(demo_dir, 1)["hosts"] == {"dgx-a100-01": 8, "hgx-h100-01": 8, "hgx-h200-01": 8, "l40s-01": 4}

    act3 = _act(demo_dir, 3)
    assert act3["layouts"]["dgx-a100-01"] == [["1g.10gb"] * 7] * 8
    assert act3["layouts"]["l40s-01"] == [[]] * 4
    # the rolling reconfigure traded GPU 4's three 1g.10gb for a 3g.40gb; the busy 4g.40gb stayed
    assert sorted(act3["h100_gpu4_after"]) == ["3g.40gb", "4g.40gb"]
    assert act3["h100_gpu4_processes"] == [31337]

    alloc = _act(demo_dir, 4)["allocatable"]
    assert alloc["dgx-a100-01"]["nvidia.com/mig-1g.10gb"] == "56"
    assert alloc["l40s-01"]["nvidia.com/gpu"] == "16"  # 4 GPUs time-sliced 4 ways
    assert alloc["hgx-h200-01"]["nvidia.com/mig-4g.71gb"] == "4"

    act5 = _act(demo_dir, 5)
    assert act5["running"] == {"inference": 12, "research": 8}
    assert act5["nodes"]["research"] == ["l40s-01"]
    assert "exceeded quota" in act5["over_quota"] and "requests.nvidia.com/gpu" in act5["over_quota"]
    assert act5["critical_node"] == "hgx-h200-01"
    assert len(act5["batch_left"]) == 3
    assert len(act5["preempted_events"]) == 1 and act5["preempted_events"][0] not in act5["batch_left"]
    # the HPA scaled the model server on the simulated GPU metric, onto free MIG slices
    before, after = act5["hpa_replicas"]
    assert before == 1 and after > before, act5
    assert after == 4  # the demo HPA's maximum
    assert act5["hpa_rescales"] and all("above target" in m for m in act5["hpa_rescales"]), act5["hpa_rescales"]
    assert act5["hpa_target"] == "700m"
    assert len(act5["hpa_slices"]) == after and all(s.startswith("nvidia.com/mig-1g.10gb/") for s in act5["hpa_slices"])
    assert len(act5["hpa_nodes"]) == after and all(n in HOSTS for n in act5["hpa_nodes"])
    assert "HPA llm-server (gpu_autoscaling): replicas 1 -> %d (gpu_engine_active" % after in out
    assert "no metrics pipeline" not in out
    assert act5["hpa_scale_down"] == [after, 1], act5
    assert 0 < act5["hpa_scale_up_s"] < 120 and 0 < act5["hpa_scale_down_s"] < 60, act5

    act6 = _act(demo_dir, 6)
    assert act6["cordoned"] == ["hgx-h200-01"]
    assert len(act6["reasons"]) == 1 and "ECC" in act6["reasons"][0], act6
    assert act6["cordoned_after_recovery"] is False

    act7 = _act(demo_dir, 7)
    pct = act7["allocated_pct"]
    assert set(pct) == set("%s/%s" % (s, p) for s in ("exclusive", "fractional") for p in ("random", "best-fit", "fgd"))
    assert all(0 < v <= 100 for v in pct.values()), pct
    if act7["pods_csv"].endswith("openb_pod_list_default.csv"):  # the whole trace: the paper's order and levels
        assert pct["fractional/fgd"] > pct["fractional/best-fit"] > pct["fractional/random"], pct
        assert abs(pct["fractional/fgd"] - 95.2) < 1.5 and abs(pct["fractional/random"] - 86.3) < 1.5, pct
    assert os.path.exists(act7["report"])

    # nothing left running, and --clean removes what the demo wrote
    assert _pids_alive(os.path.join(demo_dir, "cluster")) == []
    assert _procs_using(demo_dir) == []
    subprocess.run([sys.executable, os.path.join(TOP, "hack", "demo.py"), "--clean", "--dir", demo_dir], cwd=TOP,
                   check=True, timeout=120)
    assert not os.path.exists(demo_dir)
