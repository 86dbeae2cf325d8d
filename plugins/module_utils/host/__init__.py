# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host settings: NVIDIA driver policy and GPU settings (power, clocks, ECC, compute mode)."""
