"""Polling helpers for the e2e tests."""
import time


class Timeout(AssertionError):
    pass


def wait_for(probe, timeout=60, interval=0.5, what="condition"):
    """Call ``probe`` until it returns a truthy value (returned); AssertionError with the last value."""
    deadline = time.time() + timeout
    last = None
    while True:
        try:
            last = probe()
            if last:
                return last
        except Exception as e:  # the object may not exist yet
            last = e
        if time.time() > deadline:
            raise Timeout("timed out after %ss waiting for %s (last: %r)" % (timeout, what, last))
        time.sleep(interval)


def pod_manifest(name, resources=None, node_selector=None, priority_class=None, labels=None):
    """A pod whose image is never pulled: kwok marks it Running once it is bound to a kwok node."""
    limits = dict((k, str(v)) for k, v in (resources or {}).items())
    spec = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"limits": limits, "requests": dict(limits)}}],
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def nodes_schedulable(core, label_selector, count, timeout=120):
    """Wait until ``count`` nodes match ``label_selector``, each Ready and without the node lifecycle
    controller's not-ready/unreachable taints (kwok marks new nodes Ready a little later; until then the
    scheduler filters them out). Returns the nodes."""
    def probe():
        nodes = core.list_node(label_selector=label_selector).items
        ready = [n for n in nodes
                 if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
                 and not any(t.key in NOT_READY_TAINTS for t in n.spec.taints or [])]
        return nodes if len(nodes) == count and len(ready) == count else None
    return wait_for(probe, timeout=timeout, interval=1, what="%d schedulable nodes (%s)" % (count, label_selector))
