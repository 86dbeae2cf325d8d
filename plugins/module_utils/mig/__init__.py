# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG: mig-parted configs, the partition planner, the engine behind mig_mode/mig_partition."""
