# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report options of the modules that write a Markdown report with SVG pictures (gpu_plan, gpu_whatif;
module_utils/report/writer.py writes it). A module names its Markdown file and its pictures in its notes."""

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
"""
