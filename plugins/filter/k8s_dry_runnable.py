# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.k8s_dry_runnable``: the objects a server-side dry run (check mode) can take."""

from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_dry_runnable
short_description: Split Kubernetes objects into those a server-side dry run can take and the rest
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - In check mode M(kubernetes.core.k8s) applies with a server-side dry run. A Namespace created by the same run
    does not exist during a dry run, so the API server refuses every object meant to go into it (404).
  - Returns the objects a dry run can take (cluster-scoped ones, and namespaced ones whose namespace exists), or
    with O(deferred=true) the others, which the roles report as "would create" instead.
  - When O(namespaces) is a skipped task result (not check mode) or null, every object is dry-runnable.
options:
  _input:
    description: Kubernetes objects (dicts with C(metadata)).
    type: list
    elements: dict
    required: true
  namespaces:
    description: The existing namespaces, as names or as the registered result of M(kubernetes.core.k8s_info) for
      C(kind=Namespace).
    type: raw
    required: true
  deferred:
    description: Return the objects a dry run cannot take instead.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Read the namespaces in check mode
  kubernetes.core.k8s_info:
    kind: Namespace
  register: namespaces
  check_mode: false
  when: ansible_check_mode

- name: Apply what a dry run can take
  kubernetes.core.k8s:
    definition: "{{ objects | gpuops.k8s.k8s_dry_runnable(namespaces) }}"
"""

RETURN = r"""
_value:
  description: The objects of the input that a dry run can take (or, with O(deferred=true), cannot), in order.
  type: list
  elements: dict
"""


def _existing(namespaces):
    if namespaces is None:
        return None
    if isinstance(namespaces, dict):
        if namespaces.get("skipped") or "resources" not in namespaces:
            return None
        return set(ns["metadata"]["name"] for ns in namespaces["resources"])
    return set(namespaces)


def k8s_dry_runnable(objects, namespaces, deferred=False):
    existing = _existing(namespaces)
    out = []
    for obj in objects or []:
        ns = ((obj or {}).get("metadata") or {}).get("namespace")
        runnable = existing is None or not ns or ns in existing
        if runnable != bool(deferred):
            out.append(obj)
    return out


class FilterModule(object):
    def filters(self):
        return {"k8s_dry_runnable": k8s_dry_runnable}
