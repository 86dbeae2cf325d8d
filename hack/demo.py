# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo`: the whole story of gpuops.k8s on the simulated lab, in eight acts.

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
import json
import os
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
import playbook  # noqa: E402  pylint: disable=wrong-import-position

INVENTORY = os.path.join(TOP, "inventories", "sim", "hosts.yml")
PLAYBOOK = os.path.join(TOP, "playbooks", "lab", "demo.yml")
DEFAULT_DIR = os.path.join(TOP, ".cache", "demo")
# tasks whose output is part of the story (their name starts with this); the rest is progress
SHOW = "Demo: "


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
    """ansible-playbook playbooks/lab/demo.yml with the ansible.posix.jsonl callback (one JSON event per line), read
    as it runs: progress per task, the story tasks' messages in full, failures, the recap. ``abort``: called on every
    event; when it returns a reason the playbook is stopped and the reason said."""
    env = playbook.env_for(kubeconfig)
    # plan.yml runs mig_reconfigure.yml as its own ansible-playbook: it finds that one on PATH, the simulated hosts
    # through GPUOPS_SIM_DIR (inventories/sim) and the cluster through KUBECONFIG, not through our -e
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(GPUOPS_SIM_DIR=sim_dir, ANSIBLE_STDOUT_CALLBACK="ansible.posix.jsonl", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="false")
    env.setdefault("ANSIBLE_REMOTE_TMP", os.path.join(TOP, ".cache", "ansible", "tmp"))
    cmd = [playbook.ANSIBLE_PLAYBOOK, "-i", INVENTORY, PLAYBOOK,
           "-e", "gpuops_sim_dir=" + sim_dir, "-e", "demo_dir=" + demo_dir] + list(extra)
    trace = os.environ.get("GPUOPS_TRACE_DIR") or os.path.join(os.path.dirname(TOP), "shared", "data",
                                                               "alibaba-gpu-2023", "csv")
    nodes_csv = os.path.join(trace, "openb_node_list_gpu_node.csv")
    pods_csv = os.path.join(trace, "openb_pod_list_default.csv")
    if os.path.exists(nodes_csv) and os.path.exists(pods_csv):
        cmd += ["-e", "demo_nodes_csv=" + nodes_csv, "-e", "demo_pods_csv=" + pods_csv]
    log_path = os.path.join(demo_dir, "logs", "demo-playbook.log")
    progress = Progress(out)
    story = Story(progress)
    with open(log_path, "w") as log:
        # stdout: the JSON events (kept in the log); stderr (warnings) goes to the log as it comes
        proc = subprocess.Popen(cmd, cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=log,
                                universal_newlines=True, bufsize=1)
        for line in proc.stdout:
            log.write(line)
            log.flush()
            reason = abort() if abort else None
            if reason and proc.poll() is None:
                progress.say("demo: %s; stopping the playbook" % reason)
                log.write("demo: %s; stopping the playbook\n" % reason)
                proc.terminate()
            try:
                event = json.loads(line)
            except ValueError:
                progress.say(line.rstrip("\n"))  # not an event: a message of ansible-playbook itself
                continue
            story.event(event)
        rc = proc.wait()
        story.done()
        log.write("\nwall time per play (s):\n" + "".join("  %6.1f  %s\n" % (t, name) for name, t in story.timings))
    progress.clear()
    return rc, log_path


class Story(object):
    """What the demo prints of the jsonl events: the acts' titles, the story tasks' messages ("Demo: ..." tasks),
    failures and the recap; every other task is a progress line."""

    def __init__(self, progress):
        self.progress = progress
        self.play, self.play_t0, self.timings = "", time.time(), []

    def event(self, e):
        kind = e.get("_event", "")
        if kind == "v2_playbook_on_play_start":
            self.done()
            self.play, self.play_t0 = e["play"]["name"], time.time()
        elif kind in ("v2_playbook_on_task_start", "v2_playbook_on_handler_task_start", "v2_runner_on_start"):
            name = e["task"]["name"]
            short = name.split(" : ")[-1]
            if short.startswith(SHOW + "act "):  # an act begins: its title as a header
                self.progress.say("\n== " + short[len(SHOW):])
            self.progress.task(self.play, name)
        elif kind in ("v2_runner_on_ok", "v2_runner_on_failed", "v2_runner_on_unreachable"):
            name = e["task"]["name"]
            for host, res in sorted(e.get("hosts", {}).items()):
                if res.get("failed") or res.get("unreachable"):
                    if not res.get("ignore_errors"):
                        self.progress.say("fatal: [%s]: %s: %s" % (host, name, _messages(res) or res))
                elif name.split(" : ")[-1].startswith(SHOW):
                    lines = _messages(res)
                    if lines and host != "localhost":
                        self.progress.say("  [%s]" % host)
                    for text in lines:
                        for piece in text.splitlines():
                            self.progress.say("    " + piece)
        elif kind == "v2_playbook_on_stats":
            self.progress.say("")
            for host, s in sorted(e.get("stats", {}).items()):
                self.progress.say("%-14s : ok=%d changed=%d unreachable=%d failed=%d skipped=%d rescued=%d ignored=%d" % (
                    host, s.get("ok", 0), s.get("changed", 0), s.get("unreachable", 0), s.get("failures", 0),
                    s.get("skipped", 0), s.get("rescued", 0), s.get("ignored", 0)))

    def done(self):
        if self.play:
            self.timings.append((self.play, time.time() - self.play_t0))
            self.play = ""


def _messages(res):
    """A result's messages: its msg (a string or a list of lines), or each loop item's."""
    if "results" in res and isinstance(res["results"], list):
        return [m for item in res["results"] if isinstance(item, dict) for m in _messages(item)]
    msg = res.get("msg")
    if isinstance(msg, list):
        return [str(m) for m in msg]
    return [str(msg)] if msg not in (None, "") else []


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
    check = subprocess.run([lab_cluster.BUILD_SCRIPT, "--check"] + list(metrics_lab.COMPONENTS), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, check=False)
    if check.returncode != 0:
        log("building Prometheus, kube-state-metrics and the custom-metrics stand-in from Go modules while acts 1-4 run"
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
