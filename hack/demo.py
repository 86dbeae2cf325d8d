# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo`: the whole story of gpuops.k8s on the simulated lab, in seven acts.

Starts the local control plane (tests/e2e/lib/cluster.py) in its own state directory with the kwok
nodes of inventories/sim, the simulated device plugin and the GPU metric path (tests/e2e/lib/metrics_lab.py:
simulated DCGM exporter, Prometheus, custom-metrics stand-in), runs playbooks/lab/demo.yml against it
(the collection's own playbooks, imported act by act), shows progress and each act's pictures,
then stops everything it started. Outputs (act summaries, the plan and what-if reports, the
simulated hosts' NVML states, the logs) stay under the demo directory until `make demo-clean`.

    python hack/demo.py [--dir .cache/demo] [--keep-cluster]
    python hack/demo.py --clean [--dir .cache/demo]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e", "lib"))

import cluster as lab_cluster  # noqa: E402  pylint: disable=wrong-import-position
import gpu_nodes  # noqa: E402  pylint: disable=wrong-import-position
import metrics_lab  # noqa: E402  pylint: disable=wrong-import-position

INVENTORY = os.path.join(TOP, "inventories", "sim", "hosts.yml")
PLAYBOOK = os.path.join(TOP, "playbooks", "lab", "demo.yml")
DEFAULT_DIR = os.path.join(TOP, ".cache", "demo")
# tasks whose output is part of the story (their name starts with this); the rest is progress
SHOW = "Demo: "
TASK_RE = re.compile(r"^(TASK|RUNNING HANDLER) \[(.*)\] \*+$")
PLAY_RE = re.compile(r"^PLAY \[(.*)\] \*+$")
RECAP_RE = re.compile(r"^PLAY RECAP \*+$")


class Progress(object):
    """One status line that is rewritten in place on a terminal (plain lines otherwise)."""

    def __init__(self, stream):
        self.stream = stream
        self.tty = stream.isatty()
        self.t0 = time.time()
        self.tasks = 0
        self.shown = False

    def task(self, play, name):
        self.tasks += 1
        if not self.tty:
            return
        line = "  [%5.1fs] task %d: %s / %s" % (time.time() - self.t0, self.tasks, play, name)
        self.stream.write("\r\033[K" + line[:150])
        self.stream.flush()
        self.shown = True

    def clear(self):
        if self.tty and self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False

    def say(self, text):
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()


def run_playbook(demo_dir, sim_dir, kubeconfig, out, extra=(), abort=None):
    """ansible-playbook playbooks/lab/demo.yml, streaming: progress per task, the story tasks in full. ``abort``:
    called on every line of output; when it returns a reason the playbook is stopped and the reason said."""
    env = dict(os.environ)
    # as the Makefile sets them (hack/demo.py may also be run on its own)
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(TOP, ".build", "collections"))
    env.setdefault("ANSIBLE_HOME", os.path.join(TOP, ".cache", "ansible"))
    env.setdefault("ANSIBLE_REMOTE_TMP", os.path.join(TOP, ".cache", "ansible", "tmp"))
    env.setdefault("ANSIBLE_LOCAL_TEMP", os.path.join(TOP, ".cache", "ansible", "tmp-local"))
    # plan.yml runs mig_reconfigure.yml as its own ansible-playbook: it finds that one on PATH, the simulated hosts
    # through GPUOPS_SIM_DIR (inventories/sim) and the cluster through KUBECONFIG, not through our -e
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(KUBECONFIG=kubeconfig, GPUOPS_SIM_DIR=sim_dir, ANSIBLE_CALLBACK_RESULT_FORMAT="yaml",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_DISPLAY_SKIPPED_HOSTS="false",
               ANSIBLE_DEPRECATION_WARNINGS="false")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", INVENTORY, PLAYBOOK,
           "-e", "gpuops_sim_dir=" + sim_dir, "-e", "demo_dir=" + demo_dir] + list(extra)
    trace = os.environ.get("GPUOPS_TRACE_DIR") or os.path.join(os.path.dirname(TOP), "shared", "data",
                                                               "alibaba-gpu-2023", "csv")
    nodes_csv = os.path.join(trace, "openb_node_list_gpu_node.csv")
    pods_csv = os.path.join(trace, "openb_pod_list_default.csv")
    if os.path.exists(nodes_csv) and os.path.exists(pods_csv):
        cmd += ["-e", "demo_nodes_csv=" + nodes_csv, "-e", "demo_pods_csv=" + pods_csv]
    log_path = os.path.join(demo_dir, "logs", "demo-playbook.log")
    progress = Progress(out)
    play, showing, recap = "", False, False
    timings, play_t0 = [], time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                universal_newlines=True, bufsize=1)
        for line in proc.stdout:
            log.write(line)
            reason = abort() if abort else None
            if reason and proc.poll() is None:
                progress.say("demo: %s; stopping the playbook" % reason)
                log.write("demo: %s; stopping the playbook\n" % reason)
                proc.terminate()
            text = line.rstrip("\n")
            m_play, m_task = PLAY_RE.match(text), TASK_RE.match(text)
            if m_play:
                now = time.time()
                if play:
                    timings.append((play, now - play_t0))
                play, showing, play_t0 = m_play.group(1), False, now
                continue
            if m_task:
                task = m_task.group(2).split(" : ")[-1]
                showing = task.startswith(SHOW)
                if task.startswith(SHOW + "act "):  # an act begins: its title as a header
                    progress.say("\n== " + task[len(SHOW):])
                progress.task(play, m_task.group(2))
                continue
            if RECAP_RE.match(text):
                recap, showing = True, False
                progress.say("")
            if recap or (showing and text.strip() and not text.startswith(("skipping:", "included:"))):
                progress.say("  " + text if showing else text)
            elif text.startswith(("fatal:", "failed:", "ERROR!", "[ERROR]")):
                progress.say(text)
        rc = proc.wait()
        if play:
            timings.append((play, time.time() - play_t0))
        log.write("\nwall time per play (s):\n" + "".join("  %6.1f  %s\n" % (t, name) for name, t in timings))
    progress.clear()
    return rc, log_path


def start_lab(demo_dir, sim_dir, log):
    """The control plane, the kwok nodes of the simulated lab and the simulated device plugin."""
    state_dir = os.path.join(demo_dir, "cluster")
    try:
        lab_cluster.bin_dir(check=True)
    except lab_cluster.ClusterError:
        log("building the local control plane from Go modules (cold: about 6 minutes; cached after)")
        lab_cluster.build(stream=sys.stderr)
    cluster = lab_cluster.LocalCluster(state_dir, log=log)
    cluster.start()
    fleet = gpu_nodes.fleet_from_inventory(INVENTORY)
    gpu_nodes.apply_fleet(cluster.kubeconfig, fleet)
    cluster.start_sim_device_plugin(INVENTORY, sim_dir)
    return cluster


def render_metrics(render_dir):
    """Render the dcgm_exporter role (render mode) for the metric path, in a thread: it runs while the control
    plane starts. Returns the thread and a list that holds the error, if any, once it has ended."""
    shutil.rmtree(render_dir, ignore_errors=True)  # the role's current manifests, never a previous run's
    errors = []

    def run():
        try:
            metrics_lab.render_manifests(render_dir)
        except Exception as e:  # pylint: disable=broad-except
            errors.append(e)
    thread = threading.Thread(target=run, name="render-metrics", daemon=True)
    thread.start()
    return thread, errors


def start_metrics(cluster, render_dir, log):
    """The GPU metric path of docs/autoscaling.md on the running control plane: the simulated DCGM exporter now,
    Prometheus and the custom-metrics stand-in behind API aggregation in a thread (built first when missing), so
    acts 1-4 run meanwhile; act 5 waits for the custom metrics API. They are the cluster's helpers, so
    `make demo-clean` stops them too. Returns the MetricsLab and a list that holds the thread's error, if any."""
    metrics = metrics_lab.MetricsLab(cluster, scrape_interval="2s")
    metrics.build_log = os.path.join(os.path.dirname(render_dir), "logs", "metrics-build.log")
    check = subprocess.run([lab_cluster.BUILD_SCRIPT, "--check", "prometheus", "metrics-standin"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, check=False)
    if check.returncode != 0:
        log("building Prometheus and the custom-metrics stand-in from Go modules while acts 1-4 run"
            " (cold: about 2-3 minutes on an idle 2-core machine; cached after; log %s)" % metrics.build_log)
    try:
        metrics.start_exporter(render_dir=render_dir)
    except Exception:
        metrics.stop()
        raise
    errors = []

    def serve():
        try:
            metrics.start_serving()
            log("  GPU metric path ready: Prometheus %s, custom.metrics.k8s.io stand-in" % metrics.prometheus_url)
        except Exception as e:  # pylint: disable=broad-except
            errors.append(e)
    threading.Thread(target=serve, name="metric-path", daemon=True).start()
    return metrics, errors


def clean(demo_dir, log):
    state_dir = os.path.join(demo_dir, "cluster")
    if os.path.isdir(state_dir):
        stopped = lab_cluster.LocalCluster(state_dir, log=log).stop(keep_logs=False)
        if stopped:
            log("stopped: " + ", ".join(stopped))
    shutil.rmtree(demo_dir, ignore_errors=True)
    log("removed %s" % demo_dir)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--dir", default=os.environ.get("GPUOPS_DEMO_DIR", DEFAULT_DIR))
    ap.add_argument("--keep-cluster", action="store_true", help="leave the control plane running at the end")
    ap.add_argument("--clean", action="store_true", help="stop what a demo left running and remove its outputs")
    ap.add_argument("extra", nargs="*", help="more ansible-playbook arguments (e.g. -e demo_whatif=false)")
    args = ap.parse_args(argv)
    demo_dir = os.path.abspath(args.dir)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.clean:
        clean(demo_dir, log)
        return 0
    t0 = time.time()
    sim_dir = os.path.join(demo_dir, "sim")
    for sub in ("sim", "logs", "acts"):
        os.makedirs(os.path.join(demo_dir, sub), exist_ok=True)
    print("gpuops.k8s demo: a shared, multi-tenant GPU cluster on a simulated fleet (outputs in %s)" % demo_dir,
          flush=True)
    print("starting the local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok)...",
          flush=True)
    render_dir = os.path.join(demo_dir, "metrics")
    render, render_errors = render_metrics(render_dir)
    try:
        cluster = start_lab(demo_dir, sim_dir, lambda m: None)
    except lab_cluster.ClusterError as e:
        log("demo: the local control plane did not start: %s" % e)
        render.join()
        return 1
    print("  API server %s, kwok nodes for the four simulated hosts, simulated device plugin running (%.0f s)"
          % (cluster.api_url, time.time() - t0), flush=True)
    rc, metrics, log_path = 1, None, os.path.join(demo_dir, "logs", "demo-playbook.log")
    try:
        try:
            render.join()
            if render_errors:
                raise render_errors[0]
            metrics, metric_errors = start_metrics(cluster, render_dir, log)
        except Exception as e:  # pylint: disable=broad-except
            log("demo: the GPU metric path did not start: %s" % e)
            return 1
        print("  GPU metric path: simulated DCGM exporter %s; Prometheus and the custom.metrics.k8s.io stand-in "
              "start beside acts 1-4 (%.0f s)" % (metrics.exporter_url, time.time() - t0), flush=True)
        extra = ["-e", "demo_exporter_url=" + metrics.exporter_url] + list(args.extra)

        def metric_path_failed():
            return metric_errors and "the GPU metric path did not start: %s" % metric_errors[0]
        rc, log_path = run_playbook(demo_dir, sim_dir, cluster.kubeconfig, sys.stdout, extra, abort=metric_path_failed)
    finally:
        if args.keep_cluster:
            print("control plane left running: export KUBECONFIG=%s (make demo-clean stops it)" % cluster.kubeconfig)
        else:
            if metrics is not None:
                metrics.stop()
            cluster.stop(keep_logs=True)
    print("demo %s in %.0f s; playbook log %s; act summaries %s"
          % ("finished" if rc == 0 else "FAILED (rc %d)" % rc, time.time() - t0, log_path,
             os.path.join(demo_dir, "acts")), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
