"""Write the trace sample that tests/e2e/test_whatif_scheduler.py replays (tests/e2e/data/whatif-sample/).

The e2e test must not depend on where the full Alibaba 2023 trace lies, so the sample it needs is
committed: 200 GPU nodes drawn (seed 7) from openb_node_list_gpu_node.csv, and the pods that arrive on
them, in their arrival order, from openb_pod_list_default.csv (shuffled with seed 7, the artefact's
protocol, inflation 1.0: pods until the sample's GPU capacity is requested; repeats renamed <name>-r<k>).

    .venv/bin/python hack/whatif_e2e_sample.py [path/to/alibaba-gpu-2023/csv]
"""
import csv
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e", "lib"))

from whatif_replay import replay_one  # noqa: E402  (tests/e2e/lib: puts the collection on sys.path)

OUT = os.path.join(TOP, "tests", "e2e", "data", "whatif-sample")
SAMPLE_NODES = 200
SEED = 7


def main():
    default_dir = os.path.join(os.path.dirname(TOP), "shared", "data", "alibaba-gpu-2023", "csv")
    csv_dir = sys.argv[1] if len(sys.argv) > 1 else default_dir
    params = {"nodes_csv": os.path.join(csv_dir, "openb_node_list_gpu_node.csv"),
              "pods_csv": os.path.join(csv_dir, "openb_pod_list_default.csv"),
              "scoring": "kube-default", "sharing": "exclusive", "inflation": 1.0, "seed": SEED,
              "sample_nodes": SAMPLE_NODES}
    model = replay_one(params)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "nodes.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        for n in model["nodes"]:
            w.writerow([n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model or ""])
    seen = {}
    with open(os.path.join(OUT, "pods.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
                    "creation_time", "deletion_time", "scheduled_time"])
        for i, p in enumerate(model["arrivals"]):
            k = seen.get(p.name, 0)
            seen[p.name] = k + 1
            name = p.name if k == 0 else "%s-r%d" % (p.name, k)
            w.writerow([name, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, "|".join(p.gpu_spec or ()) or "",
                        p.qos or "", "", i, "", ""])
    print("wrote %d nodes and %d pods to %s" % (len(model["nodes"]), len(model["arrivals"]), os.path.relpath(OUT, TOP)))


if __name__ == "__main__":
    main()
