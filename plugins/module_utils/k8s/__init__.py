# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes side: device-plugin configs, GFD labels, rolling MIG changes, the simulated device plugin for kwok
nodes, the gpu_nodes inventory, and gpu_stack_validate's dispatch."""
