"""Chaos at fleet scale (issue 16 item 13, issue 35 section 3), lean: 50 simulated 2-GPU hosts moved from one MIG
layout to another by ansible-playbook (the mig_partition task the mig role applies layouts with), while the
simulator fails a seeded 5 % of the mutating NVML calls with the chaos fault mix (mostly transient, some after
the driver made the change, a few permanent); mig_partition tries the transient ones again inside the run.
Then run again until every host converges: at most 2 runs.
``make chaos`` runs the bigger version (50 hosts x 8 GPUs, the whole host part of site.yml)."""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def _chaos_module():
    spec = importlib.util.spec_from_file_location("chaos_fleet", os.path.join(TOP, "benchmarks", "chaos_fleet.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_chaos_fleet_converges_in_two_runs_without_losing_instances_or_processes(tmp_path, capsys):
    chaos = _chaos_module()
    result = chaos.chaos(hosts=50, gpus=2, rate=0.05, seed="16", max_runs=6, forks=10, work=str(tmp_path / "chaos"),
                         play="module")
    with capsys.disabled():
        for r in result["runs"]:
            print("chaos run %(run)d: %(faults_injected)d faults (%(faults_transient)d transient, %(faults_permanent)d "
                  "permanent), %(retries)d retries, %(hosts_failed)d hosts failed, %(hosts_converged)d converged" % r)
    runs = result["runs"]
    first = runs[0]
    # the chaos bit: transient and permanent faults were injected, some after the driver made the change
    assert first["faults_transient"] > 0 and first["faults_permanent"] > 0 and result["faults_after_change"] > 0
    # transient ones were tried again inside the run: each retry answers one injected transient fault
    assert 0 < result["retries"] <= result["faults_transient"]
    for r in runs:
        # a host fails only where a fault hit it: a permanent one, or a transient one past its attempts
        assert r["hosts_failed"] <= r["hosts_affected"], r
        # no instance that stays in the layout was destroyed, no workload process was lost
        assert r["invariant_violations"] == {}, r
        assert r["kept_instances_destroyed"] == 0 and r["processes_lost"] == 0, r
    # a permanent fault fails its host: never swallowed
    assert first["hosts_failed"] >= 1
    assert result["kept_instances"] == 50 * 2 * 3
    # converged in at most two runs, and one more changes nothing
    assert result["converged_after"] is not None and result["converged_after"] <= 2
    assert runs[-1]["hosts_converged"] == 50 and runs[-1]["hosts_failed"] == 0
    assert result["idempotent_run"]["hosts_changed_or_failed"] == []
