# -*- coding: utf-8 -*-
"""The lab's what-if replay (tests/e2e/lib/whatif_replay.py): the same draw and outcome as the module's run,
and the stepper that tests/e2e/test_whatif_scheduler.py drives in lockstep with kube-scheduler."""
import os
import sys

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import runner

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
from lib.whatif_replay import replay_one, stepper  # noqa: E402

FIX = os.path.join(TOP, "tests", "unit", "plugins", "module_utils", "whatif", "fixtures")


def base(**kw):
    p = {"nodes_csv": os.path.join(FIX, "openb_nodes_sample.csv"), "pods_csv": os.path.join(FIX, "openb_pods_sample.csv")}
    p.update(kw)
    return p


def test_replay_one_places_what_the_module_run_places():
    params = base(scoring="kube-default", sharing="exclusive", tie_break="rank", inflation=1.0)
    one = replay_one(params, tie_seeds=[1, 2])
    summary = runner.run(params)["summary"]
    assert len(one["placed"]) == len(one["arrivals"])
    assert len(one["arrivals"]) - sum(one["placed"]) == summary["unscheduled_pods"]
    assert len(one["placed_counts"]) == 2 and all(0 < c <= len(one["arrivals"]) for c in one["placed_counts"])


def test_stepper_taking_its_own_best_choices_replays_a_run():
    """Driven one arrival at a time with the node the model itself scores best (ties broken by the
    same seeded draw as a run), the stepper places exactly the pods a run places."""
    params = base(scoring="kube-default", sharing="exclusive", tie_break="rank")
    whole = replay_one(params)
    step = stepper(params)
    eng = step["engine"]
    assert step["arrivals"] == whole["arrivals"]
    placed = []
    for k in range(len(step["arrivals"])):
        scored, best = eng.best_nodes(k)
        if len(scored) == 0:
            assert len(best) == 0
            placed.append(False)
            continue
        assert set(best) <= set(scored)
        node = int(best[int((eng.rank[best]).argmin())])  # tie_break rank: the best-ranked of the tied nodes
        eng.commit(k, node)
        placed.append(True)
    assert placed == whole["placed"]
    assert 0 < sum(placed) < len(placed)
    with pytest.raises(GpuOpsError, match="best_nodes is for scoring kube-default"):
        stepper(base(scoring="fgd"))["engine"].best_nodes(0)
    with pytest.raises(GpuOpsError, match="stepping is for sharing exclusive or fractional"):
        stepper(base(sharing="mig", mig_config={"all": "all-balanced"}))
