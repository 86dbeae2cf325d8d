# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health policy options that gpu_health_check and gpu_health_alert share (their argument spec:
module_utils/health/checks.py ``policy_argument_spec``)."""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  temperature_threshold_c:
    description: A GPU temperature (a reading, or an alert's value) over this, in degrees Celsius, is a problem.
    type: float
    default: 90
  ecc_error_threshold:
    description: More uncorrected ECC errors than this (volatile or aggregate) on one GPU are a problem.
    type: int
    default: 10
  xid_ignore:
    description: Xid numbers that never make a host unhealthy.
    type: list
    elements: int
    default: [13, 31, 43, 45, 68, 109]
  xid_actions:
    description:
      - Overrides of what an Xid calls for, keyed by Xid number; values V(ignore), V(drain),
        V(reset_gpu) or V(reboot).
    type: dict
    default: {}
  xid_unknown_action:
    description: What an Xid the Xid table does not know calls for.
    type: str
    choices: [ignore, drain, reset_gpu, reboot]
    default: drain
"""
