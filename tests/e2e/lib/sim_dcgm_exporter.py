# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated lab's DCGM exporter (lab code, like the kwok nodes; never shipped).

On a real GPU node dcgm-exporter reads each GPU / MIG instance through DCGM and, with the kubelet's
pod-resources API, labels a device with the pod it is allocated to. This process does the same for the
kwok GPU nodes: every second it reads the nodes (``nvidia.com/*`` capacity, ``nvidia.com/gpu.count``,
``nvidia.com/gpu.product``) and the pods bound to them, hands each pod the first free devices of the
resource it requests (kept while the pod lives, as the device plugin does), and serves
dcgm-exporter's exposition per node (plugins/module_utils/metrics/dcgm.py):

    GET /nodes/<node>/metrics   DCGM_FI_DEV_GPU_UTIL, DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_FB_USED/FREE
    GET /workload/metrics       the workloads' own request_latency_seconds histograms (namespace, pod labels)
    PUT /load                   the load a test drives: {"rules": [{"namespace", "pod_prefix", "gpu": 0-100,
                                "latency": seconds, "curve": [[seconds, gpu], ...], "fb_used_mib": MiB,
                                "fb_curve": [[seconds, MiB], ...]}], "default": 0-100,
                                "health": [{"node", "gpu": index, "xid": last Xid, "ecc_dbe": count}]}
    GET /load, GET /allocations the current load rules and the pod -> device map

The first matching rule (namespace, pod name prefix) gives a busy device its activity; ``curve`` is a
load curve interpolated linearly over the seconds since the PUT. ``fb_used_mib`` / ``fb_curve`` (same
interpolation) set the framebuffer a matching pod's device uses (DCGM_FI_DEV_FB_USED, capped at the device's
memory); without them it follows the activity (10 % + 80 % x activity of the device's memory), as before.
Each physical GPU also reports the health fields of dcgm-exporter's default counters (HEALTH_FIELDS: temperature
30 + 40 x the mean activity of its devices in C, the last Xid and the uncorrected ECC count, 0 unless a ``health``
entry of the load sets them), one series per GPU without pod labels. Prometheus finds one target per node in
the file_sd file this process keeps (``--targets-file``), labelled as the dcgm_exporter role's
ServiceMonitor would label them (sim_metrics.py).
"""
import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gpu_nodes  # noqa: E402,F401  (puts the collection on sys.path)
import sim_metrics  # noqa: E402  (device allocation, the ServiceMonitor's scrape job)
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dcgm  # noqa: E402

LATENCY_BUCKETS = ["0.05", "0.1", "0.25", "0.5", "1", "2.5"]
# dcgm-exporter's default health counters, per physical GPU (name -> type, help)
HEALTH_FIELDS = (("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
                 ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
                 ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."))
REQUESTS_PER_SECOND = 10.0


class State(object):
    def __init__(self):
        self.lock = threading.Lock()
        self.nodes = {}        # node -> {devices, model}
        self.pods = {}         # node -> [pod dicts]
        self.alloc = {}        # node -> {device key: owner}
        self.load = {"rules": [], "default": 0}
        self.load_since = time.time()
        self.histograms = {}   # (ns, pod) -> {"cum": {le: n}, "sum": s, "count": n, "t": last}

    def rule_for(self, namespace, pod):
        for r in self.load.get("rules") or []:
            if r.get("namespace", namespace) == namespace and pod.startswith(r.get("pod_prefix", "")):
                return r
        return None

    def _curve(self, curve):
        t = time.time() - self.load_since
        pts = sorted((float(a), float(b)) for a, b in curve)
        if t <= pts[0][0]:
            return pts[0][1]
        for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
            if t0 <= t <= t1:
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return pts[-1][1]

    def gpu(self, owner):
        if not owner:
            return 0
        r = self.rule_for(owner["namespace"], owner["pod"])
        if r is None:
            return float(self.load.get("default", 0))
        if r.get("curve"):
            return self._curve(r["curve"])
        return float(r.get("gpu", self.load.get("default", 0)))

    def fb_used(self, owner):
        """The framebuffer MiB a rule sets for the owner's device, or None (then it follows the activity)."""
        r = self.rule_for(owner["namespace"], owner["pod"]) if owner else None
        if r is None:
            return None
        if r.get("fb_curve"):
            return self._curve(r["fb_curve"])
        return float(r["fb_used_mib"]) if r.get("fb_used_mib") is not None else None


def health_text(state, node, devices, model):
    """The health fields of ``node``'s physical GPUs (HEALTH_FIELDS), under state.lock."""
    gpus = {}
    for d in devices:
        g = gpus.setdefault(d["gpu"], {"uuid": d["uuid"], "acts": []})
        g["acts"].append(state.gpu(state.alloc.get(node, {}).get(d["key"])))
    set_by = dict(((str(h.get("node")), int(h.get("gpu", 0))), h) for h in state.load.get("health") or [])
    out = []
    for name, ftype, help_text in HEALTH_FIELDS:
        out += ["# HELP %s %s" % (name, help_text), "# TYPE %s %s" % (name, ftype)]
        for index in sorted(gpus):
            g, h = gpus[index], set_by.get((node, index), {})
            value = {"DCGM_FI_DEV_GPU_TEMP": int(round(30 + 0.4 * sum(g["acts"]) / len(g["acts"]))),
                     "DCGM_FI_DEV_XID_ERRORS": int(h.get("xid", 0)),
                     "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": int(h.get("ecc_dbe", 0))}[name]
            out.append('%s{gpu="%d",UUID="%s",device="nvidia%d",modelName="%s",Hostname="%s"} %d'
                       % (name, index, g["uuid"], index, model, node, value))
    return "\n".join(out) + "\n"


def _pod_entry(p):
    requests = {}
    for c in p.spec.containers or []:
        for k, v in ((c.resources.limits or {}) if c.resources else {}).items():
            requests[k] = requests.get(k, 0) + int(v) if str(v).isdigit() else requests.get(k, 0)
    return {"namespace": p.metadata.namespace, "name": p.metadata.name,
            "container": p.spec.containers[0].name if p.spec.containers else "", "requests": requests,
            "created": p.metadata.creation_timestamp}


def poll(state, kubeconfig, targets_file, service_monitor, address, interval=1.0):
    api = gpu_nodes.core_api(kubeconfig)
    last_targets = None
    while True:
        try:
            nodes = api.list_node().items
            pods = api.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items
            by_node = {}
            for p in pods:
                if p.metadata.deletion_timestamp or p.status.phase in ("Succeeded", "Failed"):
                    continue
                by_node.setdefault(p.spec.node_name, []).append(_pod_entry(p))
            new_nodes = {}
            for n in nodes:
                labels = n.metadata.labels or {}
                count = labels.get("nvidia.com/gpu.count")
                if not count:
                    continue
                cap = dict((k, v) for k, v in (n.status.capacity or {}).items() if k.startswith("nvidia.com/"))
                new_nodes[n.metadata.name] = {"devices": dcgm.node_devices(n.metadata.name, cap, count),
                                              "model": labels.get("nvidia.com/gpu.product", "NVIDIA GPU")}
            with state.lock:
                state.nodes = new_nodes
                for node in new_nodes:
                    plist = sorted(by_node.get(node, []), key=lambda p: (str(p["created"]), p["name"]))
                    state.pods[node] = plist
                    state.alloc[node] = sim_metrics.allocate(new_nodes[node]["devices"], plist, state.alloc.get(node))
            names = sorted(new_nodes)
            if targets_file and names != last_targets:
                groups = sim_metrics.scrape_config(service_monitor, [
                    {"address": address, "node": n, "pod": "%s-%s" % (service_monitor["metadata"]["name"], n),
                     "metrics_path": "/nodes/%s/metrics" % n} for n in names])["static_configs"]
                tmp = targets_file + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(groups, f, indent=1)
                os.replace(tmp, targets_file)
                last_targets = names
        except Exception as e:  # the API server may restart; try again
            sys.stderr.write("poll: %s\n" % e)
        time.sleep(interval)


def workload_text(state):
    now = time.time()
    series = []
    with state.lock:
        live = set()
        for node, plist in state.pods.items():
            for p in plist:
                r = state.rule_for(p["namespace"], p["name"])
                if not r or "latency" not in r:
                    continue
                key = (p["namespace"], p["name"])
                live.add(key)
                h = state.histograms.setdefault(key, {"cum": dict((le, 0) for le in LATENCY_BUCKETS), "sum": 0.0,
                                                      "count": 0, "t": now})
                n = int(round((now - h["t"]) * REQUESTS_PER_SECOND))
                if n > 0:
                    lat = float(r["latency"])
                    for le in LATENCY_BUCKETS:
                        if lat <= float(le):
                            h["cum"][le] += n
                    h["sum"] += n * lat
                    h["count"] += n
                    h["t"] = now
                series.append(({"namespace": key[0], "pod": key[1]}, dict(h["cum"]), round(h["sum"], 6), h["count"]))
        for key in list(state.histograms):
            if key not in live:
                del state.histograms[key]
    return dcgm.histogram("request_latency_seconds", series, LATENCY_BUCKETS)


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            pass

        def _send(self, code, body, ctype="text/plain; version=0.0.4; charset=utf-8"):
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            parts = self.path.split("?")[0].strip("/").split("/")
            if parts == ["health"]:
                return self._send(200, "ok\n")
            if parts == ["load"]:
                with state.lock:
                    return self._send(200, json.dumps(state.load), "application/json")
            if parts == ["allocations"]:
                with state.lock:
                    return self._send(200, json.dumps(state.alloc, sort_keys=True), "application/json")
            if parts == ["workload", "metrics"]:
                return self._send(200, workload_text(state))
            if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "metrics":
                with state.lock:
                    node = state.nodes.get(parts[1])
                    if node is None:
                        return self._send(404, "unknown node %s\n" % parts[1])
                    text = dcgm.render(parts[1], node["devices"], state.alloc.get(parts[1], {}), state.gpu,
                                       model=node["model"], memory=state.fb_used)
                    text += health_text(state, parts[1], node["devices"], node["model"])
                return self._send(200, text)
            return self._send(404, "not found\n")

        def do_PUT(self):
            if self.path.split("?")[0].strip("/") != "load":
                return self._send(404, "not found\n")
            try:
                load = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                for r in load.get("rules") or []:
                    for v in [r.get("gpu", 0)] + [b for a, b in r.get("curve") or []]:
                        if not 0 <= float(v) <= 100:
                            raise ValueError("gpu load %r is outside 0-100" % v)
                    for v in [r.get("fb_used_mib") or 0] + [b for a, b in r.get("fb_curve") or []]:
                        if float(v) < 0:
                            raise ValueError("fb_used_mib %r is negative" % v)
                for h in load.get("health") or []:
                    if not h.get("node") or int(h.get("xid", 0)) < 0 or int(h.get("ecc_dbe", 0)) < 0:
                        raise ValueError("health entry %r: needs node, xid and ecc_dbe 0 or more" % h)
            except (ValueError, TypeError, AttributeError) as e:
                return self._send(400, "bad load: %s\n" % e)
            with state.lock:
                state.load = load
                state.load_since = time.time()
            return self._send(200, json.dumps(load), "application/json")

    return Handler


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--targets-file", help="file_sd targets file for Prometheus (one target per GPU node)")
    ap.add_argument("--service-monitor", help="the dcgm_exporter role's rendered ServiceMonitor (YAML)")
    ap.add_argument("--state-dir", help="unused; names the cluster this helper belongs to")
    args = ap.parse_args(argv)
    sm = None
    if args.service_monitor:
        import yaml
        with open(args.service_monitor) as f:
            sm = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "ServiceMonitor"][0]
    state = State()
    t = threading.Thread(target=poll, args=(state, args.kubeconfig, args.targets_file, sm,
                                            "127.0.0.1:%d" % args.port), daemon=True)
    t.start()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state))
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
