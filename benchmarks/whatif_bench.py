# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make bench-whatif`: seconds per what-if experiment, per policy and sharing mode.

One experiment = the default trace (8,152 pods) inflated to 1.3 x the capacity (about 10,800
arrivals) replayed on the 1,213 GPU nodes (6,212 GPUs), as in the FGD paper. For each policy the
replay runs ``--repeat`` times (seeds 42, 43, ...); printed: the median and the fastest replay, and
the time of a whole ``runner.run`` (reading both CSV files, arrivals, replay, curve, summary) for one
seed. The machine's load average is printed too: other jobs slow every figure down.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whatif_sweep  # noqa: E402  (sets up the collection path)

from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data as whatif_data, engine, runner  # noqa: E402

CASES = [("fractional", s) for s in engine.SCORINGS] + [("exclusive", "kube-default"), ("exclusive", "fgd"),
                                                        ("mig", "kube-default"), ("mig", "fgd")]
HALF_MIG = {"*": [{"devices": "all", "mig-enabled": False},
                  {"devices": [0, 2, 4, 6], "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trace")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tdir = whatif_sweep.trace_dir(args.trace)
    nodes_csv = os.path.join(tdir, "openb_node_list_gpu_node.csv")
    pods_csv = os.path.join(tdir, "openb_pod_list_default.csv")
    t = time.time()
    nodes = whatif_data.read_nodes_csv(nodes_csv)
    pods = whatif_data.read_pods_csv(pods_csv)
    t_read = time.time() - t
    print("load average %.2f %.2f %.2f on %d CPUs; reading the two CSV files: %.2f s"
          % (os.getloadavg() + (os.cpu_count(), t_read)))
    print("%-11s %-13s %9s %9s %9s" % ("sharing", "scoring", "median s", "min s", "arrivals"))
    medians = {}
    for sharing, scoring in CASES:
        times = []
        arrivals = 0
        for k in range(args.repeat):
            extra = {"mig_config": HALF_MIG} if sharing == "mig" else {}
            dummy_curve, summary, dt = whatif_sweep.experiment(nodes, pods, dict({"nodes_csv": "-", "pods_csv": "-"}, **extra),
                                                               42 + k, sharing, scoring)
            times.append(dt)
        p = runner.normalise({"nodes_csv": "-", "pods_csv": "-"})
        arrivals = len(runner.arrivals_for(pods, engine.Cluster(nodes).total_milli, p, 42)[0])
        medians[(sharing, scoring)] = statistics.median(times)
        print("%-11s %-13s %9.2f %9.2f %9d" % (sharing, scoring, statistics.median(times), min(times), arrivals))
        sys.stdout.flush()
    t = time.time()
    res = runner.run({"nodes_csv": nodes_csv, "pods_csv": pods_csv, "scoring": "fgd", "sharing": "fractional"})
    print("one whole run (fgd, fractional, read + replay + summary): %.2f s (allocated %.2f %% at 100 %%)"
          % (time.time() - t, res["summary"]["allocated_pct_at_100"]))
    paper = sum(medians[("fractional", s)] for s in ("random", "dot-product", "clustering", "packing", "best-fit", "fgd"))
    print("the paper's sweep (6 policies x 17 workloads x 10 seeds), replays only, estimated from the default trace: "
          "%.0f s" % (paper * 17 * 10))


if __name__ == "__main__":
    main()
