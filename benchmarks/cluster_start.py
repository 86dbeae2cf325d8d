#!/usr/bin/env python3
"""Warm start and stop time of the local control plane (binaries already built).

    .venv/bin/python benchmarks/cluster_start.py [runs]

Prints the seconds from start() to a ready cluster (etcd, API server /readyz, controller-manager and
scheduler /healthz, kwok /healthz, default ServiceAccount created) and the time to stop it.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "e2e"))

from lib import cluster  # noqa: E402


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    state = os.path.join(cluster.TOP, ".cache", "k8s-bench")
    binaries = cluster.bin_dir()
    starts, stops = [], []
    for i in range(runs):
        c = cluster.LocalCluster(state, binaries=binaries, log=lambda m: None)
        t0 = time.time()
        c.start()
        starts.append(time.time() - t0)
        t1 = time.time()
        c.stop(keep_logs=False)
        stops.append(time.time() - t1)
        print("run %d: ready after %.1f s, stopped in %.1f s" % (i + 1, starts[-1], stops[-1]), flush=True)
    print("warm start: min %.1f s, max %.1f s, mean %.1f s over %d runs"
          % (min(starts), max(starts), sum(starts) / len(starts), runs))


if __name__ == "__main__":
    main()
