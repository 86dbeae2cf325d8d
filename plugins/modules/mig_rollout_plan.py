#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig_rollout_plan
short_description: Plan a rolling MIG reconfiguration of a GPU node group
version_added: "0.1.0"
description:
  - From the hosts of a node group (in rollout order) and their Kubernetes Node objects, plans the
    rollout of MIG config O(target) - a canary batch first, then serial batches - as
    C(playbooks/mig_reconfigure.yml) runs it.
  - Nodes already at O(target) with C(nvidia.com/mig.config.state=success) are skipped unless O(force).
  - Records per node the last good layout a rollback restores (the current C(nvidia.com/mig.config)
    when its state is V(success), else the C(gpuops.k8s/mig.config.last-good) annotation).
  - With O(rollout_id), also reports the failures of that rollout so far against O(failure_budget)
    (nodes labelled C(nvidia.com/mig.config.state=failed) and C(gpuops.k8s/mig.rollout-id=<id>)).
author:
  - gpuops.k8s maintainers (@gpuops)
extends_documentation_fragment:
  - gpuops.k8s.attributes.computation
options:
  hosts:
    description: Inventory hosts of the node group, in rollout order.
    type: list
    elements: str
    required: true
  nodes:
    description:
      - Host name to its Node object, null when the host has no node.
      - A list (the RV(kubernetes.core.k8s_info#module:resources) of a lookup by name) stands for its first item.
    type: dict
    required: true
  target:
    description: Name of the MIG config (an entry of the site's mig-parted config file) to roll out.
    type: str
    required: true
  known_configs:
    description:
      - Config names the site's config file defines; O(target) must be one of them.
      - So must the last good config of every node that changes (what its rollback restores); the module
        fails, naming the nodes and their last good configs, before anything changes. Skipped nodes need none.
    type: list
    elements: str
  canary:
    description: Nodes in the first batch. V(0) for no canary.
    type: int
    default: 1
  batch_size:
    description: Nodes per batch after the canary.
    type: int
    default: 1
  failure_budget:
    description: Failed nodes the rollout tolerates; one more stops it.
    type: int
    default: 0
  force:
    description: Include nodes already at O(target).
    type: bool
    default: false
  default_config:
    description: The last good layout of a node with no record of one (see O(inventory_configs)).
    type: str
    default: all-disabled
  inventory_configs:
    description:
      - The MIG config each host was set up with (the inventory's C(gpuops_mig_config)), by host.
      - The last good layout of a node whose C(nvidia.com/mig.config) label (state C(success)) and
        C(gpuops.k8s/mig.config.last-good) annotation record none, before O(default_config).
    type: dict
    default: {}
  rollout_id:
    description: Id of a running rollout, to report RV(budget).
    type: str
seealso:
  - module: gpuops.k8s.mig_partition
"""

EXAMPLES = r"""
- name: Plan the rollout of the mixed layout over the A100 pool
  gpuops.k8s.mig_rollout_plan:
    hosts: "{{ groups['a100_nodes'] }}"
    nodes: "{{ dict(node_info.results | map(attribute='item') | zip(node_info.results | map(attribute='resources'))) }}"
    target: mixed-a100
    canary: 1
    batch_size: 2
  register: rollout
"""

RETURN = r"""
nodes:
  description: Nodes that change, in rollout order.
  returned: success
  type: list
  elements: str
  sample: [dgx-a100-01, dgx-a100-02]
skipped:
  description: Nodes left out and why.
  returned: success
  type: list
  elements: dict
  sample: [{node: dgx-a100-03, reason: already at mixed-a100 (state success)}]
batches:
  description: The batches, canary first.
  returned: success
  type: list
  elements: list
  sample: [[dgx-a100-01], [dgx-a100-02, dgx-a100-03]]
serial:
  description: The Ansible C(serial) value that runs these batches.
  returned: success
  type: list
  elements: int
  sample: [1, 2]
per_node:
  description: Per node, C(current), C(state), C(last_good), C(target), C(batch), C(canary) and the C(steps).
  returned: success
  type: dict
  sample: {dgx-a100-01: {current: all-1g.10gb, last_good: all-1g.10gb, target: mixed-a100, batch: 0, canary: true}}
failure_budget:
  description: O(failure_budget) as given.
  returned: success
  type: int
  sample: 0
budget:
  description: With O(rollout_id), the failed nodes of that rollout and whether the budget is exhausted.
  returned: when O(rollout_id) is given
  type: dict
  sample: {failed: [], exhausted: false}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s.rollout import budget_left, plan_rollout


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="list", elements="str", required=True),
            nodes=dict(type="dict", required=True),
            target=dict(type="str", required=True),
            known_configs=dict(type="list", elements="str"),
            canary=dict(type="int", default=1),
            batch_size=dict(type="int", default=1),
            failure_budget=dict(type="int", default=0),
            force=dict(type="bool", default=False),
            default_config=dict(type="str", default="all-disabled"),
            inventory_configs=dict(type="dict", default={}),
            rollout_id=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    nodes = {}
    for host, value in p["nodes"].items():
        if isinstance(value, list):
            value = value[0] if value else None
        nodes[host] = value
    try:
        plan = plan_rollout(p["hosts"], nodes, p["target"], canary=p["canary"], batch_size=p["batch_size"],
                            failure_budget=p["failure_budget"], force=p["force"],
                            default_config=p["default_config"], known_configs=p["known_configs"],
                            inventory_configs=p["inventory_configs"])
        if p["rollout_id"]:
            plan["budget"] = budget_left([n for n in nodes.values() if n], p["rollout_id"], p["failure_budget"])
    except GpuOpsError as e:
        module.fail_json(msg=e.msg, **e.details)
    module.exit_json(changed=False, **plan)


if __name__ == "__main__":
    main()
