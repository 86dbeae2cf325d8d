# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated lab's GPU metric path (lab code, never shipped): simulated DCGM exporter -> Prometheus
-> the lab's custom-metrics stand-in (aggregated API) -> the real HPA controller.

``MetricsLab(cluster).start(render_dir)`` with the local control plane of cluster.py running:

1. renders the dcgm_exporter role (render mode: ServiceMonitor, prometheus-adapter rules) into
   ``render_dir`` unless the files are there (``render_manifests``);
2. starts tests/e2e/lib/sim_dcgm_exporter.py, which keeps a file_sd file with one target per kwok GPU node,
   labelled as the ServiceMonitor's job would label them (sim_metrics.py);
3. starts kube-state-metrics (hack/k8s/build.sh kube-state-metrics) on 127.0.0.1 against the local
   apiserver (--kubeconfig), then Prometheus (hack/k8s/build.sh prometheus) on 127.0.0.1 with that job, the
   workloads' own latency job and a kube-state-metrics job, and the role's PrometheusRules (GPU health alerts,
   the dashboard's recording rules) as rule files, their groups evaluated every scrape interval;
4. starts gpuops-metrics-standin (hack/k8s/build.sh metrics-standin) with the role's adapter rules and
   a serving certificate for ``gpuops-metrics-standin.gpuops-lab-metrics.svc`` signed by the cluster CA;
5. registers it: a Service with an EndpointSlice that points at this machine's first non-loopback IPv4
   address, where the stand-in listens (cluster.py runs kube-apiserver with --enable-aggregator-routing, so
   the aggregator reaches an APIService's Service through its endpoints, which may not be loopback addresses;
   kueue.py's webhooks are reached the same way), and APIServices v1beta1/v1beta2.custom.metrics.k8s.io with
   the CA as caBundle.

PIDs are recorded as the cluster's helpers, so ``make cluster-down`` stops them.
"""
import contextlib
import datetime
import json
import os
import subprocess
import signal
import sys
import threading
import time
import urllib.request
import uuid

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import pki  # noqa: E402  (tests/e2e/lib on sys.path)
import playbook  # noqa: E402
TOP = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
NAMESPACE = "gpuops-lab-metrics"
SERVICE = "gpuops-metrics-standin"
GROUP = "custom.metrics.k8s.io"
# hack/k8s/build.sh's optional components the metric path runs
COMPONENTS = ("prometheus", "kube-state-metrics", "metrics-standin")
# namespace labels kube-state-metrics exports as kube_namespace_labels{label_<key>} (gpu_usage_report's tenant_label)
KSM_NAMESPACE_LABELS = ("team",)

RENDER_PLAYBOOK = playbook.localhost_yaml("Render the metric path's manifests (dcgm_exporter, render mode)", """\
  roles:
    - role: gpuops.k8s.dcgm_exporter
      vars:
        dcgm_exporter_mode: render
        dcgm_exporter_render_dir: "{{ render_dir }}"
        dcgm_exporter_service_monitor: true
        dcgm_exporter_prometheus_rule: true
""")


def render_manifests(render_dir, extra_vars=None):
    """Render the dcgm_exporter role (render mode) into ``render_dir``; returns (service monitor, rules text)."""
    os.makedirs(render_dir, exist_ok=True)
    play = os.path.join(render_dir, ".render.yml")
    with open(play, "w") as f:
        f.write(RENDER_PLAYBOOK)
    run = playbook.run(play, cwd=render_dir, timeout=300, expect_rc=None,
                       extra_vars=dict(extra_vars or {}, render_dir=os.path.abspath(render_dir)))
    if not run.ok:
        raise RuntimeError("rendering dcgm_exporter failed:\n%s" % run.explain())
    return read_manifests(render_dir)


def read_manifests(render_dir):
    sm, rules = None, None
    for name in sorted(os.listdir(render_dir)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(render_dir, name)) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                if doc.get("kind") == "ServiceMonitor":
                    sm = doc
                if doc.get("kind") == "ConfigMap" and "config.yaml" in (doc.get("data") or {}):
                    rules = doc["data"]["config.yaml"]
    if sm is None or rules is None:
        raise RuntimeError("%s holds no ServiceMonitor or adapter rules ConfigMap" % render_dir)
    return sm, rules


def read_rule_groups(render_dir):
    """The rule groups of the rendered PrometheusRules (GPU health alerts, the dashboard's recording rules)."""
    groups = []
    for name in sorted(os.listdir(render_dir)):
        if name.endswith(".yaml"):
            with open(os.path.join(render_dir, name)) as f:
                groups += [g for doc in yaml.safe_load_all(f) if doc and doc.get("kind") == "PrometheusRule"
                           for g in (doc.get("spec") or {}).get("groups") or []]
    if not groups:
        raise RuntimeError("%s holds no PrometheusRule (render with dcgm_exporter_prometheus_rule: true)" % render_dir)
    return groups


def lab_rule_groups(groups, interval):
    """The PrometheusRules' groups for the lab's Prometheus: each evaluated every ``interval`` (the lab's scrape
    interval) instead of the shipped one, so that recorded series exist seconds after the scrapes."""
    return {"groups": [dict(g, interval=interval) for g in groups]}


def prometheus_config(service_monitor, targets_file, exporter_port, scrape_interval=None, ksm_port=None,
                      rule_files=None):
    """prometheus.yml: the ServiceMonitor's job (targets from the exporter's file_sd file), the
    workloads' own latency job (honor_labels: their namespace/pod labels stay) and, with ``ksm_port``,
    kube-state-metrics' job (honor_labels, as kube-prometheus-stack's ServiceMonitor for it: the pods'
    namespace/pod labels stay)."""
    sys.path.insert(0, HERE)
    import sim_metrics  # noqa  (tests/e2e/lib on sys.path)
    job = sim_metrics.scrape_config(service_monitor, [])
    del job["static_configs"]
    job["file_sd_configs"] = [{"files": [targets_file], "refresh_interval": "5s"}]
    if scrape_interval:
        job["scrape_interval"] = scrape_interval
        job["scrape_timeout"] = scrape_interval
    interval = job["scrape_interval"]
    cfg = {"global": {"scrape_interval": interval, "evaluation_interval": interval},
           "scrape_configs": [job, {"job_name": "gpuops-lab-workloads", "honor_labels": True,
                                    "scrape_interval": interval, "scrape_timeout": job["scrape_timeout"],
                                    "metrics_path": "/workload/metrics",
                                    "static_configs": [{"targets": ["127.0.0.1:%d" % exporter_port]}]}]}
    if ksm_port:
        cfg["scrape_configs"].append({"job_name": "kube-state-metrics", "honor_labels": True,
                                      "scrape_interval": interval, "scrape_timeout": job["scrape_timeout"],
                                      "static_configs": [{"targets": ["127.0.0.1:%d" % ksm_port]}]})
    if rule_files:
        cfg["rule_files"] = list(rule_files)
    return cfg


@contextlib.contextmanager
def kwok_lab(handle, tmp_path_factory, tag, mig_config):
    """Two kwok A100 80GB nodes (one GPU each, ``mig_config`` on it, labelled ``e2e-<tag>=<id>``) and the whole metric
    path on them; yields {lab, sel, nodes, u, tmp}; all is stopped and deleted afterwards. ``handle``: k8s_cluster."""
    import cluster as cluster_lib  # noqa  (tests/e2e/lib on sys.path)
    import gpu_nodes  # noqa
    from wait import nodes_schedulable  # noqa
    u = uuid.uuid4().hex[:6]
    core = handle.core
    sel = {"e2e-" + tag: u}
    nodes = ["e2e-%s-a100-%d-%s" % (tag, i, u) for i in range(2)]
    for n in nodes:
        gpu_nodes.ensure_node(core, n, gpus=[{"model": "a100_80gb", "count": 1}], mig_strategy="mixed",
                              mig_config=mig_config, labels=sel)
    nodes_schedulable(core, "e2e-%s=%s" % (tag, u), 2)
    m = MetricsLab(cluster_lib.LocalCluster(handle.state_dir), scrape_interval="2s")
    try:
        m.start(render_dir=str(tmp_path_factory.mktemp(tag + "-render")))
        yield {"lab": m, "sel": sel, "nodes": nodes, "u": u, "tmp": tmp_path_factory.mktemp(tag)}
    finally:
        m.stop()
        for n in nodes:
            gpu_nodes.delete_node(core, n)


class MetricsLab(object):
    """The metric path's processes for one LocalCluster (tests/e2e/lib/cluster.py)."""

    def __init__(self, cluster, scrape_interval="2s"):
        self.cluster = cluster
        self.dir = os.path.join(cluster.state_dir, "metrics")
        self.scrape_interval = scrape_interval
        self.procs = {}
        self.ports = {}
        self.ip = None
        self._manifests = None
        self._rule_groups = None
        self.render_dir = None  # the dcgm_exporter role's rendered manifests (start_exporter)
        self._build = None  # hack/k8s/build.sh while it builds the lab's Go components (stop() ends it)
        self._stopping = False
        self.build_log = None  # where a build of the metric path's Go components writes (default: this process's output)
        self._lock = threading.Lock()

    @property
    def prometheus_url(self):
        return "http://127.0.0.1:%d" % self.ports["prometheus"]

    @property
    def ksm_url(self):
        return "http://127.0.0.1:%d" % self.ports["ksm"]

    @property
    def exporter_url(self):
        return "http://127.0.0.1:%d" % self.ports["exporter"]

    def _bin(self, name):
        from cluster import BUILD_SCRIPT  # noqa

        def check():
            return subprocess.run([BUILD_SCRIPT, "--check"] + list(COMPONENTS), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, check=False)
        proc = check()
        if proc.returncode != 0:
            # cold: build them now (Prometheus 1.5-4 min; the stand-in seconds once the control plane is built), like
            # the k8s_cluster fixture builds the control plane; fail with the reason if that cannot be done
            with self._lock:
                if self._stopping:
                    raise RuntimeError("stopped before the metric path's Go components were built")
                out = open(self.build_log, "ab") if self.build_log else None  # None: this process's output
                try:
                    self._build = subprocess.Popen([BUILD_SCRIPT] + list(COMPONENTS), stdout=out,
                                                   stderr=subprocess.STDOUT if out else None, start_new_session=True)
                finally:
                    if out:
                        out.close()
            returncode = self._build.wait()
            proc = check()
            if returncode != 0 or proc.returncode != 0:
                raise RuntimeError(proc.stderr.strip() + " (hack/k8s/build.sh %s failed%s)"
                                   % (" ".join(COMPONENTS), "; see " + self.build_log if self.build_log else ""))
        return os.path.join(proc.stdout.strip().splitlines()[-1], name)

    def _spawn(self, name, argv):
        os.makedirs(self.cluster.log_dir, exist_ok=True)
        logf = open(os.path.join(self.cluster.log_dir, name + ".log"), "ab")
        logf.write(("\n# %s %s\n" % (datetime.datetime.now().isoformat(), " ".join(argv))).encode())
        logf.flush()
        with self._lock:  # never a process after stop(): start_serving may run in a thread of its own
            if self._stopping:
                logf.close()
                raise RuntimeError("stopped before %s started" % name)
            proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=self.dir, start_new_session=True, close_fds=True)
            logf.close()
            self.procs[name] = proc
        self.cluster.add_helper(name, proc.pid, argv[1] if argv[0] == sys.executable else argv[0])
        return proc

    def _wait(self, name, probe, timeout):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise RuntimeError("%s exited (%s); see %s" % (name, proc.returncode,
                                                               os.path.join(self.cluster.log_dir, name + ".log")))
            try:
                if probe():
                    return
            except Exception as e:
                last = e
            time.sleep(0.5)
        raise RuntimeError("%s not ready after %ss (%s)" % (name, timeout, last))

    def start(self, render_dir=None, timeout=120):
        """The whole metric path, ready when this returns."""
        self.start_exporter(render_dir)
        return self.start_serving(timeout)

    def start_exporter(self, render_dir=None):
        """The simulated DCGM exporter alone (Python: nothing to build); ``exporter_url`` is valid after it."""
        from cluster import free_ports
        os.makedirs(self.dir, exist_ok=True)
        render_dir = render_dir or os.path.join(self.dir, "rendered")
        self.render_dir = render_dir
        try:
            sm, rules = read_manifests(render_dir)
            self._rule_groups = read_rule_groups(render_dir)
        except (RuntimeError, OSError):  # not rendered yet (or before the PrometheusRules were)
            sm, rules = render_manifests(render_dir)
            self._rule_groups = read_rule_groups(render_dir)
        self._manifests = (sm, rules)
        sm_file = os.path.join(self.dir, "service-monitor.yaml")
        with open(sm_file, "w") as f:
            yaml.safe_dump(sm, f)
        (exporter,) = free_ports(1)
        self.ports = {"exporter": exporter}
        targets = os.path.join(self.dir, "dcgm-targets.json")
        with open(targets, "w") as f:
            f.write("[]")
        self._spawn("sim-dcgm-exporter", [sys.executable, os.path.join(HERE, "sim_dcgm_exporter.py"),
                                          "--kubeconfig", self.cluster.kubeconfig, "--port", str(exporter),
                                          "--targets-file", targets, "--service-monitor", sm_file,
                                          "--state-dir", self.cluster.state_dir])
        self._wait("sim-dcgm-exporter", lambda: urllib.request.urlopen(self.exporter_url + "/health", timeout=2).status == 200, 30)
        return self

    def start_serving(self, timeout=120):
        """kube-state-metrics, Prometheus and the stand-in behind API aggregation (built first when missing: minutes, cold); after
        start_exporter. The custom metrics API is Available when this returns."""
        from cluster import free_ports
        prom_bin, standin_bin = self._bin("prometheus"), self._bin("gpuops-metrics-standin")
        ksm_bin = self._bin("kube-state-metrics")
        sm, rules = self._manifests
        rules_file = os.path.join(self.dir, "adapter-rules.yaml")
        with open(rules_file, "w") as f:
            f.write(rules)
        prom, standin, ksm, ksm_telemetry = free_ports(4)
        self.ports.update(prometheus=prom, standin=standin, ksm=ksm, ksm_telemetry=ksm_telemetry)
        # kube-state-metrics against the local apiserver: the pods' GPU requests, phases, owners and priority
        # classes, the namespaces' tenant labels (gpu_usage_report, the dashboard's recording rules)
        self._spawn("kube-state-metrics", [
            ksm_bin, "--kubeconfig=" + self.cluster.kubeconfig, "--host=127.0.0.1", "--port=%d" % ksm,
            "--telemetry-host=127.0.0.1", "--telemetry-port=%d" % ksm_telemetry,
            "--resources=pods,namespaces,nodes",
            "--metric-labels-allowlist=namespaces=[%s]" % ",".join(KSM_NAMESPACE_LABELS)])
        self._wait("kube-state-metrics", self._ksm_ready, timeout)
        lab_rules = os.path.join(self.dir, "lab-rules.yaml")
        with open(lab_rules, "w") as f:
            yaml.safe_dump(lab_rule_groups(self._rule_groups, self.scrape_interval), f, sort_keys=False)
        prom_cfg = os.path.join(self.dir, "prometheus.yml")
        with open(prom_cfg, "w") as f:
            yaml.safe_dump(prometheus_config(sm, os.path.join(self.dir, "dcgm-targets.json"), self.ports["exporter"],
                                             self.scrape_interval, ksm_port=ksm, rule_files=[lab_rules]),
                           f, sort_keys=False)
        self._spawn("prometheus", [prom_bin, "--config.file=" + prom_cfg,
                                   "--storage.tsdb.path=" + os.path.join(self.dir, "tsdb"),
                                   "--web.listen-address=127.0.0.1:%d" % prom, "--storage.tsdb.retention.time=2h",
                                   "--log.level=warn"])
        self._wait("prometheus", lambda: urllib.request.urlopen(self.prometheus_url + "/-/ready", timeout=2).status == 200, timeout)
        crt, key = pki.serving_cert(self.cluster.pki_dir, os.path.join(self.dir, "pki"),
                                    ["%s.%s.svc" % (SERVICE, NAMESPACE), "localhost"])
        kc = self.cluster.kubeconfig
        from kueue import host_ip
        self.ip = host_ip()
        self._spawn("gpuops-metrics-standin", [
            standin_bin, "--secure-port=%d" % standin, "--bind-address=" + self.ip,
            "--tls-cert-file=" + crt, "--tls-private-key-file=" + key,
            "--lister-kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
            "--prometheus-url=" + self.prometheus_url, "--rules=" + rules_file, "--v=2"])
        self._register()
        self._wait("gpuops-metrics-standin", self._available, timeout)
        return self

    def _ksm_ready(self):
        # /healthz on the metrics port answers at once; the pod and namespace stores are synced when
        # kube_namespace_created (every namespace has one) is served
        with urllib.request.urlopen(self.ksm_url + "/metrics", timeout=2) as r:
            return b"kube_namespace_created{" in r.read()

    def _apis(self):
        from kubernetes import client, config
        api = config.new_client_from_config(self.cluster.kubeconfig)
        return client.CoreV1Api(api), client.ApiregistrationV1Api(api)

    def _register(self):
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        import base64
        core, reg = self._apis()
        try:
            core.create_namespace({"metadata": {"name": NAMESPACE}})
        except ApiException as e:
            if e.status != 409:
                raise
        # a Service without selector and its EndpointSlice at the stand-in's address (the aggregator routes to
        # endpoints; an ExternalName Service is "unsupported service type" there)
        try:
            core.delete_namespaced_service(SERVICE, NAMESPACE)
        except ApiException as e:
            if e.status != 404:
                raise
        core.create_namespaced_service(NAMESPACE, {"metadata": {"name": SERVICE, "namespace": NAMESPACE},
                                                   "spec": {"ports": [{"port": 443, "protocol": "TCP",
                                                                       "targetPort": self.ports["standin"]}]}})
        disc = client.DiscoveryV1Api(core.api_client)
        slice_name = SERVICE + "-local"
        try:
            disc.delete_namespaced_endpoint_slice(slice_name, NAMESPACE)
        except ApiException as e:
            if e.status != 404:
                raise
        disc.create_namespaced_endpoint_slice(NAMESPACE, {
            "metadata": {"name": slice_name, "namespace": NAMESPACE,
                         "labels": {"kubernetes.io/service-name": SERVICE,
                                    "endpointslice.kubernetes.io/managed-by": "gpuops.k8s"}},
            "addressType": "IPv4", "endpoints": [{"addresses": [self.ip], "conditions": {"ready": True}}],
            "ports": [{"port": self.ports["standin"], "protocol": "TCP"}]})
        with open(os.path.join(self.cluster.pki_dir, "ca.crt"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        for version, prio in (("v1beta2", 200), ("v1beta1", 100)):
            name = "%s.%s" % (version, GROUP)
            body = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
                    "spec": {"group": GROUP, "version": version, "groupPriorityMinimum": 100, "versionPriority": prio,
                             "service": {"name": SERVICE, "namespace": NAMESPACE, "port": 443},
                             "caBundle": ca}}
            try:
                reg.delete_api_service(name)
            except ApiException as e:
                if e.status != 404:
                    raise
            reg.create_api_service(body)

    def _available(self):
        dummy, reg = self._apis()
        svc = reg.read_api_service("v1beta2." + GROUP)
        return any(c.type == "Available" and c.status == "True" for c in (svc.status.conditions or []))

    def put_load(self, load):
        req = urllib.request.Request(self.exporter_url + "/load", data=json.dumps(load).encode(), method="PUT")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def query(self, promql):
        import urllib.parse
        with urllib.request.urlopen(self.prometheus_url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql}),
                                    timeout=5) as r:
            return json.loads(r.read())["data"]["result"]

    def stop(self):
        from kubernetes.client.rest import ApiException
        with self._lock:
            self._stopping = True
            if self._build is not None and self._build.poll() is None:
                os.killpg(self._build.pid, signal.SIGTERM)  # the build script and its go builds
                self._build.wait(30)
        try:
            dummy, reg = self._apis()
            for version in ("v1beta2", "v1beta1"):
                try:
                    reg.delete_api_service("%s.%s" % (version, GROUP))
                except ApiException:
                    pass
        except Exception:
            pass
        for name, proc in self.procs.items():
            if proc.poll() is None:
                proc.terminate()
        for name, proc in self.procs.items():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.procs = {}
