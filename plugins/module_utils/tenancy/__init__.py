# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tenancy beyond ResourceQuota: Kueue queues per GPU product and MIG profile, and DRA device classes and slices."""
