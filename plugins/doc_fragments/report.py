# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report options of the modules that write a Markdown report with SVG pictures (gpu_plan, gpu_usage_report,
gpu_whatif; module_utils/report/writer.py writes it). A module names its Markdown file and its pictures in its notes.

Such a module runs on the controller and supports check and diff mode in full; the fragment says so (the
attributes of C(gpuops.k8s.attributes.controller) included). A module's own C(attributes) entries win over these
(it may keep the support and say more in its own description)."""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  report:
    description:
      - Write a report there - Markdown plus SVG pictures. A directory (it gets the module's Markdown file, see the
        notes) or a C(.md) file (the pictures go beside it).
      - A second run with the same content changes no file; check mode says what would change, diff mode shows the
        Markdown before and after.
    type: path
  report_title:
    description: Title of the report.
    type: str
attributes:
  check_mode:
    support: full
    description: Everything is computed; O(report) is not written and C(changed) says whether it would be.
  diff_mode:
    support: full
    description: The Markdown report before and after.
  platform:
    support: full
    description: Runs on the controller (or any host with Python).
    platforms: all
"""
