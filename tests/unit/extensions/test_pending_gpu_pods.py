# -*- coding: utf-8 -*-
"""The EDA source gpuops.k8s.pending_gpu_pods without a cluster: classification, debounce, re-list on 410 Gone,
arguments; and its main() on a fake watch (the real API server is exercised by tests/e2e/test_replan.py's playbook,
which reads the same pods)."""
import importlib.util
import os
import threading

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_spec = importlib.util.spec_from_file_location(
    "pending_gpu_pods", os.path.join(TOP, "extensions", "eda", "plugins", "event_source", "pending_gpu_pods.py"))
src = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(src)
RES = "nvidia.com/mig-3g.40gb"


def pod(name, resources=None, message="0/4 nodes are available: 4 Insufficient %s." % RES, phase="Pending", ns="t"):
    status = {"phase": phase}
    if message is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": message, "lastTransitionTime": "2026-12-06T12:00:00Z"}]
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"containers": [{"name": "c", "resources": {"limits": resources if resources is not None else {RES: "1"}}}]},
            "status": status}


def test_classify():
    assert src.classify(pod("a")) == {"namespace": "t", "name": "a", "resources": {RES: 1},
                                      "message": "0/4 nodes are available: 4 Insufficient %s." % RES,
                                      "since": "2026-12-06T12:00:00Z"}
    assert src.classify(pod("cpu", message="0/4 nodes are available: 4 Insufficient cpu.")) is None
    assert src.classify(pod("web", resources={"cpu": "1"}, message="Insufficient cpu")) is None
    assert src.classify(pod("run", phase="Running")) is None
    assert src.classify(pod("fresh", message=None)) is None
    assert src.classify(pod("g", resources={"nvidia.com/gpu": 2}, message="Insufficient nvidia.com/gpu"))["resources"] == {
        "nvidia.com/gpu": 2}


def test_three_pods_within_the_debounce_make_one_event_then_repeat_and_empty():
    d = src.Debouncer(debounce_s=30, max_wait_s=300, repeat_s=600)
    for i, t in enumerate((0, 10, 20)):
        d.update(("t", "p%d" % i), src.classify(pod("p%d" % i)), t)
        assert d.due(t + 5) is None
    assert d.due(49) is None
    ev = d.due(50)["pending_gpu_pods"]
    assert ev["count"] == 3 and ev["resources"] == {RES: 3} and [p["name"] for p in ev["pods"]] == ["p0", "p1", "p2"]
    assert d.due(60) is None and d.due(600) is None
    assert d.due(651)["pending_gpu_pods"]["count"] == 3  # still pending after repeat_s
    # a status update that changes nothing that counts is no change
    d.update(("t", "p0"), src.classify(pod("p0", message="0/5 nodes are available: 5 Insufficient %s." % RES)), 700)
    assert d.due(800) is None
    # all bound: the set is empty, nothing is put
    for i in range(3):
        d.update(("t", "p%d" % i), None, 900)
    assert d.due(1000) is None and d.due(5000) is None


def test_max_wait_caps_a_stream_of_changes():
    d = src.Debouncer(debounce_s=30, max_wait_s=100, repeat_s=600)
    for t in range(0, 101, 10):
        d.update(("t", "p%d" % t), src.classify(pod("p%d" % t)), t)
    assert d.due(100)["pending_gpu_pods"]["count"] == 11


class FakeWatch(object):
    """Plays the kubernetes watch: one stream per call from ``streams`` (a list of event lists)."""

    def __init__(self, streams):
        self.streams = streams
        self.calls = []

    def __call__(self):
        return self

    def stream(self, fn, **kw):
        self.calls.append(kw.get("resource_version"))
        events = self.streams.pop(0) if self.streams else []
        yield from events

    def stop(self):
        pass


def test_watch_relists_on_410_gone_and_reports_events():
    lists = [{"metadata": {"resourceVersion": "1"}, "items": [pod("a")]},
             {"metadata": {"resourceVersion": "9"}, "items": [pod("a"), pod("b")]}]
    stop = threading.Event()
    seen = {"lists": [], "events": []}

    def list_fn(**kw):
        if not lists:
            stop.set()
            return {"metadata": {"resourceVersion": "10"}, "items": []}
        return lists.pop(0)

    fake = FakeWatch([[{"type": "ADDED", "object": pod("c")}, {"type": "ERROR", "object": {"code": 410}}],
                      [{"type": "DELETED", "object": pod("a")}]])
    src.watch_pods({"label_selector": None}, lambda items: seen["lists"].append([p["metadata"]["name"] for p in items]),
                   lambda kind, p: seen["events"].append((kind, p["metadata"]["name"])), stop,
                   list_fn=list_fn, watch_factory=fake, sleep=lambda s: None)
    assert seen["lists"][:2] == [["a"], ["a", "b"]]
    assert seen["events"] == [("ADDED", "c"), ("DELETED", "a")]
    assert fake.calls[:2] == ["1", "9"]  # each watch resumes from its list's resourceVersion


def test_bad_arguments_name_what_is_valid():
    with pytest.raises(src.ArgError, match="unknown arguments bogus; valid: kubeconfig"):
        src.parse_args({"bogus": 1})
    with pytest.raises(src.ArgError, match="debounce_s must be a number of seconds >= 0"):
        src.parse_args({"debounce_s": -1})
    with pytest.raises(src.ArgError, match="resources must be a list of nvidia.com/"):
        src.parse_args({"resources": ["cpu"]})
    with pytest.raises(src.ArgError, match="max_wait_s .* must be at least debounce_s"):
        src.parse_args({"debounce_s": 60, "max_wait_s": 10})
    with pytest.raises(src.ArgError, match="namespaces must be a list"):
        src.parse_args({"namespaces": "team-a"})
    assert src.parse_args({})["resources"] == ("nvidia.com/mig-", "nvidia.com/gpu")


def test_a_410_gone_relists_at_once_without_reading_on():
    # a watch that keeps streaming after its 410 Gone (a proxy that does not close it): the source re-lists at the
    # ERROR and never reads the stale events after it
    lists = [{"metadata": {"resourceVersion": "1"}, "items": [pod("a")]},
             {"metadata": {"resourceVersion": "9"}, "items": [pod("a"), pod("b")]}]
    stop = threading.Event()
    log = []

    def list_fn(**kw):
        if not lists:
            stop.set()
            return {"metadata": {"resourceVersion": "10"}, "items": []}
        return lists.pop(0)

    fake = FakeWatch([[{"type": "ADDED", "object": pod("c")}, {"type": "ERROR", "object": {"code": 410}},
                       {"type": "ADDED", "object": pod("stale")}],
                      [{"type": "DELETED", "object": pod("a")}]])
    src.watch_pods({"label_selector": None}, lambda items: log.append(("list", [p["metadata"]["name"] for p in items])),
                   lambda kind, p: log.append((kind, p["metadata"]["name"])), stop,
                   list_fn=list_fn, watch_factory=fake, sleep=lambda s: None)
    assert log[:4] == [("list", ["a"]), ("ADDED", "c"), ("list", ["a", "b"]), ("DELETED", "a")]
    assert ("ADDED", "stale") not in log


def test_a_410_raised_by_the_client_relists_without_backoff_and_other_errors_back_off():
    class Gone(Exception):
        status = 410

    calls, slept = [], []
    stop = threading.Event()

    def list_fn(**kw):
        calls.append(kw)
        if len(calls) == 1:
            raise Gone("Expired: too old resource version")
        if len(calls) in (2, 3):
            raise RuntimeError("connection reset")
        stop.set()
        return {"metadata": {"resourceVersion": "5"}, "items": []}

    src.watch_pods({"label_selector": None}, lambda items: None, lambda kind, p: None, stop, list_fn=list_fn,
                   watch_factory=FakeWatch([]), sleep=slept.append)
    assert len(calls) == 4 and slept == [1.0, 2.0]  # no wait after the 410; 1 s then 2 s after the two resets


def test_the_same_set_again_within_repeat_s_is_not_put_again():
    d = src.Debouncer(debounce_s=30, max_wait_s=300, repeat_s=600)
    d.update(("t", "p0"), src.classify(pod("p0")), 0)
    assert d.due(30)["pending_gpu_pods"]["count"] == 1  # reported at 30
    # another pod comes and goes within the debounce: after it the set is the one reported at 30
    d.update(("t", "p1"), src.classify(pod("p1")), 100)
    d.update(("t", "p1"), None, 110)
    assert d.due(140) is None and d.due(629) is None  # 140 - 30 < 600: no repeat yet
    # a re-list that finds the same set changes nothing either
    d.replace({("t", "p0"): src.classify(pod("p0"))}, 200)
    assert d.due(300) is None
    assert d.due(630)["pending_gpu_pods"]["count"] == 1  # repeat_s after the report at 30


def test_main_merges_a_namespaces_relist_with_the_other_namespaces(monkeypatch):
    # two namespaces, one watch each: ns2 lists b; ns1 lists a, then re-lists (after a 410) and finds c instead.
    # The re-list of ns1 replaces ns1's pods only: the set is {ns1/c, ns2/b} (a is gone, b stays).
    import asyncio
    listed = threading.Event()

    def fake_watch_pods(opts, on_list, on_event, stop, ns=None, **kw):
        if ns == "ns2":
            on_list([pod("b", ns="ns2")])
            listed.set()
        else:
            listed.wait(5)
            on_list([pod("a", ns="ns1"), pod("web", resources={"cpu": "1"}, ns="ns1")])
            on_list([pod("c", ns="ns1")])
        stop.wait(5)

    monkeypatch.setattr(src, "watch_pods", fake_watch_pods)

    class Queue(object):
        def __init__(self):
            self.events = []
            self.got = asyncio.Event()

        async def put(self, event):
            self.events.append(event)
            self.got.set()

    async def scenario():
        q = Queue()
        task = asyncio.ensure_future(src.main(q, {"namespaces": ["ns1", "ns2"], "debounce_s": 1.0, "max_wait_s": 5}))
        try:
            await asyncio.wait_for(q.got.wait(), 10)
        finally:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        return q.events

    events = asyncio.run(scenario())
    ev = events[0]["pending_gpu_pods"]
    assert [(p["namespace"], p["name"]) for p in ev["pods"]] == [("ns1", "c"), ("ns2", "b")]
    assert ev["count"] == 2 and ev["resources"] == {RES: 2}
