# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.gpu_plan_tenants``: gpu_tenancy tenants from a gpu_plan result's quotas."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand

DOCUMENTATION = r"""
name: gpu_plan_tenants
short_description: gpu_tenancy_tenants entries from a gpuops.k8s.gpu_plan result's quotas
version_added: "0.1.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - One entry per tenant of the plan's C(quotas) with C(quota.hard) set to the plan's C(requests.*) keys.
  - Existing entries (O(base)) keep their other fields (labels, limit ranges, priority quotas, groups); their
    quota keys that the plan does not set (requests.cpu, pods, ...) are kept too.
options:
  _input:
    description: The gpu_plan result, or its C(plan).
    type: dict
    required: true
  base:
    description: Existing gpu_tenancy_tenants entries.
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: Tenants for the gpu_tenancy role from a plan
  ansible.builtin.set_fact:
    gpu_tenancy_tenants: "{{ plan.plan | gpuops.k8s.gpu_plan_tenants(gpu_tenancy_tenants | default([])) }}"
"""

RETURN = r"""
_value:
  description: gpu_tenancy_tenants entries (name, quota.hard, and the base's other fields).
  type: list
  elements: dict
"""


def gpu_plan_tenants(plan, base=None):
    try:
        return plan_demand.tenants_from_plan(plan, base)
    except (GpuOpsError, KeyError, TypeError) as e:
        raise AnsibleFilterError("gpu_plan_tenants: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"gpu_plan_tenants": gpu_plan_tenants}
