#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sim_gpu_node
short_description: Publish a simulated GPU host on its kwok node as GPU Feature Discovery and the device plugin would
version_added: "0.1.0"
description:
  - Creates, updates or deletes the kwok fake Node of a simulated GPU host (the C(inventories/sim) lab) in a
    Kubernetes cluster, such as the local control plane of C(make cluster-up).
  - Sets the labels GPU Feature Discovery v0.20.0 writes (C(nvidia.com/gpu.product),
    C(nvidia.com/gpu.count), C(nvidia.com/gpu.memory), C(nvidia.com/mig.strategy),
    C(nvidia.com/mig-<profile>.count), C(nvidia.com/mig-<profile>.engines.copy), C(nvidia.com/gpu.replicas),
    C(nvidia.com/gpu.sharing-strategy), ...), and C(nvidia.com/gpu.present), which the GPU Operator (not GFD)
    writes on real clusters
    and the capacity and allocatable of C(nvidia.com/gpu) or C(nvidia.com/mig-<profile>) that the NVIDIA device
    plugin advertises for the MIG strategy and sharing config.
  - Run it after a MIG or sharing change to act as the device plugin would; stale C(nvidia.com/mig-*)
    resources and labels are removed, input labels such as C(nvidia.com/mig.config) are never touched.
  - Labels are patched on the Node; capacity and allocatable through the C(nodes/status) subresource, which
    M(kubernetes.core.k8s) cannot write. Connection options are a subset of kubernetes.core's, with the same
    names and environment variables.
  - Only meant for kwok nodes; O(state=absent) refuses to delete a node without the
    C(kwok.x-k8s.io/node=fake) annotation.
author:
  - gpuops.k8s contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.k8s.k8s_connection
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: all
options:
  name:
    description: Node name (the simulated host's inventory name).
    type: str
    required: true
  state:
    description: Whether the node exists.
    type: str
    choices: [present, absent]
    default: present
  gpus:
    description:
      - The host's GPUs as in C(gpuops_sim_gpus), a list of C(model) (catalog key, NVML name or PCI device
        id) and C(count).
      - Required with O(state=present) unless O(gpu_facts) is given.
    type: list
    elements: dict
  gpu_facts:
    description:
      - The C(gpus) list returned by M(gpuops.k8s.gpu_info) (or any NVML module). The live MIG instances then
        decide the advertised devices. Mutually exclusive with O(gpus) and O(mig_config).
    type: list
    elements: dict
  mig_strategy:
    description: The device plugin's and GFD's MIG strategy.
    type: str
    choices: [none, single, mixed]
    default: none
  mig_config:
    description:
      - The MIG layout, as the entries of a mig-parted config (C(devices), C(mig-enabled), C(mig-devices)), or a
        mapping of profile to count applied to every GPU.
    type: raw
  sharing:
    description: The device plugin's sharing config. Omit it when the device plugin runs without one.
    type: dict
    suboptions:
      strategy:
        description: Sharing strategy.
        type: str
        choices: [none, time-slicing, mps]
        default: none
      replicas:
        description: Replicas per device (at least 2 for time-slicing and mps).
        type: int
      rename_by_default:
        description: Advertise C(<resource>.shared) instead of appending C(-SHARED) to the product label.
        type: bool
        default: false
  driver_version:
    description: Driver version for the C(nvidia.com/cuda.driver-version.*) labels.
    type: str
  labels:
    description: Extra labels of the node.
    type: dict
  resources:
    description: cpu, memory, pods and other non-GPU capacity when the node is created.
    type: dict
notes:
  - Needs the C(kubernetes) Python library on the host that runs the module, as kubernetes.core does.
seealso:
  - module: kubernetes.core.k8s
  - module: gpuops.k8s.gpu_info
"""

EXAMPLES = r"""
- name: Publish every simulated host on its kwok node
  gpuops.k8s.sim_gpu_node:
    kubeconfig: "{{ lookup('ansible.builtin.env', 'KUBECONFIG') }}"
    name: "{{ inventory_hostname }}"
    gpus: "{{ gpuops_sim_gpus }}"
  delegate_to: localhost

- name: After a MIG change, act as the device plugin from the live facts
  gpuops.k8s.sim_gpu_node:
    name: "{{ inventory_hostname }}"
    gpu_facts: "{{ mig_result.gpus }}"
    mig_strategy: mixed

- name: Time-slicing with 4 replicas
  gpuops.k8s.sim_gpu_node:
    name: l40s-01
    gpus: [{model: l40s_48gb, count: 4}]
    sharing: {strategy: time-slicing, replicas: 4}
"""

RETURN = r"""
labels:
  description: The GFD labels the node carries now.
  returned: state is present
  type: dict
  sample: {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig-1g.10gb.count": "14"}
capacity:
  description: The C(nvidia.com/*) capacity (and allocatable) advertised.
  returned: state is present
  type: dict
  sample: {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"}
devices:
  description: One entry per advertised device (before sharing replicas), its resource name.
  returned: state is present
  type: list
  elements: str
created:
  description: True when the node was created.
  returned: when created
  type: bool
name:
  description: The node name.
  returned: always
  type: str
"""

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.node_sim import DynamicNodeApi, run_sim_gpu_node
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


# The connection options of the gpuops.k8s.k8s_connection doc fragment (a subset of kubernetes.core's
# AUTH_ARG_SPEC; its client reads the ones present).
CONNECTION_ARG_SPEC = dict(
    kubeconfig=dict(type="raw"),
    context=dict(type="str"),
    host=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", aliases=["verify_ssl"]),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"]),
)


def main():
    argument_spec = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        gpus=dict(type="list", elements="dict"),
        gpu_facts=dict(type="list", elements="dict"),
        mig_strategy=dict(type="str", choices=["none", "single", "mixed"], default="none"),
        mig_config=dict(type="raw"),
        sharing=dict(type="dict", options=dict(
            strategy=dict(type="str", choices=["none", "time-slicing", "mps"], default="none"),
            replicas=dict(type="int"),
            rename_by_default=dict(type="bool", default=False),
        )),
        driver_version=dict(type="str"),
        labels=dict(type="dict"),
        resources=dict(type="dict"),
    )
    argument_spec.update(CONNECTION_ARG_SPEC)
    module = AnsibleK8SModule(
        argument_spec=argument_spec,
        supports_check_mode=True,
        mutually_exclusive=[("gpus", "gpu_facts"), ("mig_config", "gpu_facts")],
        required_if=[("state", "present", ("gpus", "gpu_facts"), True)],
    )
    try:
        api = DynamicNodeApi(get_api_client(module))
        result = run_sim_gpu_node(api, module.params, check_mode=module.check_mode)
    except GpuOpsError as e:
        module.fail_json(msg=e.msg, **e.details)
    except CoreException as e:
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
