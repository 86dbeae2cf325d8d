# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus connection options of the modules that read Prometheus' HTTP API (gpu_rightsize,
gpu_usage_report); their argument spec is module_utils/metrics/prometheus.py's ``connection_options()``."""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  prometheus_url:
    description: Base URL of the Prometheus HTTP API, for example C(http://prometheus-operated.monitoring:9090).
    type: str
    required: true
  prometheus_token:
    description: Bearer token sent to Prometheus (a proxy or an OpenShift-style Thanos querier).
    type: str
  validate_certs:
    description: Verify the server's TLS certificate (https).
    type: bool
    default: true
  ca_path:
    description: CA bundle file that signs the server's certificate.
    type: path
  timeout_s:
    description: Seconds to wait for each answer.
    type: float
    default: 30
"""
