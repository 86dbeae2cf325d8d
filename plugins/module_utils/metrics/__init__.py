# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU metric path for autoscaling: dcgm-exporter's exposition (dcgm), the Prometheus scrape config a
ServiceMonitor stands for (scrape), and the PromQL behind the prometheus-adapter rules and KEDA
ScaledObjects (queries, keda)."""
