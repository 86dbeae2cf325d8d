# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_whatif's replay for the comparisons against the real kube-scheduler (lab code, never shipped).

``replay_one`` replays one sharing / scoring and returns the arrivals and the outcome per pod;
``stepper`` hands back the replay to drive one arrival at a time (``engine.best_nodes`` /
``engine.commit``). Both use the same sampling, order and inflation as the module's
``whatif.runner.run``. Users: tests/e2e/test_whatif_scheduler.py, hack/whatif_e2e_sample.py.
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# gpu_nodes puts the collection on sys.path
import gpu_nodes  # noqa: E402,F401 pylint: disable=unused-import
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import frag as whatif_frag  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import runner  # noqa: E402


def _draw(p, seed):
    """``(nodes, pods, cluster, seq, rng)`` for the normalised options ``p``: the sampled nodes, the pods, the
    engine's cluster, the arrival sequence and the draw's random stream, as :func:`runner.run` makes them."""
    seed = p["seeds"][0] if seed is None else seed
    nodes_all, pods = runner.load_inputs(p)
    nodes = runner.sample(nodes_all, p["sample_nodes"], seed)
    cluster = whatif_engine.Cluster(nodes)
    seq, rng, dummy_added, dummy_removed = runner.arrivals_for(pods, cluster.total_milli, p, seed)
    return nodes, pods, cluster, seq, rng


def replay_one(params, seed=None, sharing=None, scoring=None, tie_seeds=None):
    """One replay, for callers that need the arrivals and the outcome per pod (e2e comparisons).

    Returns ``{"nodes", "arrivals" (Pod list, in order), "placed" (bool per arrival), "events",
    "engine", "cluster", "placed_counts"}``. With ``tie_seeds``, the same arrivals are also replayed once
    per seed of the tie-breaking draws and ``placed_counts`` lists the pods placed each time (the spread
    of a policy that breaks ties at random, such as kube-default).
    """
    p = runner.normalise(params)
    nodes, pods, cluster, seq, rng = _draw(p, seed)
    sharing = sharing or p["sharing"][0]
    scoring = scoring or p["scoring"][0]
    lay = runner.layouts_for(sharing, nodes, p) if sharing in ("mig", "planned") else None
    events, engine = runner.replay(cluster, nodes, pods, seq, rng, scoring, sharing, p, lay)
    counts = []
    for ts in tie_seeds or []:
        ev, dummy_engine = runner.replay(cluster, nodes, pods, seq, random.Random(ts), scoring, sharing, p, lay)
        counts.append(int(ev.placed.sum()))
    return {"nodes": nodes, "arrivals": seq, "placed": [bool(x) for x in events.placed], "events": events,
            "engine": engine, "cluster": cluster, "placed_counts": counts}


def stepper(params, seed=None):
    """A replay to drive one arrival at a time: ``{"nodes", "arrivals", "engine"}`` (sharing exclusive or
    fractional; the first scoring of ``params``)."""
    p = runner.normalise(params)
    sharing = p["sharing"][0]
    if sharing not in ("exclusive", "fractional"):
        raise GpuOpsError("stepping is for sharing exclusive or fractional, not %r" % (sharing,))
    nodes, pods, cluster, seq, rng = _draw(p, seed)
    tie = None if p["tie_break"] == "auto" else p["tie_break"]
    typ = whatif_frag.Typical(runner.typical_for(pods, sharing, p["typical_threshold"]), cluster.models)
    replay_ = whatif_engine.MilliReplay(cluster, runner.engine_arrivals(seq, sharing), p["scoring"][0], typ, rng,
                                        p["percentage_of_nodes_to_score"], tie)
    return {"nodes": nodes, "arrivals": seq, "engine": replay_}
