# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.k8s.pending_gpu_pods - an ansible-rulebook event source: GPU pods the scheduler cannot place.

It watches pods on the API server (the ``kubernetes`` client's list + watch, resuming from the resourceVersion,
re-listing on 410 Gone, reconnecting with backoff; not polling) and puts one event when the set of pods that wait
for an NVIDIA resource changed and stayed so for ``debounce_s`` (at most ``max_wait_s`` after the first change):

    {"pending_gpu_pods": {"count": 2, "pods": [{"namespace", "name", "resources", "message", "since"}],
                          "resources": {"nvidia.com/mig-3g.40gb": 2}}}

A pod counts when it is Pending, its PodScheduled condition is False with reason Unschedulable, and the scheduler's
message names an NVIDIA resource it requests (``Insufficient nvidia.com/mig-3g.40gb``); the same set is reported
again only after ``repeat_s`` (pods still pending after a re-plan); an empty set puts nothing. The rulebook
gpuops.k8s.gpu_replan runs playbooks/replan.yml on it, one run at a time (docs/closed-loop.md).

Arguments: kubeconfig, context, namespaces (list; default all), resources (prefixes; default nvidia.com/mig-,
nvidia.com/gpu), label_selector, debounce_s (30), max_wait_s (300), repeat_s (600).
"""

from __future__ import annotations

import asyncio
import threading
import time

DOCUMENTATION = r"""
---
short_description: GPU pods the scheduler cannot place, from a watch on the API server, debounced
description:
  - Watches pods (list + watch, resourceVersion, re-list on 410 Gone) and puts one event per changed set of pods
    that wait for an NVIDIA resource (Pending, PodScheduled False/Unschedulable, the message names the resource).
options:
  kubeconfig:
    description: Kubeconfig file; default the in-cluster config, else ~/.kube/config.
    type: str
  context:
    description: Kubeconfig context.
    type: str
  namespaces:
    description: Watch only these namespaces (one watch each); default every namespace.
    type: list
    elements: str
  resources:
    description: Resource name prefixes that count.
    type: list
    elements: str
    default: [nvidia.com/mig-, nvidia.com/gpu]
  label_selector:
    description: Only pods with these labels.
    type: str
  debounce_s:
    description: Quiet time after the last change before the event is put.
    type: float
    default: 30
  max_wait_s:
    description: Put the event at the latest this long after the first change, even if changes go on.
    type: float
    default: 300
  repeat_s:
    description: Put an unchanged, non-empty set again after this long.
    type: float
    default: 600
"""

EXAMPLES = r"""
- name: Re-plan on pending GPU pods
  hosts: localhost
  sources:
    - gpuops.k8s.pending_gpu_pods:
        debounce_s: 30
  rules:
    - name: Re-plan
      condition: event.pending_gpu_pods is defined
      action:
        run_playbook:
          name: gpuops.k8s.replan
"""

DEFAULT_RESOURCES = ("nvidia.com/mig-", "nvidia.com/gpu")
NUMBERS = {"debounce_s": 30.0, "max_wait_s": 300.0, "repeat_s": 600.0}
KNOWN = ("kubeconfig", "context", "namespaces", "resources", "label_selector") + tuple(NUMBERS)


class ArgError(ValueError):
    pass


def parse_args(args):
    """The source's arguments, validated: errors name the valid keys and ranges."""
    args = dict(args or {})
    unknown = sorted(k for k in args if k not in KNOWN and not str(k).startswith("eda_"))
    if unknown:
        raise ArgError("pending_gpu_pods: unknown arguments %s; valid: %s" % (", ".join(unknown), ", ".join(KNOWN)))
    out = {"kubeconfig": args.get("kubeconfig"), "context": args.get("context"),
           "label_selector": args.get("label_selector")}
    ns = args.get("namespaces")
    if ns is not None and (not isinstance(ns, list) or not all(isinstance(n, str) and n for n in ns)):
        raise ArgError("pending_gpu_pods: namespaces must be a list of namespace names, got %r" % (ns,))
    out["namespaces"] = list(ns) if ns else None
    res = args.get("resources") or list(DEFAULT_RESOURCES)
    if not isinstance(res, list) or not all(isinstance(r, str) and r.startswith("nvidia.com/") for r in res):
        raise ArgError("pending_gpu_pods: resources must be a list of nvidia.com/ resource name prefixes "
                       "(e.g. nvidia.com/mig-, nvidia.com/gpu), got %r" % (res,))
    out["resources"] = tuple(res)
    for key, default in NUMBERS.items():
        value = args.get(key, default)
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ArgError("pending_gpu_pods: %s must be a number of seconds >= 0, got %r" % (key, value))
        if value < 0:
            raise ArgError("pending_gpu_pods: %s must be a number of seconds >= 0, got %r" % (key, value))
        out[key] = value
    if out["max_wait_s"] < out["debounce_s"]:
        raise ArgError("pending_gpu_pods: max_wait_s (%g) must be at least debounce_s (%g)"
                       % (out["max_wait_s"], out["debounce_s"]))
    return out


def _requests(pod, prefixes):
    out = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        asked = dict(res.get("limits") or {})
        asked.update(res.get("requests") or {})
        for k, v in asked.items():
            if any(str(k).startswith(p) for p in prefixes):
                try:
                    n = int(str(v))
                except ValueError:
                    continue
                if n:
                    out[k] = out.get(k, 0) + n
    return out


def classify(pod, prefixes=DEFAULT_RESOURCES):
    """``{namespace, name, resources, message, since}`` for a pod waiting for its GPU resource, else None."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if status.get("phase") != "Pending" or meta.get("deletionTimestamp") or (pod.get("spec") or {}).get("nodeName"):
        return None
    asked = _requests(pod, prefixes)
    if not asked:
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and str(cond.get("status")) == "False" \
                and cond.get("reason") == "Unschedulable":
            message = str(cond.get("message") or "")
            if any(("Insufficient " + r) in message for r in asked):
                return {"namespace": meta.get("namespace"), "name": meta.get("name"), "resources": asked,
                        "message": message, "since": str(cond.get("lastTransitionTime") or "")}
    return None


class Debouncer(object):
    """The set of pending GPU pods and when to report it (pure: the caller gives the clock)."""

    def __init__(self, debounce_s, max_wait_s, repeat_s):
        self.debounce_s, self.max_wait_s, self.repeat_s = debounce_s, max_wait_s, repeat_s
        self.pods = {}
        self.first_change = None
        self.last_change = None
        self.reported = None
        self.reported_at = None

    def update(self, key, facts, now):
        """A pod's new state (facts None: it does not count, or it is gone)."""
        before = self.pods.get(key)
        if facts is None:
            if key not in self.pods:
                return
            del self.pods[key]
        else:
            self.pods[key] = facts
            if before is not None and before["resources"] == facts["resources"]:
                return  # only its message or time moved
        if self.first_change is None:
            self.first_change = now
        self.last_change = now

    def replace(self, pods, now):
        """A fresh list (after a re-list): ``{key: facts}``."""
        if set(pods) != set(self.pods):
            if self.first_change is None:
                self.first_change = now
            self.last_change = now
        self.pods = dict(pods)

    def due(self, now):
        """The event to put now, or None."""
        keys = frozenset(self.pods)
        if self.first_change is not None:
            quiet = now - self.last_change >= self.debounce_s
            waited = now - self.first_change >= self.max_wait_s
            if not (quiet or waited):
                return None
            self.first_change = self.last_change = None
            if keys == self.reported or not keys:
                self.reported = keys if keys else None
                if not keys:
                    return None
                if now - (self.reported_at or 0) < self.repeat_s:
                    return None
            return self._event(keys, now)
        if keys and keys == self.reported and self.reported_at is not None and now - self.reported_at >= self.repeat_s:
            return self._event(keys, now)
        return None

    def _event(self, keys, now):
        self.reported, self.reported_at = keys, now
        pods = [self.pods[k] for k in sorted(keys)]
        totals = {}
        for p in pods:
            for r, n in p["resources"].items():
                totals[r] = totals.get(r, 0) + n
        return {"pending_gpu_pods": {"count": len(pods), "pods": pods, "resources": totals}}


def _client(opts):
    from kubernetes import client, config
    try:
        if opts["kubeconfig"]:
            config.load_kube_config(config_file=opts["kubeconfig"], context=opts["context"])
        else:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config(context=opts["context"])
    except Exception as e:  # pylint: disable=broad-except
        raise ArgError("pending_gpu_pods: cannot load the cluster config: %s" % e)
    return client.ApiClient(), client.CoreV1Api()


def watch_pods(opts, on_list, on_event, stop, namespace=None, list_fn=None, watch_factory=None, sleep=time.sleep):
    """Blocking list + watch loop for one namespace (or all): ``on_list(pods)`` after each (re-)list,
    ``on_event(type, pod)`` per watch event; pods as dicts. Ends when ``stop`` is set."""
    api_client = core = None
    if list_fn is None:
        from kubernetes import watch
        api_client, core = _client(opts)
        kw = {"label_selector": opts["label_selector"]} if opts["label_selector"] else {}
        if namespace:
            def list_fn(**more):
                return core.list_namespaced_pod(namespace, **dict(kw, **more))
        else:
            def list_fn(**more):
                return core.list_pod_for_all_namespaces(**dict(kw, **more))
        watch_factory = watch.Watch

    def as_dict(obj):
        return obj if isinstance(obj, dict) else api_client.sanitize_for_serialization(obj)

    backoff = 1.0
    while not stop.is_set():
        try:
            listed = list_fn()
            listed_d = as_dict(listed)
            on_list(listed_d.get("items") or [])
            version = (listed_d.get("metadata") or {}).get("resourceVersion")
            backoff = 1.0
            w = watch_factory()
            for ev in w.stream(list_fn, resource_version=version, timeout_seconds=60, allow_watch_bookmarks=True):
                if stop.is_set():
                    w.stop()
                    break
                obj = as_dict(ev.get("raw_object") or ev.get("object"))
                if ev.get("type") == "ERROR":
                    if (obj or {}).get("code") == 410:
                        break  # Gone: re-list
                    continue
                if ev.get("type") == "BOOKMARK":
                    continue
                on_event(ev.get("type"), obj)
        except Exception as e:  # pylint: disable=broad-except
            status = getattr(e, "status", None)
            if status == 410:
                continue
            if stop.is_set():
                break
            sleep(backoff)
            backoff = min(backoff * 2, 30.0)


async def main(queue, args):
    """ansible-rulebook's entry point."""
    opts = parse_args(args)
    loop = asyncio.get_running_loop()
    deb = Debouncer(opts["debounce_s"], opts["max_wait_s"], opts["repeat_s"])
    lock = threading.Lock()
    stop = threading.Event()
    prefixes = opts["resources"]

    def key(pod):
        meta = pod.get("metadata") or {}
        return (meta.get("namespace"), meta.get("name"))

    def lister(ns):
        def on_list(pods):
            with lock:
                keep = dict((k, v) for k, v in deb.pods.items() if ns and k[0] != ns)
                for p in pods:
                    facts = classify(p, prefixes)
                    if facts is not None:
                        keep[key(p)] = facts
                deb.replace(keep, time.time())
        return on_list

    def on_event(kind, pod):
        with lock:
            deb.update(key(pod), None if kind == "DELETED" else classify(pod, prefixes), time.time())

    threads = []
    for ns in (opts["namespaces"] or [None]):
        t = threading.Thread(target=watch_pods, args=(opts, lister(ns), on_event, stop, ns), daemon=True)
        t.start()
        threads.append(t)
    try:
        while True:
            await asyncio.sleep(min(1.0, max(0.05, opts["debounce_s"] / 4.0)))
            with lock:
                event = deb.due(time.time())
            if event is not None:
                await queue.put(event)
    finally:
        stop.set()
        await loop.run_in_executor(None, lambda: [t.join(0.1) for t in threads])


if __name__ == "__main__":
    import json
    import sys

    class _Print(object):
        async def put(self, event):
            print(json.dumps(event), flush=True)

    cli = dict(a.split("=", 1) for a in sys.argv[1:])
    for k in NUMBERS:
        if k in cli:
            cli[k] = float(cli[k])
    if "namespaces" in cli:
        cli["namespaces"] = cli["namespaces"].split(",")
    asyncio.run(main(_Print(), cli))
