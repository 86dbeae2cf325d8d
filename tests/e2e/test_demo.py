"""`make demo` as a new user runs it: hack/demo.py starts its own control plane, plays
playbooks/lab/demo.yml (the collection's playbooks, act by act) and stops everything it started.

The acts' summaries (<dir>/acts/act-<n>.json) are written by the playbook from what the modules and
the API server returned; this test checks them against what the lab must show, then that nothing is
left running and that `--clean` removes the outputs.
"""
import json
import os
import re
import subprocess
import sys

from lib import gpu_nodes

TOP = gpu_nodes.TOP


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
    for n in range(1, 9):
        assert "act %d of 8" % n in out, out[-4000:]
    assert "demo finished" in out

    assert _act(demo_dir, 1)["hosts"] == {"dgx-a100-01": 8, "hgx-h100-01": 8, "hgx-h200-01": 8, "l40s-01": 4}

    # act 3 applied act 2's plan: its MIG layouts (rolled out by mig_reconfigure.yml), device plugin configs, quotas
    plan = _act(demo_dir, 2)
    configs = dict((n["node"], n) for n in plan["node_configs"])
    act3 = _act(demo_dir, 3)
    assert act3["same_plan"] is True
    for node, labels in act3["rollout"].items():
        assert labels["nvidia.com/device-plugin.config"] == configs[node]["device_plugin_config"], (node, labels)
        if configs[node]["mig_config_changed"]:
            assert labels["nvidia.com/mig.config"] == configs[node]["mig_config"], (node, labels)
            assert labels["nvidia.com/mig.config.state"] == "success", (node, labels)
    mig = plan["mig_parted_config"]["mig-configs"]
    for node, cfg in configs.items():
        if not cfg["mig_config"]:
            continue
        for entry in mig[cfg["mig_config"]]:
            gpus = range(len(act3["layouts"][node])) if entry["devices"] == "all" else entry["devices"]
            want = sorted(p for p, n in (entry.get("mig-devices") or {}).items() for dummy in range(n))
            for gpu in gpus:
                assert sorted(act3["layouts"][node][gpu]) == want, (node, gpu, act3["layouts"][node][gpu], want)
    assert act3["layouts"]["l40s-01"] == [[]] * 4
    # the model server on a whole GPU that the plan leaves alone kept running through its node's rollout
    assert configs[act3["keep"]["node"]]["mig_config_changed"] and act3["keep"]["slice"] == "whole"
    assert act3["keep_processes"] == [31337]

    # act 4: the nodes advertise the plan's slices; the quotas are the plan's
    act4 = _act(demo_dir, 4)
    planned = {}
    for p in plan["placements"]:
        if p["slice"] not in ("whole", "shared"):
            key = (p["node"], "nvidia.com/mig-" + p["slice"])
            planned[key] = planned.get(key, 0) + p["replicas"]
    for (node, resource), n in planned.items():
        assert int(act4["allocatable"][node][resource]) >= n, (node, resource, act4["allocatable"][node])
    for tenant, quota in plan["quotas"].items():
        for key, value in quota["hard"].items():
            assert str(act4["quotas"][tenant][key]) == str(value), (tenant, key, act4["quotas"][tenant])

    act5 = _act(demo_dir, 5)
    story = ("llm-server", "pretrain")  # playbooks/lab/files/demo-demand.yml: the HPA's item, the critical job
    assert act5["as_planned"] is True and act5["off_plan"] == [], act5["off_plan"]
    assert act5["planned_pods"] == sum(p["replicas"] for p in plan["placements"] if p["name"] not in story)
    assert "exceeded quota" in act5["over_quota"] and "requests." + act5["over_quota_resource"] in act5["over_quota"]
    critical = [p for p in plan["placements"] if p["name"] == story[1] and p["replicas"]][0]
    assert act5["critical_node"] == act5["critical_planned_node"] == critical["node"]
    assert act5["batch_submitted"] > 0
    assert act5["preempted_events"] and len(act5["batch_left"]) + len(act5["preempted_events"]) == act5["batch_submitted"]
    assert not set(act5["preempted_events"]) & set(act5["batch_left"])
    # the HPA scaled the model server on the simulated GPU metric, onto the slices the plan kept for it
    hpa = [d for d in plan["decisions"] if d["name"] == story[0]][0]
    before, after = act5["hpa_replicas"]
    assert before == 1 and after == hpa["placed"], act5  # the HPA's maximum: the plan's replicas
    assert act5["hpa_rescales"] and all("above target" in m for m in act5["hpa_rescales"]), act5["hpa_rescales"]
    assert act5["hpa_target"] == "700m"
    assert len(act5["hpa_slices"]) == after and all(s.startswith(hpa["resource"] + "/") for s in act5["hpa_slices"])
    assert set(act5["hpa_nodes"]) <= set(p["node"] for p in plan["placements"] if p["name"] == story[0]), act5["hpa_nodes"]
    assert "HPA llm-server (gpu_autoscaling): replicas 1 -> %d (gpu_engine_active" % after in out
    assert "no metrics pipeline" not in out
    assert act5["hpa_scale_down"] == [after, 1], act5
    assert 0 < act5["hpa_scale_up_s"] < 120 and 0 < act5["hpa_scale_down_s"] < 60, act5

    act6 = _act(demo_dir, 6)
    assert act6["cordoned"] == ["hgx-h200-01"]
    assert len(act6["reasons"]) == 1 and "ECC" in act6["reasons"][0], act6
    assert act6["cordoned_after_recovery"] is False

    # act 7: the closed loop. Pods pending for a slice no node offered; one round of replan.yml changed at most the
    # budget's GPUs, rolled only the node that changes, the pods bound there, and the model server (in a 1g slice
    # of a node that did not roll, guarded by a PodDisruptionBudget) is the same pods on the same node
    act7 = _act(demo_dir, 7)
    resource, profile = act7["resource"], act7["resource"].split("mig-", 1)[1]
    assert all(resource not in allocatable for allocatable in act4["allocatable"].values()), act4["allocatable"]
    assert len(act7["pending"]) == act7["replicas"] == 2, act7["pending"]
    assert 0 < act7["reconfigured_gpus"] <= act7["budget"] and act7["unplaced"] == [], act7
    assert len(act7["roll"]) == 1 and act7["deferred"] == [] and list(act7["changed"]) == act7["roll"], act7
    rolled = act7["roll"][0]
    assert sorted(act7["bound"].values()) == [rolled] * act7["replicas"], act7["bound"]
    assert sum(gpu.count(profile) for gpu in act7["layouts"][rolled]) >= act7["replicas"], act7["layouts"]
    assert act7["kept_after"] == act7["kept_before"] and act7["kept_before"], act7
    assert all(not k.endswith("@" + rolled) for k in act7["kept_before"]), act7
    assert int(act7["quota"]["requests." + resource]) == act7["replicas"], act7["quota"]
    assert "%s/%s: %d pods Running on %s" % ("research", "eval", act7["replicas"], rolled) in out

    act8 = _act(demo_dir, 8)
    pct = act8["allocated_pct"]
    assert set(pct) == set("%s/%s" % (s, p) for s in ("exclusive", "fractional") for p in ("random", "best-fit", "fgd"))
    assert all(0 < v <= 100 for v in pct.values()), pct
    assert re.search(r"fractional GPUs, fgd: [0-9.]+ % of the GPUs allocated, [0-9.]+ % of the requests served", out), out[-3000:]
    if act8["pods_csv"].endswith("openb_pod_list_default.csv"):  # the whole trace: the paper's order and levels
        assert pct["fractional/fgd"] > pct["fractional/best-fit"] > pct["fractional/random"], pct
        assert abs(pct["fractional/fgd"] - 95.2) < 1.5 and abs(pct["fractional/random"] - 86.3) < 1.5, pct
    assert os.path.exists(act8["report"])

    # nothing left running, and --clean removes what the demo wrote
    assert _pids_alive(os.path.join(demo_dir, "cluster")) == []
    assert _procs_using(demo_dir) == []
    subprocess.run([sys.executable, os.path.join(TOP, "hack", "demo.py"), "--clean", "--dir", demo_dir], cwd=TOP,
                   check=True, timeout=120)
    assert not os.path.exists(demo_dir)
