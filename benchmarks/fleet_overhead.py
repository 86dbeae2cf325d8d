# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection costs per host on a big fleet: ``make bench-fleet``.

N simulated hosts (default 200, 8 GPUs each: H100 80GB in MIG mode with 7 x 1g.10gb) run, in one
``ansible-playbook`` each:

* **gpuops**: ``gpuops.k8s.gpu_info`` (the GPU facts) + ``gpuops.k8s.mig_partition`` in check mode
  (plan ``all-1g.10gb`` -> ``all-balanced``: the module reads every GPU, validates the layout and
  plans, changes nothing). It is called as roles/mig calls it: with the ``layout`` that the role
  resolves from the mig-parted config file on the controller. ``--config-file`` passes the file
  itself instead (``config_file`` + ``config``), so each host also loads PyYAML and parses it;
* **baseline**: a playbook of the same shape, ``ansible.builtin.ping`` + ``ansible.builtin.command: true``.

Both on the local connection with the same forks, alternating (baseline, gpuops, baseline, ...) so
that a busy machine slows both alike. Prints each run's wall time, the medians and their ratio
(target: at most 1.3x). The simulated hosts live in .build/bench-fleet (created once, reused).

    .venv/bin/python benchmarks/fleet_overhead.py [--hosts 200] [--forks 10] [--runs 3] [--config-file]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, ".build", "collections"))
_link = os.path.join(TOP, ".build", "collections", "ansible_collections", "gpuops", "k8s")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    os.symlink(TOP, _link)

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import mig_changes  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import open_nvml  # noqa: E402

WORK = os.path.join(TOP, ".build", "bench-fleet")

MIG_CONFIG = """\
version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
"""

GPUOPS_PLAY = """\
- name: GPU facts and a MIG plan on every host
  hosts: all
  gather_facts: false
  tasks:
    - name: GPU facts
      gpuops.k8s.gpu_info:
        simulator: "{{ gpuops_simulator }}"
    - name: Plan the balanced layout (check mode, nothing changes)
      gpuops.k8s.mig_partition:
        simulator: "{{ gpuops_simulator }}"
%(source)s
      check_mode: true
"""

# where mig_partition's layout comes from: as roles/mig passes it (resolved on the controller), or the file
LAYOUT_SOURCE = """\
        layout:
          - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}"""
FILE_SOURCE = """\
        config_file: "%s"
        config: all-balanced"""

BASELINE_PLAY = """\
- name: Same shape, no GPU work
  hosts: all
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
    - name: A command
      ansible.builtin.command: "true"
      changed_when: false
"""


def build_host(path, gpus):
    nvml_sim.save_state(path, nvml_sim.new_state([{"model": "h100_80gb", "count": gpus}], seed=1))
    with open_nvml(path) as nv:
        for i in range(gpus):
            mig_changes.set_mig_mode(nv, i, True)
            for start in range(7):
                mig_changes.create_instance(nv, i, "1g.10gb", start, None)


def prepare(hosts, gpus, config_file=False):
    os.makedirs(os.path.join(WORK, "hosts"), exist_ok=True)
    made = 0
    lines = ["all:", "  vars:", "    ansible_connection: local",
             "    ansible_python_interpreter: %s" % sys.executable, "  hosts:"]
    for n in range(hosts):
        name = "gpu-%04d" % n
        state = os.path.join(WORK, "hosts", "%s-%d.json" % (name, gpus))
        if not os.path.isfile(state):
            build_host(state, gpus)
            made += 1
        lines.append("    %s: {gpuops_simulator: %s}" % (name, state))
    inventory = os.path.join(WORK, "inventory-%d.yml" % hosts)
    with open(inventory, "w") as f:
        f.write("\n".join(lines) + "\n")
    config = os.path.join(WORK, "mig-config.yaml")
    with open(config, "w") as f:
        f.write(MIG_CONFIG)
    plays = {}
    source = FILE_SOURCE % config if config_file else LAYOUT_SOURCE
    for name, text in (("gpuops", GPUOPS_PLAY % {"source": source}), ("baseline", BASELINE_PLAY)):
        plays[name] = os.path.join(WORK, "%s.yml" % name)
        with open(plays[name], "w") as f:
            f.write(text)
    return inventory, plays, made


def run_play(inventory, play, forks):
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_DISPLAY_OK_HOSTS="false", ANSIBLE_DISPLAY_SKIPPED_HOSTS="false")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, "-f", str(forks), play]
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                          check=False)
    wall = time.time() - start
    if proc.returncode:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), proc.stdout[-4000:]))
    recap = [line for line in proc.stdout.splitlines() if "ok=" in line]
    if len(recap) != int(inventory.rsplit("-", 1)[1].split(".")[0]):
        sys.exit("expected one recap line per host, got %d" % len(recap))
    if any("failed=0" not in line or "unreachable=0" not in line for line in recap):
        sys.exit("a host failed:\n" + "\n".join(line for line in recap if "failed=0" not in line))
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--forks", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--config-file", action="store_true",
                        help="mig_partition reads the mig-parted config file on each host (config_file + config) "
                             "instead of the layout roles/mig resolves on the controller")
    args = parser.parse_args()
    start = time.time()
    inventory, plays, made = prepare(args.hosts, args.gpus, args.config_file)
    print("fleet: %d simulated hosts x %d H100 80GB (7 x 1g.10gb each), %d created in %.1f s; forks %d; cpus %d; "
          "mig_partition given %s" % (args.hosts, args.gpus, made, time.time() - start, args.forks, os.cpu_count() or 0,
                                      "the config file" if args.config_file else "the layout (as roles/mig)"), flush=True)
    walls = {"baseline": [], "gpuops": []}
    for run in range(args.runs):
        for name in ("baseline", "gpuops"):
            wall = run_play(inventory, plays[name], args.forks)
            walls[name].append(wall)
            per_task_ms = 1000.0 * wall / (2 * args.hosts)
            print("  run %d  %-9s %7.1f s  (%.0f ms per host-task)" % (run + 1, name, wall, per_task_ms), flush=True)
    base, ours = statistics.median(walls["baseline"]), statistics.median(walls["gpuops"])
    print("median: baseline %.1f s, gpuops %.1f s, ratio %.2fx (target <= 1.30x)" % (base, ours, ours / base))


if __name__ == "__main__":
    main()
