# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kueue controller-manager next to the local control plane (``KUEUE=1 make cluster-up``).

The binary is built from sigs.k8s.io/kueue by ``hack/k8s/build.sh kueue`` (an optional component);
its CRDs and webhook configurations come from the same module's own manifests
(config/components/crd/bases, config/components/webhook/manifests.yaml).

How it runs here, and why:

* Kueue's internal certificate management is on (as in a release install): it writes a CA and a
  serving certificate for ``kueue-webhook-service.kueue-system.svc`` into a Secret and its cert
  directory and injects the CA into ``kueue-{mutating,validating}-webhook-configuration``.
* The API server reaches a webhook Service through its endpoints (``--enable-aggregator-routing``,
  set by cluster.py) and checks the certificate against the Service's DNS name. Endpoints may not
  be loopback addresses, so the webhook server listens on this machine's first non-loopback IPv4
  address and the Service's EndpointSlice points there.
* Only the webhooks of Kueue's own objects and of batch/v1 Jobs are registered (the only
  integration enabled): a webhook for a framework that is not running would fail every request.
* The visibility API server (an aggregated API) is off: nothing here uses it.
* Kueue uses the admin kubeconfig (system:masters); its RBAC is not under test here.
"""

import glob
import json
import os
import socket
import subprocess

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WRAPPER = os.path.join(TOP, "hack", "k8s", "kueue")
NAMESPACE = "kueue-system"
SERVICE = "kueue-webhook-service"
SECRET = "kueue-webhook-server-cert"
WEBHOOK_GROUPS = ("kueue.x-k8s.io", "batch")
WEBHOOK_CONFIG_NAMES = {"MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
                        "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration"}


class KueueError(Exception):
    pass


def version():
    with open(os.path.join(WRAPPER, "go.mod")) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "sigs.k8s.io/kueue":
                return parts[1]
    raise KueueError("sigs.k8s.io/kueue is not in %s/go.mod" % WRAPPER)


def module_dir():
    """The sigs.k8s.io/kueue module (from the Go module cache; downloaded when missing)."""
    proc = subprocess.run(["go", "mod", "download", "-json", "sigs.k8s.io/kueue@" + version()], cwd=WRAPPER,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if proc.returncode != 0:
        raise KueueError("cannot download sigs.k8s.io/kueue@%s: %s" % (version(), proc.stderr.strip()))
    return json.loads(proc.stdout)["Dir"]


def crds(moddir=None):
    """Kueue's CRDs with the conversion webhooks its kustomization enables (patches/webhook_in_*.yaml),
    pointing at SERVICE: Kueue's cert rotator injects its CA there and waits until it has."""
    moddir = moddir or module_dir()
    crd_dir = os.path.join(moddir, "config", "components", "crd")
    out = []
    for path in sorted(glob.glob(os.path.join(crd_dir, "bases", "*.yaml"))):
        with open(path) as f:
            out.extend(d for d in yaml.safe_load_all(f) if d)
    if not out:
        raise KueueError("no CRDs in %s/bases" % crd_dir)
    with open(os.path.join(crd_dir, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    by_name = dict((c["metadata"]["name"], c) for c in out)
    for entry in kustomization.get("patches") or []:
        rel = entry.get("path", "") if isinstance(entry, dict) else str(entry)
        if not os.path.basename(rel).startswith("webhook_in_"):
            continue
        with open(os.path.join(crd_dir, rel)) as f:
            patch = yaml.safe_load(f)
        conversion = patch["spec"]["conversion"]
        conversion["webhook"]["clientConfig"]["service"] = {
            "namespace": NAMESPACE, "name": SERVICE, "path": conversion["webhook"]["clientConfig"]["service"]["path"],
            "port": 443}
        by_name[patch["metadata"]["name"]]["spec"]["conversion"] = conversion
    return out


def webhook_configurations(port, moddir=None):
    """Kueue's webhook configurations, only for its own objects and Jobs, pointing at SERVICE:port."""
    moddir = moddir or module_dir()
    with open(os.path.join(moddir, "config", "components", "webhook", "manifests.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    out = []
    for doc in docs:
        hooks = []
        for hook in doc.get("webhooks") or []:
            groups = set(g for r in hook.get("rules") or [] for g in r.get("apiGroups") or [])
            if not groups or not groups <= set(WEBHOOK_GROUPS):
                continue
            svc = hook["clientConfig"]["service"]
            hook["clientConfig"] = {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": svc["path"],
                                                "port": port}}
            hooks.append(hook)
        doc["metadata"] = {"name": WEBHOOK_CONFIG_NAMES[doc["kind"]]}
        doc["webhooks"] = hooks
        out.append(doc)
    return out


def host_ip():
    """This machine's first non-loopback IPv4 address (endpoints cannot be loopback); Linux interfaces."""
    import fcntl
    import struct

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _index, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
            except OSError:
                continue  # no IPv4 address on this interface
            ip = socket.inet_ntoa(packed[20:24])
            if not ip.startswith("127."):
                return ip
    finally:
        s.close()
    raise KueueError("Kueue's webhooks need a non-loopback IPv4 address on this machine (the API server "
                     "reaches them through a Service endpoint, which may not be 127.x); none found")


def config(state_dir, webhook_port, health_port, ip):
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": "127.0.0.1:%d" % health_port},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": ip, "certDir": os.path.join(state_dir, "kueue", "certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": True, "webhookServiceName": SERVICE, "webhookSecretName": SECRET},
        "integrations": {"frameworks": ["batch/job"]},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def cluster_objects(webhook_port, ip, moddir=None):
    """Everything applied before the controller starts: CRDs, namespace, Service + EndpointSlice, webhooks."""
    objs = crds(moddir)
    objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    # the (empty) Secret the cert rotator fills (config/components/internalcert/secret.yaml)
    with open(os.path.join(moddir or module_dir(), "config", "components", "internalcert", "secret.yaml")) as f:
        secret = yaml.safe_load(f)
    secret["metadata"] = {"name": SECRET, "namespace": NAMESPACE}
    objs.append(secret)
    objs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": NAMESPACE},
                 "spec": {"ports": [{"port": 443, "targetPort": webhook_port, "protocol": "TCP"}]}})
    objs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                 "metadata": {"name": SERVICE + "-local", "namespace": NAMESPACE,
                              "labels": {"kubernetes.io/service-name": SERVICE,
                                         "endpointslice.kubernetes.io/managed-by": "gpuops.k8s"}},
                 "addressType": "IPv4",
                 "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
                 "ports": [{"port": webhook_port, "protocol": "TCP"}]})
    objs.extend(webhook_configurations(443, moddir))
    return objs


def apply(kubeconfig, objects):
    """Create or replace each object (dynamic client); waits for CRDs to be established."""
    import time
    from kubernetes import config, dynamic
    from kubernetes.client.rest import ApiException

    dyn = dynamic.DynamicClient(config.new_client_from_config(kubeconfig))
    for obj in objects:
        api = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        ns = obj["metadata"].get("namespace")
        try:
            api.create(body=obj, namespace=ns)
        except ApiException as e:
            if e.status != 409:
                raise
            current = api.get(name=obj["metadata"]["name"], namespace=ns)
            obj = dict(obj, metadata=dict(obj["metadata"], resourceVersion=current.metadata.resourceVersion))
            api.replace(body=obj, namespace=ns)
    crd_api = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    deadline = time.time() + 60
    for obj in objects:
        if obj["kind"] != "CustomResourceDefinition":
            continue
        while True:
            cur = crd_api.get(name=obj["metadata"]["name"])
            conds = (cur.to_dict().get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                break
            if time.time() > deadline:
                raise KueueError("CRD %s not established after 60s" % obj["metadata"]["name"])
            time.sleep(0.2)
    dyn.resources.invalidate_cache()


def mount_secret(kubeconfig, cert_dir):
    """Write the cert rotator's Secret into ``cert_dir`` as a secret volume would; False until it is filled."""
    import base64
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(kubeconfig))
    data = core.read_namespaced_secret(SECRET, NAMESPACE).data or {}
    if "tls.crt" not in data or "tls.key" not in data:
        return False
    os.makedirs(cert_dir, exist_ok=True)
    for key, value in data.items():
        path = os.path.join(cert_dir, key)
        with open(path + ".tmp", "wb") as f:
            f.write(base64.b64decode(value))
        os.chmod(path + ".tmp", 0o600)
        os.replace(path + ".tmp", path)
    return True


def remove_webhooks(kubeconfig):
    """Delete Kueue's webhook configurations (a webhook of a stopped Kueue would fail every Job request)."""
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    adm = client.AdmissionregistrationV1Api(config.new_client_from_config(kubeconfig))
    for fn, name in ((adm.delete_mutating_webhook_configuration, WEBHOOK_CONFIG_NAMES["MutatingWebhookConfiguration"]),
                     (adm.delete_validating_webhook_configuration,
                      WEBHOOK_CONFIG_NAMES["ValidatingWebhookConfiguration"])):
        try:
            fn(name)
        except ApiException as e:
            if e.status != 404:
                raise
