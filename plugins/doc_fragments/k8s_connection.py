# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the collection's own Kubernetes modules reach the API server (through kubernetes.core's client).

Our own fragment rather than kubernetes.core's ``k8s_auth_options``: the collection's documentation
must build without kubernetes.core installed (ansible-doc in galaxy-importer has no dependencies).
The options are the subset of kubernetes.core's connection options these modules accept, with the
same names and environment variables.
"""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig as a mapping.
      - Defaults to E(K8S_AUTH_KUBECONFIG), then the Kubernetes client's own default (E(KUBECONFIG), C(~/.kube/config)).
    type: raw
  context:
    description: The kubeconfig context to use (default E(K8S_AUTH_CONTEXT), else the current context).
    type: str
  host:
    description: URL of the API server, overriding the kubeconfig (default E(K8S_AUTH_HOST)).
    type: str
  api_key:
    description: Bearer token for the API server (default E(K8S_AUTH_API_KEY)).
    type: str
  validate_certs:
    description: Whether to verify the API server's certificate (default E(K8S_AUTH_VERIFY_SSL)).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description: Path of the CA bundle that signs the API server's certificate (default E(K8S_AUTH_SSL_CA_CERT)).
    type: path
    aliases: [ssl_ca_cert]
requirements:
  - The C(kubernetes) Python library on the host that runs the module, and the kubernetes.core collection.
"""
