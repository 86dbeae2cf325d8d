# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared module attributes (as community.general's attributes fragments).

* C(gpuops.k8s.attributes): check_mode and diff_mode, supported in full; a module names what it predicts
  and what its diff holds in its own short C(description).
* C(gpuops.k8s.attributes.idempotent): a second run with the same options reports no change.
* C(gpuops.k8s.attributes.read_only): the module changes nothing: runs the same in check mode, no diff.
* C(gpuops.k8s.attributes.controller): runs on the controller (any host with Python), on every platform.
* C(gpuops.k8s.attributes.computation): read_only and controller together, for the modules that only compute
  (a plan, a verdict) on the controller, with the note saying so.

A module's own C(attributes) entries win over a fragment's (a module may keep support and say more).
"""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Can run in check mode and return the changes it would make, without making them.
  diff_mode:
    support: full
    description: Returns the state before and after the change when run with C(--diff).
"""

    IDEMPOTENT = r"""
options: {}
attributes:
  idempotent:
    support: full
    description: A second run with the same options reports no change.
"""

    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Read only; runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to diff.
"""

    CONTROLLER = r"""
options: {}
attributes:
  platform:
    support: full
    description: Runs on the controller (or any host with Python).
    platforms: all
"""

    # Literal strings only: ansible-test's yamllint reads each fragment from the source text.
    COMPUTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Read only; runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to diff.
  platform:
    support: full
    description: Runs on the controller (or any host with Python).
    platforms: all
notes:
  - Pure computation on the controller; it changes nothing.
"""
