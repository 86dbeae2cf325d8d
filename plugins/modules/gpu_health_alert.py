#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_health_alert
short_description: Read one GPU health alert (Alertmanager, dcgm-exporter) as health-check evidence
version_added: "0.1.0"
description:
  - Validates one alert of an Alertmanager webhook notification, as the gpuops.k8s rulebook
    (C(extensions/eda/rulebooks/gpu_health_alerts.yml)) hands it to C(playbooks/health.yml), and says which
    inventory host it is about and what it means for the health check.
  - A firing alert becomes a problem of the same shape as those of M(gpuops.k8s.gpu_health_check), judged with
    the same policy (Xid table and overrides, ECC and temperature thresholds);
    M(gpuops.k8s.gpu_health_plan) adds it to the node's verdict.
  - The alert is dropped (RV(accepted=false), with a RV(reason)) when it is malformed, has no node label
    (C(node), C(Hostname) or C(hostname)), names a node that is not a host of O(hosts), is not a GPU health alert,
    or when the policy says the condition needs nothing (an application Xid, a value at or under the threshold).
author:
  - gpuops.k8s maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.k8s.attributes.computation
  - gpuops.k8s.health_policy
options:
  alert:
    description:
      - One alert of the notification's C(alerts) list (C(status), C(labels), C(annotations), C(startsAt),
        C(fingerprint)). Anything else is reported as malformed.
    type: raw
    required: true
  hosts:
    description: The inventory hosts of the GPU pool; the alert's node must be one of them.
    type: list
    elements: str
    required: true
  node_names:
    description: Inventory host to Kubernetes node name, for hosts whose node is named differently.
    type: dict
    default: {}
seealso:
  - module: gpuops.k8s.gpu_health_check
  - module: gpuops.k8s.gpu_health_plan
"""

EXAMPLES = r"""
- name: Read the alert the rulebook passed
  gpuops.k8s.gpu_health_alert:
    alert: "{{ gpu_health_alert }}"
    hosts: "{{ query('ansible.builtin.inventory_hostnames', 'gpu_nodes') }}"
  register: alert

- name: Say why an alert is dropped
  ansible.builtin.debug:
    msg: "alert dropped: {{ alert.reason }}"
  when: not alert.accepted
"""

RETURN = r"""
accepted:
  description: Whether the alert is a GPU health alert about a host of the pool that the health check acts on.
  returned: success
  type: bool
  sample: true
reason:
  description: Why the alert was dropped, or what it says.
  returned: success
  type: str
  sample: "unknown node gpu-99: not a host of the GPU pool inventory (8 hosts)"
node:
  description: The Kubernetes node the alert names (null when it names none).
  returned: success
  type: str
  sample: hgx-h200-01
host:
  description: The inventory host of that node (null when unknown).
  returned: success
  type: str
  sample: hgx-h200-01
status:
  description: V(firing) or V(resolved) (null when malformed).
  returned: success
  type: str
  sample: firing
check:
  description: The health check the alert stands for (V(xid), V(ecc_uncorrected), V(temperature), ...).
  returned: success
  type: str
  sample: xid
key:
  description: Identifies the alert across its firing and resolved notifications (the Alertmanager fingerprint).
  returned: success
  type: str
  sample: 5f1a2b3c4d5e6f70
alertname:
  description: The alert's name.
  returned: success
  type: str
  sample: GpuXidError
problem:
  description: For a firing alert, the problem it adds to the node's verdict (null otherwise).
  returned: success
  type: dict
  sample: {check: xid, detail: "GPU 3: Xid 79 (alert GpuXidError)", gpu: 3, action: reboot, value: 79, source: alert}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.health.alerts import read_alert
from ansible_collections.gpuops.k8s.plugins.module_utils.health.checks import policy_argument_spec


def main():
    module = AnsibleModule(
        argument_spec=dict(
            alert=dict(type="raw", required=True),
            hosts=dict(type="list", elements="str", required=True),
            node_names=dict(type="dict", default={}),
            **policy_argument_spec()
        ),
        supports_check_mode=True,
    )
    p = module.params
    policy = dict((k, p[k]) for k in policy_argument_spec())
    run_and_exit(module, lambda: read_alert(p["alert"], p["hosts"], p["node_names"], policy), changed=False)


if __name__ == "__main__":
    main()
