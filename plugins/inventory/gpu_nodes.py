# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: gpu_nodes
short_description: Kubernetes GPU nodes as inventory hosts
version_added: "0.1.0"
description:
  - Reads the Nodes of a Kubernetes cluster that carry GPUs (by default those labelled
    C(nvidia.com/gpu.present=true) by GPU Feature Discovery) and adds each as a host.
  - Groups hosts by GPU product (C(gpu_product_<product>)), MIG config (C(mig_config_<name>)),
    MIG strategy (C(mig_strategy_<strategy>)), sharing strategy (C(sharing_<strategy>)), and
    puts cordoned nodes in C(cordoned); every host is in C(gpu_nodes).
  - Host vars carry the GPU facts from the node labels and the GPU capacity and allocatable
    (C(nvidia.com/gpu), C(nvidia.com/mig-*)); see the examples.
  - Usable as an AWX inventory source (a source from the project with this file).
  - The file name must end in C(gpu_nodes.yml) or C(gpu_nodes.yaml).
author:
  - gpuops.k8s maintainers (@gpuops)
requirements:
  - kubernetes (Python client) >= 24.2.0
  - kubernetes.core collection
extends_documentation_fragment:
  - ansible.builtin.constructed
options:
  plugin:
    description: The name of this plugin.
    required: true
    type: str
    choices: [gpuops.k8s.gpu_nodes]
  kubeconfig:
    description: Path of a kubeconfig file; default from E(K8S_AUTH_KUBECONFIG), E(KUBECONFIG) or C(~/.kube/config).
    type: path
    env:
      - name: K8S_AUTH_KUBECONFIG
  context:
    description: Context of the kubeconfig to use.
    type: str
    env:
      - name: K8S_AUTH_CONTEXT
  host:
    description: URL of the API server (instead of a kubeconfig).
    type: str
    env:
      - name: K8S_AUTH_HOST
  api_key:
    description: Bearer token for O(host).
    type: str
    env:
      - name: K8S_AUTH_API_KEY
  validate_certs:
    description: Verify the API server's certificate.
    type: bool
    default: true
    env:
      - name: K8S_AUTH_VERIFY_SSL
  label_selector:
    description: Label selector of the GPU nodes.
    type: str
    default: nvidia.com/gpu.present=true
  group_prefix:
    description: Prefix of every group this plugin creates.
    type: str
    default: ""
  set_ansible_host:
    description: Set C(ansible_host) to the node's InternalIP (else ExternalIP, else Hostname address).
    type: bool
    default: true
"""

EXAMPLES = r"""
# inventories/k8s/gpu_nodes.yml
plugin: gpuops.k8s.gpu_nodes
kubeconfig: ~/.kube/config
# groups from the built-in rules: gpu_nodes, gpu_product_nvidia_a100_sxm4_80gb, mig_config_all_1g_10gb,
# sharing_time_slicing, cordoned ...; more with keyed_groups / groups / compose:
keyed_groups:
  - key: gpu_family
    prefix: family
groups:
  mig_pending: mig_config_state == 'pending'
compose:
  free_1g_slices: gpu_allocatable['nvidia.com/mig-1g.10gb'] | default(0)

# ansible-inventory -i inventories/k8s/gpu_nodes.yml --graph
"""

from ansible.errors import AnsibleError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.inventory import node_host


def list_gpu_nodes(options):
    """Node dicts from the cluster, through kubernetes.core's client (plain kubernetes client as fallback)."""
    auth = dict((k, options.get(k)) for k in ("kubeconfig", "context", "host", "api_key", "validate_certs")
                if options.get(k) is not None)
    try:
        from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    except ImportError:
        get_api_client = None
    try:
        if get_api_client is not None:
            client = get_api_client(**auth)
            resource = client.resource("Node", "v1")
            return client.get(resource, label_selector=options.get("label_selector")).to_dict().get("items", [])
        from kubernetes import client as kclient, config as kconfig
        api = kclient.CoreV1Api(kconfig.new_client_from_config(auth.get("kubeconfig"), context=auth.get("context")))
        items = api.list_node(label_selector=options.get("label_selector")).items
        return [api.api_client.sanitize_for_serialization(n) for n in items]
    except ImportError as e:
        raise AnsibleError("gpuops.k8s.gpu_nodes needs the kubernetes Python client: %s" % e)
    except Exception as e:
        raise AnsibleError("gpuops.k8s.gpu_nodes: cannot list the nodes (%s): %s" % (options.get("label_selector"), e))


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "gpuops.k8s.gpu_nodes"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith(("gpu_nodes.yml", "gpu_nodes.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        self._read_config_data(path)
        options = dict((k, self.get_option(k)) for k in (
            "kubeconfig", "context", "host", "api_key", "validate_certs", "label_selector"))
        self.populate(list_gpu_nodes(options))

    def populate(self, nodes):
        prefix = self.get_option("group_prefix") or ""
        strict = self.get_option("strict")
        for node in nodes:
            name, hostvars, groups = node_host(node, prefix)
            for group in groups:
                self.inventory.add_group(group)
            self.inventory.add_host(name, group=groups[0])
            for group in groups[1:]:
                self.inventory.add_child(group, name)
            for key, value in hostvars.items():
                self.inventory.set_variable(name, key, value)
            if self.get_option("set_ansible_host") and hostvars.get("node_address"):
                self.inventory.set_variable(name, "ansible_host", hostvars["node_address"])
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)
