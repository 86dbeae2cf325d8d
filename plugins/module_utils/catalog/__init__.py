# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ground floor: GPU models and MIG profiles (gpus), the MIG instances a GPU holds (instances), GPU resource names (resources)."""
