# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Chaos at fleet scale: ``make chaos`` (and, smaller, tests/integration/test_chaos.py).

N simulated hosts (default 50, 8 H100 80GB each, MIG on, every GPU in layout ``chaos-a``:
3g.40gb + 4 x 1g.10gb, a workload process on each 3g.40gb) are moved to ``chaos-b`` (3g.40gb +
2g.20gb + 2 x 1g.10gb) by the host part of the site playbook (``playbooks/gpu_nodes.yml``, the
``gpuops.k8s.mig`` role from a mig-parted config file; driver and toolkit off, no cluster guard),
while the simulator fails a seeded random ``rate`` (default 5 %) of the mutating NVML calls
(``random_faults`` in each host's state) with the fault mix ``CHAOS_MIX`` (mostly transient errors, some
of them after the driver made the change; 5 % permanent). mig_partition tries the transient ones
again inside the run (``nvml_attempts``, default 3; the simulator does not sleep the backoff). The
playbook is run again until every host converges.

After every run it checks, on every host, that:

* no instance the plan keeps (same GPU instance, same MIG device UUID: a destroy and re-create
  would give a new UUID) was destroyed, even on the hosts whose run failed halfway;
* no workload process was lost;

and at the end that every GPU has ``chaos-b`` and one more run changes nothing. Prints per run the
faults injected (transient, after the change, permanent), the retries (``nvml_retries`` of the module
results, read with the ansible.posix.json callback), hosts affected and failed, kept instances destroyed
and processes lost, and the number of runs to converge.

    .venv/bin/python benchmarks/chaos_fleet.py [--hosts 50] [--gpus 8] [--rate 0.05] [--seed 16]
                                               [--max-runs 10] [--forks 8] [--work DIR]
                                               [--play site|module|engine] [--attempts N]
                                               [--mix chaos|unknown] [--permanent SHARE] [--json FILE]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, ".build", "collections"))
_link = os.path.join(TOP, ".build", "collections", "ansible_collections", "gpuops", "k8s")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    os.symlink(TOP, _link)

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import open_nvml  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError  # noqa: E402

LAYOUT_A = {"3g.40gb": 1, "1g.10gb": 4}
LAYOUT_B = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
MIG_CONFIG = """\
version: v1
mig-configs:
  chaos-a:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 1, "1g.10gb": 4}
  chaos-b:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
"""
# The lean variant (tests/integration/test_chaos.py): the one module the mig role applies the layout with.
MODULE_PLAY = """\
- name: MIG layout from the site's mig-parted config (the mig role's apply step)
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Apply the layout
      gpuops.k8s.mig_partition:
        config_file: "{{ gpuops_mig_config_file }}"
        config: "{{ gpuops_mig_config }}"
        simulator: "{{ gpuops_simulator }}"
        nvml_attempts: "{{ mig_nvml_attempts | default(3) }}"
"""
# Which fault a failing call gets (random_faults.mix, docs/fleet-operations.md "The chaos fault mix"): mostly
# transient, as real NVML failures are. No published failure statistics exist; the weights are an assumption.
# The TIMEOUT after the change is the hard case for a retry: the driver did it, the call still failed.
CHAOS_MIX = [
    {"error": "NVML_ERROR_IN_USE", "weight": 60},                         # a process still releasing the instance
    {"error": "NVML_ERROR_TIMEOUT", "weight": 15},                        # a busy driver, nothing done
    {"error": "NVML_ERROR_TIMEOUT", "weight": 20, "after_change": True},  # a busy driver, the change made
    {"error": "NVML_ERROR_UNKNOWN", "weight": 5},                         # permanent: fails its GPU at once
]


def permanent_mix(share):
    """CHAOS_MIX with the permanent entry weighted so that ``share`` of the faults are permanent (0: none)."""
    if not 0 <= share < 1:
        raise ValueError("--permanent must be from 0 to below 1, got %r" % share)
    transient = [dict(m) for m in CHAOS_MIX if m["error"] != "NVML_ERROR_UNKNOWN"]
    total = sum(m["weight"] for m in transient)
    if share == 0:
        return transient
    return transient + [{"error": "NVML_ERROR_UNKNOWN", "weight": round(total * share / (1 - share), 3)}]


def _layout_params(mig_devices):
    return {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": mig_devices}]}


def build_host(path, gpus, rate, seed, mix=None):
    """A host in chaos-a with a process on every 3g.40gb; returns what must survive: {(gpu, gi): uuid}
    of the instances the plan to chaos-b keeps, and the processes."""
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": gpus}], seed=1)
    for gpu in state["gpus"]:
        gpu["mig_mode_current"] = gpu["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)
    with open_nvml(path) as nv:
        mig_engine.run_mig_partition(nv, _layout_params(LAYOUT_A))
    state = nvml_sim.load_state(path)
    for gpu in state["gpus"]:
        big = [gi for gi in gpu["gpu_instances"] if gi["size"] == 4]
        gpu["processes"] = [{"pid": 10000 + 10 * gpu["index"], "name": "llm-serve", "gpu_instance_id": big[0]["id"],
                             "compute_instance_id": 0, "used_memory_mib": 30000}]
    nvml_sim.save_state(path, state)
    with open_nvml(path) as nv:
        plan = mig_engine.run_mig_partition(nv, _layout_params(LAYOUT_B), check_mode=True)
    kept = {}
    for a in plan["actions"]:
        if a["action"] == "keep":
            gpu = plan["gpus"][a["gpu"]]
            uuids = sorted(r["uuid"] for r in gpu["instances"] if r["gpu_instance_id"] == a["gpu_instance_id"])
            kept["%d/%d" % (a["gpu"], a["gpu_instance_id"])] = uuids
    state = nvml_sim.load_state(path)
    state["random_faults"] = {"rate": rate, "seed": seed, "mix": CHAOS_MIX if mix is None else mix}
    nvml_sim.save_state(path, state)
    return {"kept": kept, "processes": _processes(state)}


def _processes(state):
    return sorted((g["index"], p["pid"], p.get("gpu_instance_id")) for g in state["gpus"] for p in g.get("processes", []))


def prepare(work, hosts, gpus, rate, seed, mix=None):
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(os.path.join(work, "hosts"))
    config = os.path.join(work, "mig-config.yaml")
    with open(config, "w") as f:
        f.write(MIG_CONFIG)
    expect = {}
    lines = ["all:", "  children:", "    gpu_nodes:", "      vars:",
             "        ansible_connection: local",
             "        ansible_python_interpreter: %s" % sys.executable,
             "        gpuops_mig_config: chaos-b",
             "        gpuops_mig_config_file: %s" % config,
             "        mig_persist: false",
             "        mig_clients: []",
             "        mig_mode_change_clients: []",
             "        mig_stop_persistenced: false",
             "      hosts:"]
    for n in range(hosts):
        name = "chaos-%03d" % n
        path = os.path.join(work, "hosts", name + ".json")
        expect[name] = build_host(path, gpus, rate, "%s-%s" % (seed, name), mix)
        expect[name]["path"] = path
        lines.append("        %s: {gpuops_simulator: %s}" % (name, path))
    inventory = os.path.join(work, "hosts.yml")
    with open(inventory, "w") as f:
        f.write("\n".join(lines) + "\n")
    return inventory, expect


def run_site_hosts(inventory, forks, play="site", attempts=None):
    """``site``: playbooks/gpu_nodes.yml (the host part of site.yml) with the mig role; ``module``: MODULE_PLAY.
    ``attempts``: the mig role's ``mig_nvml_attempts`` (None: its default). Returns ({host: {changed, failed,
    retries}}, seconds, process); ``retries`` counts the ``nvml_retries`` entries of the host's results."""
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, "-f", str(forks)]
    if attempts is not None:
        cmd += ["-e", "mig_nvml_attempts=%d" % attempts]
    if play == "site":
        cmd += [os.path.join(TOP, "playbooks", "gpu_nodes.yml"), "-e", "gpu_nodes_driver=false",
                "-e", "gpu_nodes_container_toolkit=false", "-e", "gpu_nodes_mig_guard=false"]
    else:
        path = os.path.join(os.path.dirname(inventory), "mig-module.yml")
        with open(path, "w") as f:
            f.write(MODULE_PLAY)
        cmd.append(path)
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                          check=False)
    try:
        out = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        return {}, time.time() - start, proc
    recap = dict((h, {"changed": int(st.get("changed", 0)), "failed": int(st.get("failures", 0)) + int(st.get("unreachable", 0)),
                      "retries": 0}) for h, st in out.get("stats", {}).items())
    for play_out in out.get("plays", []):
        for task in play_out.get("tasks", []):
            for host, res in task.get("hosts", {}).items():
                if host in recap and isinstance(res.get("nvml_retries"), list):
                    recap[host]["retries"] += len(res["nvml_retries"])
    return recap, time.time() - start, proc


def run_in_process(inventory, expect, attempts=None):
    """``engine``: mig_engine.run_mig_partition in this process on every host, with the params the mig role's
    apply step gives mig_partition (the site's mig-parted config, ``missing_gpus: warn``). The role's
    check-mode plan before it makes no mutating call, so the simulator draws the same faults as the
    playbook. Returns the recap of run_site_hosts (``proc`` None)."""
    config = os.path.join(os.path.dirname(inventory), "mig-config.yaml")
    params = {"config_file": config, "config": "chaos-b", "missing_gpus": "warn",
              "nvml_attempts": 3 if attempts is None else attempts}
    start = time.time()
    recap = {}
    for host, exp in sorted(expect.items()):
        with open_nvml(exp["path"]) as nv:
            try:
                res = mig_engine.run_mig_partition(nv, dict(params))
                failed = 0
            except GpuOpsError as e:
                res = dict(e.details)
                failed = 1
        recap[host] = {"changed": int(bool(res.get("changed"))), "failed": failed,
                       "retries": len(res.get("nvml_retries") or [])}
    return recap, time.time() - start, None


def check_host(expect):
    """Problems on one host: a kept instance destroyed (or re-created), a process lost; with their counts."""
    state = nvml_sim.load_state(expect["path"])
    problems = []
    lost = sorted(set(expect["processes"]) - set(_processes(state)))
    if _processes(state) != expect["processes"]:
        problems.append("processes changed: %s -> %s" % (expect["processes"], _processes(state)))
    with open_nvml(expect["path"]) as nv:
        gpus = gpu_state.read_host(nv)["gpus"]
    destroyed = 0
    for key, uuids in sorted(expect["kept"].items()):
        gpu, gi = [int(x) for x in key.split("/")]
        now = sorted(r["uuid"] for r in gpus[gpu]["instances"] if r["gpu_instance_id"] == gi and r.get("uuid"))
        if now != uuids:
            destroyed += 1
            problems.append("kept instance GPU %d GI %d: %s -> %s" % (gpu, gi, uuids, now))
    counts = {"kept_destroyed": destroyed, "processes_lost": len(lost)}
    return problems, gpus, state.get("random_faults") or {}, counts


_TRANSIENT = ("NVML_ERROR_IN_USE", "NVML_ERROR_TIMEOUT", "NVML_ERROR_NOT_READY")  # nvml.retry.TRANSIENT


def _fault_counts(spec):
    by_error = spec.get("injected_by_error") or {}
    transient = sum(n for e, n in by_error.items() if e in _TRANSIENT)
    return {"injected": int(spec.get("injected", 0)), "transient": transient,
            "permanent": int(spec.get("injected", 0)) - transient,
            "after_change": int(spec.get("injected_after_change", 0))}


def _profiles(gpu):
    return sorted(i.profile for i in mig_instances.instances_from_gpu(gpu))


def _one_run(inventory, expect, forks, play, attempts):
    if play == "engine":
        return run_in_process(inventory, expect, attempts)
    return run_site_hosts(inventory, forks, play, attempts)


def chaos(hosts=50, gpus=8, rate=0.05, seed=16, max_runs=10, forks=8, work=None, out=sys.stdout, play="site",
          attempts=None, mix=None):
    """Run the chaos case; ``attempts`` is the mig role's mig_nvml_attempts (None: the default 3; 1: no
    retry), ``mix`` the simulator's fault mix (None: CHAOS_MIX)."""
    work = work or os.path.join(TOP, ".build", "chaos")
    inventory, expect = prepare(work, hosts, gpus, rate, seed, mix)
    want = sorted(p for p, n in LAYOUT_B.items() for dummy in range(n))
    kept_total = sum(len(e["kept"]) for e in expect.values())
    out.write("chaos: %d hosts x %d GPUs (H100 80GB), chaos-a -> chaos-b, %d kept instances with %d processes, "
              "random NVML faults on %.1f %% of mutating calls (seed %s, mix %s), nvml_attempts %s, %s\n"
              % (hosts, gpus, kept_total, sum(len(e["processes"]) for e in expect.values()), rate * 100, seed,
                 "chaos" if mix is None else json.dumps(mix), "3 (default)" if attempts is None else attempts,
                 {"site": "playbooks/gpu_nodes.yml (mig role)", "module": "the mig_partition play"}.get(
                     play, "the mig engine in process")))
    before = dict((h, _fault_counts({})) for h in expect)
    runs = []
    converged_after = None
    for run in range(1, max_runs + 1):
        recap, seconds, proc = _one_run(inventory, expect, forks, play, attempts)
        if len(recap) != hosts:
            raise RuntimeError("run %d: the play recap lists %d of %d hosts:\n%s%s" % (
                run, len(recap), hosts, proc.stdout[-3000:], proc.stderr[-3000:]))
        failed = sorted(h for h, r in recap.items() if r["failed"])
        problems = {}
        totals = dict((k, 0) for k in ("injected", "transient", "permanent", "after_change", "kept_destroyed",
                                       "processes_lost"))
        affected = 0
        done = 0
        for host, exp in sorted(expect.items()):
            host_problems, facts, spec, counts = check_host(exp)
            if host_problems:
                problems[host] = host_problems
            now = _fault_counts(spec)
            delta = dict((k, now[k] - before[host][k]) for k in now)
            before[host] = now
            for k in delta:
                totals[k] += delta[k]
            totals["kept_destroyed"] += counts["kept_destroyed"]
            totals["processes_lost"] += counts["processes_lost"]
            affected += 1 if delta["injected"] else 0
            if all(_profiles(g) == want for g in facts):
                done += 1
        retries = sum(r["retries"] for r in recap.values())
        runs.append({"run": run, "seconds": round(seconds, 1), "faults_injected": totals["injected"],
                     "faults_transient": totals["transient"], "faults_permanent": totals["permanent"],
                     "faults_after_change": totals["after_change"], "retries": retries,
                     "hosts_affected": affected, "hosts_failed": len(failed), "hosts_converged": done,
                     "kept_instances_destroyed": totals["kept_destroyed"], "processes_lost": totals["processes_lost"],
                     "invariant_violations": problems})
        out.write("run %d: %5.1f s  faults injected %3d (transient %d, %d of them after the change; permanent %d)  "
                  "retries %3d  hosts affected %3d  hosts failed %3d  hosts in chaos-b %3d/%d  "
                  "kept instances destroyed %d  processes lost %d\n"
                  % (run, seconds, totals["injected"], totals["transient"], totals["after_change"], totals["permanent"],
                     retries, affected, len(failed), done, hosts, totals["kept_destroyed"], totals["processes_lost"]))
        if not failed and done == hosts:
            converged_after = run
            break
    idempotent = None
    if converged_after:
        recap, seconds, proc = _one_run(inventory, expect, forks, play, attempts)
        changed = sorted(h for h, r in recap.items() if r["changed"] or r["failed"])
        idempotent = {"seconds": round(seconds, 1), "hosts_changed_or_failed": changed}
        out.write("one more run: %.1f s, hosts changed or failed: %d\n" % (seconds, len(changed)))
    counted = ("faults_injected", "faults_transient", "faults_permanent", "faults_after_change", "retries",
               "hosts_failed")
    total = dict((k, sum(r[k] for r in runs)) for k in counted)
    total["kept_instances_destroyed"] = max([r["kept_instances_destroyed"] for r in runs] or [0])
    total["processes_lost"] = max([r["processes_lost"] for r in runs] or [0])
    out.write("total: runs to converge %s; faults injected %d (transient %d, %d of them after the change; permanent %d); "
              "retries %d; host runs failed %d; kept instances destroyed %d; processes lost %d\n"
              % (converged_after, total["faults_injected"], total["faults_transient"], total["faults_after_change"],
                 total["faults_permanent"], total["retries"], total["hosts_failed"], total["kept_instances_destroyed"],
                 total["processes_lost"]))
    result = {"hosts": hosts, "gpus": gpus, "rate": rate, "seed": seed, "play": play, "kept_instances": kept_total,
              "runs": runs, "converged_after": converged_after, "idempotent_run": idempotent,
              "nvml_attempts": attempts, "mix": CHAOS_MIX if mix is None else mix}
    result.update(total)
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--rate", type=float, default=0.05)
    ap.add_argument("--seed", default="16")
    ap.add_argument("--max-runs", type=int, default=10)
    ap.add_argument("--forks", type=int, default=8)
    ap.add_argument("--work", default=None)
    ap.add_argument("--play", choices=["site", "module", "engine"], default="site",
                    help="site: playbooks/gpu_nodes.yml with the mig role (default); module: one mig_partition task; "
                         "engine: the mig engine in this process, no Ansible (same NVML calls and fault draws)")
    ap.add_argument("--attempts", type=int, default=None,
                    help="mig_nvml_attempts of the mig role (default: its default, 3; 1: no retry)")
    ap.add_argument("--mix", choices=["chaos", "unknown"], default="chaos",
                    help="chaos: the realistic fault mix (CHAOS_MIX, default); unknown: every fault NVML_ERROR_UNKNOWN "
                         "(permanent), the mix before retries existed")
    ap.add_argument("--permanent", type=float, default=None,
                    help="with the chaos mix: the share of the faults that are permanent (NVML_ERROR_UNKNOWN), "
                         "e.g. 0 or 0.1; the transient weights stay as they are (default: the mix's 5 %%)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    mix = None if args.mix == "chaos" else [{"error": "NVML_ERROR_UNKNOWN"}]
    if args.permanent is not None and mix is None:
        mix = permanent_mix(args.permanent)
    result = chaos(args.hosts, args.gpus, args.rate, args.seed, args.max_runs, args.forks, args.work, play=args.play,
                   attempts=args.attempts, mix=mix)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
    bad = [r for r in result["runs"] if r["invariant_violations"]]
    ok = result["converged_after"] and not bad and not result["idempotent_run"]["hosts_changed_or_failed"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
