# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real local Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (fake nodes), built from Go modules by hack/k8s/build.sh.

Used by ``make cluster-up`` / ``make cluster-down`` (the CLI at the bottom) and by the pytest
fixture ``k8s_cluster`` (tests/e2e/conftest.py). Everything lives in one state directory:

    <state>/pki/          CA, serving and client certificates, service-account keys (pki.py)
    <state>/kubeconfig    admin kubeconfig (system:masters), certificates embedded
    <state>/etcd/         etcd data (removed by stop())
    <state>/logs/         one log per component (kept after stop() for post-mortems)
    <state>/state.json    ports, PIDs and the API URL of the running cluster
    <state>/kueue/        Kueue's configuration and webhook certificates (``start_kueue``, ``KUEUE=1``)

Only processes this code started are stopped, by PID, after checking that the PID still runs the
binary it started with this state directory on its command line.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pki as pki_lib  # noqa: E402  (certificates and kubeconfigs: pki.py)

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD_SCRIPT = os.path.join(TOP, "hack", "k8s", "build.sh")
DEFAULT_STATE_DIR = os.path.join(TOP, ".cache", "cluster")
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# kube-scheduler scores every feasible node (see LocalCluster._scheduler_config)
SCHEDULER_PERCENTAGE_OF_NODES_TO_SCORE = 100
SERVICE_CIDR = "10.96.0.0/16"  # virtual IPs inside API objects only; no traffic goes there
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


class ClusterError(Exception):
    pass


def bin_dir(check=True):
    """The directory holding the built binaries; ClusterError with the build's reason when missing."""
    if not os.path.exists(BUILD_SCRIPT):
        raise ClusterError("%s is missing" % BUILD_SCRIPT)
    args = [BUILD_SCRIPT, "--check" if check else "--bin-dir"]
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          check=False)
    if proc.returncode != 0:
        raise ClusterError(proc.stderr.strip() or proc.stdout.strip() or "hack/k8s/build.sh --check failed")
    return proc.stdout.strip().splitlines()[-1]


KWOK_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
               "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml")


def kwok_stages(binaries, stages=KWOK_STAGES):
    """kwok's own default Stages (node init + heartbeat with lease, pod ready/complete/delete).

    The kwok binary embeds none: kwokctl passes them in a config file. Taken from the pinned
    sigs.k8s.io/kwok module (kustomize/stage/...) and cached next to the binary.
    """
    versions = {}
    with open(os.path.join(TOP, "hack", "k8s", "versions.env")) as f:
        for line in f:
            if "=" in line and not line.startswith("#"):
                k, v = line.strip().split("=", 1)
                versions[k] = v
    suffix = "" if tuple(stages) == KWOK_STAGES else "-" + "-".join(
        os.path.basename(st).replace(".yaml", "") for st in stages if st not in KWOK_STAGES[:2])
    path = os.path.join(binaries, "kwok-stages-%s%s.yaml" % (versions["KWOK_VERSION"], suffix))
    if os.path.exists(path):
        return path
    proc = subprocess.run(["go", "mod", "download", "-json", "sigs.k8s.io/kwok@" + versions["KWOK_VERSION"]],
                          cwd=os.path.join(TOP, "hack", "k8s", "kube"), stdout=subprocess.PIPE,
                          universal_newlines=True, check=False)
    if proc.returncode != 0:
        raise ClusterError("cannot download sigs.k8s.io/kwok@%s for its stage definitions"
                           % versions["KWOK_VERSION"])
    moddir = json.loads(proc.stdout)["Dir"]
    docs = []
    for rel in stages:
        with open(os.path.join(moddir, "kustomize", "stage", rel)) as f:
            docs.append(f.read().strip() + "\n")
    with open(path + ".tmp", "w") as f:
        f.write("---\n".join(docs))
    os.replace(path + ".tmp", path)
    return path


def build(stream=None):
    """Run hack/k8s/build.sh (builds what is missing; prints progress)."""
    proc = subprocess.run([BUILD_SCRIPT], stdout=stream, stderr=stream, check=False)
    if proc.returncode != 0:
        raise ClusterError("hack/k8s/build.sh failed with exit code %d" % proc.returncode)
    return bin_dir()


def free_ports(count):
    socks, ports = [], []
    try:
        for dummy in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


# ------------------------------------------------------------------------------------------ cluster

class LocalCluster(object):
    """One control plane in ``state_dir``. ``start()`` / ``stop()``; ``kubeconfig`` and ``api_url``."""

    def __init__(self, state_dir=DEFAULT_STATE_DIR, binaries=None, log=None, kwok_stages=KWOK_STAGES):
        self.state_dir = os.path.abspath(state_dir)
        self.pki_dir = os.path.join(self.state_dir, "pki")
        self.log_dir = os.path.join(self.state_dir, "logs")
        self.kubeconfig = os.path.join(self.state_dir, "kubeconfig")
        self.state_file = os.path.join(self.state_dir, "state.json")
        self._binaries = binaries
        # kwok's stages; without pod-complete, Job pods keep running (long jobs for Kueue's preemption test)
        self.kwok_stages = tuple(kwok_stages)
        self._log = log or (lambda msg: sys.stderr.write(msg + "\n"))
        self.state = self._read_state()
        self.started_here = False

    # -- state
    def _read_state(self):
        try:
            with open(self.state_file) as f:
                return json.load(f)
        except (IOError, OSError, ValueError):
            return {}

    def _write_state(self):
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=2, sort_keys=True)
        os.replace(tmp, self.state_file)

    @property
    def api_url(self):
        return self.state.get("api_url")

    @property
    def binaries(self):
        if self._binaries is None:
            self._binaries = bin_dir()
        return self._binaries

    # -- processes
    @staticmethod
    def _cmdline(pid):
        """The argv of a running process (bytes), or [] when it is gone or unreadable."""
        if not pid:
            return []
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return f.read().split(b"\0")
        except (IOError, OSError):
            return []

    def _alive(self, name):
        """True when the recorded PID still runs the binary we started for this state dir."""
        argv = self._cmdline(self.state.get("pids", {}).get(name))
        exe = os.path.join(self.state.get("binaries", ""), name)
        return bool(argv) and argv[0].decode(errors="replace") == exe and any(
            self.state_dir.encode() in a for a in argv[1:])

    def running(self):
        """All five components alive and the API server ready."""
        if not self.state.get("pids"):
            return False
        if not all(self._alive(c) for c in COMPONENTS):
            return False
        return self._ready(timeout=3)

    def _spawn(self, name, args):
        log_path = os.path.join(self.log_dir, name + ".log")
        logf = open(log_path, "ab")
        argv = [os.path.join(self.binaries, name)] + args
        logf.write(("\n# %s %s\n" % (datetime.datetime.now().isoformat(), " ".join(argv))).encode())
        logf.flush()
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=self.state_dir, start_new_session=True, close_fds=True)
        logf.close()
        self.state.setdefault("pids", {})[name] = proc.pid
        self._write_state()
        self._procs[name] = proc
        return proc

    def _check_exited(self, name):
        proc = self._procs.get(name)
        if proc is not None and proc.poll() is not None:
            raise ClusterError("%s exited with code %s during start-up; see %s"
                               % (name, proc.returncode, os.path.join(self.log_dir, name + ".log")))

    def _wait(self, name, probe, timeout):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            self._check_exited(name)
            try:
                if probe():
                    return
            except Exception as e:  # probe failures are expected while the component starts
                last = e
            time.sleep(0.2)
        raise ClusterError("%s not ready after %ss (%s); see %s"
                           % (name, timeout, last, os.path.join(self.log_dir, name + ".log")))

    @staticmethod
    def _https_ok(url, context):
        with urllib.request.urlopen(url, context=context, timeout=2) as r:
            return r.status == 200

    def _admin_ssl(self):
        ctx = ssl.create_default_context(cafile=os.path.join(self.pki_dir, "ca.crt"))
        ctx.load_cert_chain(os.path.join(self.pki_dir, "admin.crt"), os.path.join(self.pki_dir, "admin.key"))
        return ctx

    def _ready(self, timeout=60):
        url = (self.api_url or "") + "/readyz"
        if not self.api_url:
            return False
        try:
            return self._https_ok(url, self._admin_ssl())
        except Exception:
            return False

    # -- start / stop
    def start(self, timeout=90):
        """Start the control plane (or reuse the one already running in this state dir)."""
        if self.running():
            self._log("cluster already running: %s" % self.api_url)
            return self
        if self.state.get("pids"):
            self._log("stale cluster state in %s: stopping what is left" % self.state_dir)
            self.stop(keep_logs=True)
        t0 = time.time()
        binaries = self.binaries
        os.makedirs(self.log_dir, exist_ok=True)
        for c in COMPONENTS:
            open(os.path.join(self.log_dir, c + ".log"), "w").close()
        pki_lib.create(self.pki_dir)
        self._procs = {}
        etcd_client, etcd_peer, api, kcm, sched, kwok = free_ports(6)
        self.state = {"api_url": "https://127.0.0.1:%d" % api, "binaries": binaries,
                      "ports": {"etcd": etcd_client, "etcd-peer": etcd_peer, "kube-apiserver": api,
                                "kube-controller-manager": kcm, "kube-scheduler": sched, "kwok": kwok},
                      "pids": {}, "started": time.time()}
        self._write_state()
        self.started_here = True
        try:
            self._start_all(etcd_client, etcd_peer, api, kcm, sched, kwok)
        except BaseException:
            self.stop(keep_logs=True)
            raise
        self.state["ready_after_s"] = round(time.time() - t0, 1)
        self._write_state()
        self._log("cluster ready in %.1fs: %s" % (time.time() - t0, self.api_url))
        return self

    def _scheduler_config(self):
        """The default scheduler profile, scoring every feasible node (``percentageOfNodesToScore: 100``).

        Clusters under 100 nodes score them all anyway; larger ones (the what-if e2e test's 200 nodes,
        the stack benchmark's 100) would otherwise score a rotating sample of them, which makes the
        scheduler's choices depend on what else the cluster holds. Written beside the kubeconfigs.
        """
        path = os.path.join(self.state_dir, "scheduler-config.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: kubescheduler.config.k8s.io/v1\n"
                    "kind: KubeSchedulerConfiguration\n"
                    "clientConnection:\n"
                    "  kubeconfig: %s\n"
                    "leaderElection:\n"
                    "  leaderElect: false\n"
                    "percentageOfNodesToScore: %d\n"
                    % (os.path.join(self.state_dir, "scheduler.kubeconfig"), SCHEDULER_PERCENTAGE_OF_NODES_TO_SCORE))
        return path

    def _start_all(self, etcd_client, etcd_peer, api, kcm, sched, kwok_port):
        pki = self.pki_dir

        def p(name):
            return os.path.join(pki, name)

        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        # etcd: plain HTTP on loopback, no fsync (test data only)
        etcd_data = os.path.join(self.state_dir, "etcd")
        shutil.rmtree(etcd_data, ignore_errors=True)
        self._spawn("etcd", [
            "--name=gpuops-local", "--data-dir=" + etcd_data,
            "--listen-client-urls=http://127.0.0.1:%d" % etcd_client,
            "--advertise-client-urls=http://127.0.0.1:%d" % etcd_client,
            "--listen-peer-urls=http://127.0.0.1:%d" % etcd_peer,
            "--initial-advertise-peer-urls=http://127.0.0.1:%d" % etcd_peer,
            "--initial-cluster=gpuops-local=http://127.0.0.1:%d" % etcd_peer,
            "--unsafe-no-fsync", "--log-level=warn", "--quota-backend-bytes=2147483648",
        ])
        self._wait("etcd", lambda: urllib.request.urlopen(
            "http://127.0.0.1:%d/health" % etcd_client, timeout=2).status == 200, 30)

        self._spawn("kube-apiserver", [
            "--etcd-servers=http://127.0.0.1:%d" % etcd_client,
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=%d" % api,
            "--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
            "--client-ca-file=" + p("ca.crt"),
            "--service-account-key-file=" + p("sa.pub"), "--service-account-signing-key-file=" + p("sa.key"),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--api-audiences=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=" + SERVICE_CIDR,
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,Priority,"
            "DefaultTolerationSeconds,PodSecurity,ResourceQuota,NodeRestriction,TaintNodesByCondition,"
            "RuntimeClass,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook",
            "--allow-privileged=true",
            # webhooks behind a Service (Kueue's) are reached through its EndpointSlice, not a ClusterIP
            "--enable-aggregator-routing=true",
            # API aggregation (aggregated API servers such as the metrics lab's custom-metrics stand-in)
            "--requestheader-client-ca-file=" + p("ca.crt"), "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--proxy-client-cert-file=" + p("front-proxy-client.crt"),
            "--proxy-client-key-file=" + p("front-proxy-client.key"),
            # no kubelet answers for 127.0.0.1, so keep the 'kubernetes' Service without endpoints
            "--endpoint-reconciler-type=none",
            "--profiling=false", "--v=1",
        ])
        self._wait("kube-apiserver", self._ready, 60)

        for user, port in (("controller-manager", kcm), ("scheduler", sched), ("kwok", kwok_port)):
            pki_lib.kubeconfig(os.path.join(self.state_dir, user + ".kubeconfig"), self.api_url, pki, user)
        pki_lib.kubeconfig(self.kubeconfig, self.api_url, pki, "admin")

        kcm_cfg = os.path.join(self.state_dir, "controller-manager.kubeconfig")
        self._spawn("kube-controller-manager", [
            "--kubeconfig=" + kcm_cfg, "--authentication-kubeconfig=" + kcm_cfg,
            "--authorization-kubeconfig=" + kcm_cfg,
            "--bind-address=127.0.0.1", "--secure-port=%d" % kcm,
            "--cert-dir=" + os.path.join(self.state_dir, "controller-manager"),
            "--leader-elect=false", "--use-service-account-credentials=true",
            "--service-account-private-key-file=" + p("sa.key"), "--root-ca-file=" + p("ca.crt"),
            "--cluster-signing-cert-file=" + p("ca.crt"), "--cluster-signing-key-file=" + p("ca.key"),
            "--service-cluster-ip-range=" + SERVICE_CIDR,
            # every default controller: namespace, garbagecollector, resourcequota, deployment,
            # replicaset, daemonset, job, cronjob, horizontalpodautoscaling, nodelifecycle, ...
            "--controllers=*",
            "--concurrent-gc-syncs=5", "--horizontal-pod-autoscaler-sync-period=5s",
            "--node-monitor-grace-period=50s", "--v=1",
        ])
        self._spawn("kube-scheduler", [
            "--config=" + self._scheduler_config(),
            "--authentication-kubeconfig=" + os.path.join(self.state_dir, "scheduler.kubeconfig"),
            "--authorization-kubeconfig=" + os.path.join(self.state_dir, "scheduler.kubeconfig"),
            "--bind-address=127.0.0.1", "--secure-port=%d" % sched,
            "--cert-dir=" + os.path.join(self.state_dir, "scheduler"),
            # GPUOPS_SCHEDULER_V=10 logs every plugin's score per node (debugging placements)
            "--v=%s" % os.environ.get("GPUOPS_SCHEDULER_V", "1"),
        ])
        self._spawn("kwok", [
            "--kubeconfig=" + os.path.join(self.state_dir, "kwok.kubeconfig"),
            "--config=" + kwok_stages(self.binaries, self.kwok_stages),
            # manage only the fake nodes we create (annotation kwok.x-k8s.io/node=fake)
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=%s=fake" % KWOK_NODE_ANNOTATION,
            "--node-lease-duration-seconds=40",
            "--server-address=127.0.0.1:%d" % kwok_port,
            "--cidr=10.244.0.0/16", "--node-ip=10.240.0.1",
        ])
        self._wait("kube-controller-manager", lambda: self._https_ok(
            "https://127.0.0.1:%d/healthz" % kcm, insecure), 60)
        self._wait("kube-scheduler", lambda: self._https_ok(
            "https://127.0.0.1:%d/healthz" % sched, insecure), 60)
        self._wait("kwok", lambda: urllib.request.urlopen(
            "http://127.0.0.1:%d/healthz" % kwok_port, timeout=2).status == 200, 60)
        # the default ServiceAccount in "default" shows the controller-manager works end to end
        self._wait("kube-controller-manager", self._default_sa_exists, 60)

    def _default_sa_exists(self):
        from kubernetes import client, config
        api = client.CoreV1Api(config.new_client_from_config(self.kubeconfig))
        api.read_namespaced_service_account("default", "default")
        return True

    # -- the simulated lab's device plugin (tests/e2e/lib/sim_device_plugin.py) and Kueue
    _HELPER_MARKERS = {"sim-device-plugin": b"sim_device_plugin.py", "kueue": b"/kueue"}

    def _helper_alive(self, name):
        argv = self._cmdline(self.state.get("helpers", {}).get(name))
        recorded = self.state.get("helper_markers", {}).get(name)
        marker = recorded.encode() if recorded else self._HELPER_MARKERS.get(name, name.encode())
        return any(a.endswith(marker) for a in argv) and any(self.state_dir.encode() in a for a in argv)

    def kueue_running(self):
        return self._helper_alive("kueue")

    def start_kueue(self, timeout=180):
        """Start (or keep) the Kueue controller-manager built by ``hack/k8s/build.sh kueue`` (lib/kueue.py).

        Installs Kueue's CRDs and webhook configurations from its Go module, then waits until it is
        ready and its webhooks answer. ClusterError when the binary is not built.
        """
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import kueue as kueue_lib

        name = "kueue"
        if self._helper_alive(name):
            return self.state["helpers"][name]
        exe = os.path.join(self.binaries, "kueue")
        proc = subprocess.run([BUILD_SCRIPT, "--check", "kueue"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False)
        if proc.returncode != 0:
            raise ClusterError("Kueue is not built: %s (run: hack/k8s/build.sh kueue)" % proc.stderr.strip())
        t0 = time.time()
        try:
            ip = kueue_lib.host_ip()
            webhook_port, health_port, vis_port = free_ports(3)
            moddir = kueue_lib.module_dir()
            kueue_lib.apply(self.kubeconfig, kueue_lib.cluster_objects(webhook_port, ip, moddir))
        except kueue_lib.KueueError as e:
            raise ClusterError(str(e))
        kdir = os.path.join(self.state_dir, "kueue")
        os.makedirs(os.path.join(kdir, "certs"), exist_ok=True)
        cfg_path = os.path.join(kdir, "config.yaml")
        with open(cfg_path, "w") as f:
            json.dump(kueue_lib.config(self.state_dir, webhook_port, health_port, ip), f, indent=2)
        os.makedirs(self.log_dir, exist_ok=True)
        logf = open(os.path.join(self.log_dir, "kueue.log"), "ab")
        argv = [exe, "--config=" + cfg_path, "--kubeconfig=" + self.kubeconfig,
                "--feature-gates=VisibilityOnDemand=false", "--visibility-server-port=%d" % vis_port]
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=self.state_dir, start_new_session=True, close_fds=True)
        logf.close()
        self.state.setdefault("helpers", {})[name] = proc.pid
        self.state.setdefault("ports", {})["kueue-webhook"] = webhook_port
        self._write_state()
        self._procs = getattr(self, "_procs", {})
        self._procs[name] = proc
        # what the kubelet does for Kueue's pod: the Secret its cert rotator fills, mounted as files in its cert dir
        self._wait(name, lambda: kueue_lib.mount_secret(self.kubeconfig, os.path.join(kdir, "certs")), 60)
        self._wait(name, lambda: urllib.request.urlopen(
            "http://127.0.0.1:%d/readyz" % health_port, timeout=2).status == 200, timeout)
        # the webhooks answer once the API server can call them: a dry-run ResourceFlavor goes through both
        self._wait(name, self._kueue_webhook_ok, 60)
        self._log("kueue %s ready in %.1fs (webhooks on %s:%d)"
                  % (kueue_lib.version(), time.time() - t0, ip, webhook_port))
        return proc.pid

    def _kueue_webhook_ok(self):
        from kubernetes import client, config
        api = client.CustomObjectsApi(config.new_client_from_config(self.kubeconfig))
        api.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors",
                                         {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                          "metadata": {"name": "gpuops-webhook-probe"}}, dry_run="All")
        return True

    def add_helper(self, name, pid, marker):
        """Record a helper process (the metrics lab's) that stop() ends: ``marker`` ends one of its argv."""
        self.state.setdefault("helpers", {})[name] = pid
        self.state.setdefault("helper_markers", {})[name] = marker
        self._write_state()

    def start_sim_device_plugin(self, fleet, sim_dir):
        """Start (or keep) the process that publishes the simulated hosts' live GPUs on their nodes."""
        name = "sim-device-plugin"
        if self._helper_alive(name):
            return self.state["helpers"][name]
        os.makedirs(self.log_dir, exist_ok=True)
        logf = open(os.path.join(self.log_dir, name + ".log"), "ab")
        argv = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_device_plugin.py"),
                "--kubeconfig", self.kubeconfig, "--fleet", os.path.abspath(fleet),
                "--sim-dir", os.path.abspath(sim_dir)]
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=self.state_dir, start_new_session=True, close_fds=True)
        logf.close()
        self.state.setdefault("helpers", {})[name] = proc.pid
        self._write_state()
        return proc.pid

    def _stop_helpers(self, timeout=10):
        stopped = []
        if self._helper_alive("kueue") and self._alive("kube-apiserver"):
            try:  # a webhook of a stopped Kueue would refuse every Job
                sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
                import kueue as kueue_lib
                kueue_lib.remove_webhooks(self.kubeconfig)
            except Exception as e:  # the cluster is going away anyway; say so and go on
                self._log("could not remove Kueue's webhook configurations: %s" % e)
        for name, pid in sorted(self.state.get("helpers", {}).items()):
            if not self._helper_alive(name):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                continue
            deadline = time.time() + timeout
            while time.time() < deadline and self._helper_alive(name) and not self._reaped(pid):
                time.sleep(0.1)
            if self._helper_alive(name) and not self._reaped(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            stopped.append(name)
        return stopped

    def stop(self, keep_logs=True, timeout=20):
        """Stop the processes we started (by PID) and remove everything but the logs."""
        helpers = self._stop_helpers()
        pids = self.state.get("pids", {})
        alive = [c for c in reversed(COMPONENTS) if self._alive(c)]
        # clients first, then the API server (it needs etcd to shut down cleanly), then etcd
        for group in (("kwok", "kube-scheduler", "kube-controller-manager"), ("kube-apiserver",), ("etcd",)):
            members = [c for c in group if c in alive]
            for c in members:
                try:
                    os.kill(pids[c], signal.SIGTERM)
                except OSError:
                    pass
            deadline = time.time() + timeout
            for c in members:
                while time.time() < deadline and self._alive(c) and not self._reaped(pids[c]):
                    time.sleep(0.1)
                if self._alive(c) and not self._reaped(pids[c]):
                    try:
                        os.kill(pids[c], signal.SIGKILL)
                    except OSError:
                        pass
                    self._reaped(pids[c], block=True)
        for name in os.listdir(self.state_dir) if os.path.isdir(self.state_dir) else []:
            if keep_logs and name == "logs":
                continue
            path = os.path.join(self.state_dir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
        if not keep_logs:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        self.state = {}
        return helpers + alive

    def _reaped(self, pid, block=False):
        """Reap our own child (pytest fixture case); True when it is gone."""
        proc = getattr(self, "_procs", {})
        for p in proc.values():
            if p.pid == pid:
                if block:
                    p.wait(5)
                return p.poll() is not None
        if not os.path.exists("/proc/%d" % pid):
            return True
        try:  # a zombie of ours counts as gone
            with open("/proc/%d/stat" % pid) as f:
                return f.read().split(")")[-1].split()[0] == "Z"
        except (IOError, OSError):
            return True


# ---------------------------------------------------------------------------------------------- CLI

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("action", choices=["up", "down", "status"])
    ap.add_argument("--state-dir", default=os.environ.get("GPUOPS_CLUSTER_DIR", DEFAULT_STATE_DIR))
    ap.add_argument("--fleet", default=os.environ.get("GPUOPS_CLUSTER_FLEET",
                                                      os.path.join(TOP, "inventories", "sim", "hosts.yml")),
                    help="inventory whose hosts with gpuops_sim_gpus become kwok GPU nodes ('' for none)")
    ap.add_argument("--kueue", action="store_true", default=os.environ.get("KUEUE") == "1",
                    help="also start the Kueue controller-manager (hack/k8s/build.sh kueue); default: $KUEUE=1")
    ap.add_argument("--sim-dir", default=os.environ.get("GPUOPS_CLUSTER_SIM_DIR", os.path.join(TOP, ".cache", "sim")),
                    help="the fleet's NVML simulator states (<host>.json) that the simulated device plugin "
                         "publishes on the nodes ('' for no plugin)")
    ap.add_argument("--metrics", action="store_true", default=os.environ.get("METRICS") == "1",
                    help="also start the GPU metric path: simulated DCGM exporter, kube-state-metrics, Prometheus "
                         "and the custom-metrics stand-in (METRICS=1; docs/autoscaling.md)")
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    cluster = LocalCluster(args.state_dir, log=log)
    try:
        if args.action == "up":
            cluster.start()
            if args.fleet:
                sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
                import gpu_nodes
                nodes = gpu_nodes.apply_fleet(cluster.kubeconfig, gpu_nodes.fleet_from_inventory(args.fleet))
                log("kwok GPU nodes from %s: %s" % (args.fleet, ", ".join(sorted(nodes))))
                if args.sim_dir:
                    pid = cluster.start_sim_device_plugin(args.fleet, args.sim_dir)
                    log("simulated device plugin (pid %d) publishes the hosts' state files in %s; log: %s"
                        % (pid, args.sim_dir, os.path.join(cluster.log_dir, "sim-device-plugin.log")))
            if args.kueue:
                pid = cluster.start_kueue()
                log("kueue (pid %d); log: %s" % (pid, os.path.join(cluster.log_dir, "kueue.log")))
            if args.metrics:  # METRICS=1: the GPU metric path (tests/e2e/lib/metrics_lab.py)
                sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
                import metrics_lab
                lab = metrics_lab.MetricsLab(cluster, scrape_interval="5s").start()
                log("metrics: simulated DCGM exporter %s (PUT /load), kube-state-metrics %s, Prometheus %s, "
                    "custom.metrics.k8s.io served by the lab's stand-in (logs in %s)"
                    % (lab.exporter_url, lab.ksm_url, lab.prometheus_url, cluster.log_dir))
            print("export KUBECONFIG=%s" % cluster.kubeconfig, flush=True)
        elif args.action == "down":
            stopped = cluster.stop(keep_logs=True)
            log("stopped: %s (logs kept in %s)" % (", ".join(stopped) or "nothing was running", cluster.log_dir))
        else:
            if cluster.running():
                print("running: %s\nexport KUBECONFIG=%s" % (cluster.api_url, cluster.kubeconfig))
            else:
                print("not running")
                return 1
    except ClusterError as e:
        log("error: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
