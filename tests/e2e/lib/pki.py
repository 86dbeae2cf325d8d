# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Certificates and kubeconfigs of the local control plane (cluster.py), with the ``cryptography`` package.

    create(pki_dir)                               once: a CA, the API server's serving certificate, client
                                                  certificates (admin, controller-manager, scheduler, kwok,
                                                  front-proxy-client) and the service-account key pair
    kubeconfig(path, server, pki_dir, user)       a kubeconfig for ``user`` (its certificate embedded)
    serving_cert(pki_dir, out_dir, dns_names)     a serving certificate signed by that CA (for helpers the API
                                                  server calls: the metrics lab's stand-in, webhooks)

Keys are ECDSA P-256, certificates valid from five minutes ago for ten years (serving ones: one year).
"""
import base64
import datetime
import ipaddress
import json
import os

CLIENTS = (("admin", "gpuops-admin", "system:masters"),
           ("controller-manager", "system:kube-controller-manager", None),
           ("scheduler", "system:kube-scheduler", None),
           ("kwok", "gpuops-kwok", "system:masters"),
           # the aggregator's client certificate towards aggregated API servers (the metrics lab's stand-in)
           ("front-proxy-client", "front-proxy-client", None))
API_SERVER_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local")
API_SERVER_IPS = ("127.0.0.1", "10.96.0.1")  # loopback and the first address of cluster.SERVICE_CIDR


def _now():
    return datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)


def _write_key(path, key):
    from cryptography.hazmat.primitives import serialization
    with open(path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    os.chmod(path, 0o600)


def _write_cert(path, cert):
    from cryptography.hazmat.primitives import serialization
    with open(path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))


def _name(cn, org=None):
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _leaf(ca, ca_key, cn, org=None, dns=(), ips=(), days=3650):
    """(key, certificate) signed by the CA: a serving certificate when ``dns`` or ``ips`` are given, else a client one."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    b = (x509.CertificateBuilder().subject_name(_name(cn, org)).issuer_name(ca.subject)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if dns or ips:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(n) for n in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]), critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    else:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return key, b.sign(ca_key, hashes.SHA256())


def create(pki_dir):
    """Create (once: a .complete marker) the CA, the API server's certificate, client certificates and SA keys."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    done = os.path.join(pki_dir, ".complete")
    if os.path.exists(done):
        return
    os.makedirs(pki_dir, exist_ok=True)
    now = _now()
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("gpuops-local-ca")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    _write_key(os.path.join(pki_dir, "ca.key"), ca_key)
    _write_cert(os.path.join(pki_dir, "ca.crt"), ca)
    leaves = [("apiserver", "kube-apiserver", None, API_SERVER_NAMES, API_SERVER_IPS)]
    leaves += [(name, cn, org, (), ()) for name, cn, org in CLIENTS]
    for name, cn, org, dns, ips in leaves:
        key, cert = _leaf(ca, ca_key, cn, org, dns, ips)
        _write_key(os.path.join(pki_dir, name + ".key"), key)
        _write_cert(os.path.join(pki_dir, name + ".crt"), cert)
    sa = ec.generate_private_key(ec.SECP256R1())
    _write_key(os.path.join(pki_dir, "sa.key"), sa)
    with open(os.path.join(pki_dir, "sa.pub"), "wb") as f:
        f.write(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo))
    with open(done, "w") as f:
        f.write("ok\n")


def serving_cert(pki_dir, out_dir, dns_names):
    """A serving certificate for ``dns_names`` (and 127.0.0.1) signed by the CA of ``pki_dir``; returns (crt, key) paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    with open(os.path.join(pki_dir, "ca.crt"), "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    with open(os.path.join(pki_dir, "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), None)
    key, cert = _leaf(ca, ca_key, dns_names[0], dns=dns_names, ips=("127.0.0.1",), days=365)
    os.makedirs(out_dir, exist_ok=True)
    crt, keyf = os.path.join(out_dir, "serving.crt"), os.path.join(out_dir, "serving.key")
    _write_cert(crt, cert)
    _write_key(keyf, key)
    return crt, keyf


def kubeconfig(path, server, pki_dir, user):
    """Write (atomically, mode 0600) a kubeconfig for ``user`` of ``pki_dir`` against ``server``."""
    def b64(name):
        with open(os.path.join(pki_dir, name), "rb") as f:
            return base64.b64encode(f.read()).decode()

    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gpuops-local",
        "clusters": [{"name": "gpuops-local", "cluster": {"server": server,
                                                          "certificate-authority-data": b64("ca.crt")}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(user + ".crt"),
                                          "client-key-data": b64(user + ".key")}}],
        "contexts": [{"name": "gpuops-local", "context": {"cluster": "gpuops-local", "user": user,
                                                          "namespace": "default"}}],
    }
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cfg, f, indent=2)  # JSON is YAML: kubectl, client-go and the Python client read it
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
