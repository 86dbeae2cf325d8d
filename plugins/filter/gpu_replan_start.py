# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.gpu_replan_start``: the lines playbooks/replan.yml shows before it plans (what it starts from)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: gpu_replan_start
short_description: The lines the closed loop shows before it re-plans - trigger, pending pods, demand changes
version_added: "0.1.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - One line with the trigger (the rulebook's event as JSON, cut to 300 characters), one with the number of pending
    and of ignored pending GPU pods, then per resource why its pods wait, each right-sizing change (C(right-size:)),
    each demand change the pending pods make (C(demand:)) and each ignored pod (C(ignored:), as JSON).
  - docs/closed-loop.md describes the round these lines start.
options:
  _input:
    description: The result of the gpuops.k8s.gpu_pending_demand filter.
    type: dict
    required: true
  trigger:
    description: What started the run (the rulebook's event); C({}) when none.
    type: raw
  rightsized:
    description: The registered result of gpuops.k8s.gpu_rightsize; its C(changes) are left out when it was skipped.
    type: dict
"""

EXAMPLES = r"""
- name: Show what the re-plan starts from
  ansible.builtin.debug:
    msg: "{{ replan_pending | gpuops.k8s.gpu_replan_start(trigger=replan_trigger | default({}), rightsized=replan_rightsized) }}"
"""

RETURN = r"""
_value:
  description: The lines, in the order above.
  type: list
  elements: str
"""

TRIGGER_CHARS = 300
_END = "..."
_LEEWAY = 5  # Jinja's truncate: a text at most this much longer than the limit is kept whole


def truncate(text: str, length: int = TRIGGER_CHARS) -> str:
    """Jinja's ``truncate(length)`` with its defaults: whole when at most ``length`` + 5 characters, else cut at the
    last space before ``length`` - 3 characters and ended with ``...``."""
    if len(text) <= length + _LEEWAY:
        return text
    return text[:length - len(_END)].rsplit(" ", 1)[0] + _END


def start_lines(pending: Dict[str, Any], trigger: Any = None, rightsized: Optional[Dict[str, Any]] = None) -> List[str]:
    """The lines (see DOCUMENTATION) from gpu_pending_demand's result, the trigger and gpu_rightsize's result."""
    lines = ["trigger: " + truncate(json.dumps({} if trigger is None else trigger)),
             "pending GPU pods: %d, ignored pending GPU pods: %d" % (len(pending["pending"]), len(pending["ignored"]))]
    lines += ["%s: %s" % (resource, facts.get("why")) for resource, facts in pending["resources"].items()]
    if rightsized and not rightsized.get("skipped"):
        lines += ["right-size: %s" % c["reason"] for c in rightsized.get("changes") or []]
    lines += ["demand: %s" % c["reason"] for c in pending["changes"]]
    lines += ["ignored: %s" % json.dumps(i) for i in pending["ignored"]]
    return lines


def gpu_replan_start(pending: Dict[str, Any], trigger: Any = None, rightsized: Optional[Dict[str, Any]] = None) -> List[str]:
    if not isinstance(pending, dict):
        raise AnsibleFilterError("gpu_replan_start: the input must be gpu_pending_demand's result (a mapping), got %s"
                                 % type(pending).__name__)
    try:
        return start_lines(pending, trigger, rightsized)
    except (KeyError, TypeError, AttributeError) as e:
        raise AnsibleFilterError("gpu_replan_start: the input must be gpu_pending_demand's result (pending, ignored, "
                                 "resources, changes) and rightsized gpu_rightsize's: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"gpu_replan_start": gpu_replan_start}
