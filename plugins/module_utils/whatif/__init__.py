# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The utilisation what-if engine (gpu_whatif): trace data, workloads, scheduling policies, fragmentation, MIG shapes, reports."""
