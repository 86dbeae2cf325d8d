# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report writing shared by the planner, the what-if and the MIG engine: Markdown tables and files (writer),
SVG pictures (svg), slice diagrams (diagram, slices)."""
