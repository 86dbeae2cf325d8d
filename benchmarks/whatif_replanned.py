# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/whatif.md, "Departures and re-planned MIG": gpu_whatif with departures, static against re-planned MIG.

    python benchmarks/whatif_replanned.py [--trace DIR] [--seeds 10] [--workloads default,gpushare40,gpuspec20]
        [--scoring kube-default] [--loaded-nodes 24] [--loaded-seeds 5] [--out DIR] [--img DIR]

Two settings, each per workload and seed (seeds 42.., as the FGD protocol):

* *protocol*: the 1,213 GPU nodes (6,212 GPUs), the arrival sequence of the FGD protocol (shuffle, inflation
  1.3: the pods the inflation adds keep the times of the pod they copy), replayed over the trace's time;
* *loaded* (``--loaded-nodes``, 0: off): a seeded sample of that many nodes and the trace as given (inflation 0),
  so that pods wait.

Rows: ``exclusive``, ``fractional``, static ``mig`` (half the GPUs of each node all-balanced, as the claims'
row), static ``planned`` (gpu_plan, heuristic, ``min_gpus``, for the workload's own demand as
benchmarks/whatif_planned.py builds it, scaled to 1.3 x the replayed GPUs), ``replanned`` from whole GPUs (only
the demand seen so far) and ``replanned`` from the static plan. Every non-MIG GPU is shaped like an A100 80GB
(``mig_shape``) for the MIG rows: an explicit assumption, none of the trace's GPUs can do MIG.

Prints one table per workload and setting, checks the target (default workload, protocol setting: ``replanned``
serves at least as much as static ``planned`` with fewer GPU-hours held) and prints it as met / not met, and
writes whatif-replanned.md and two SVGs per setting (cumulative GPU-hours held over time, GPUs reconfigured over
time; default workload, seed mean) into --out (and --img, e.g. docs/img).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whatif_sweep  # noqa: E402  (sets up the collection path; trace_dir)
import whatif_planned  # noqa: E402  (demand_of, A100)

from ansible_collections.gpuops.k8s.plugins.module_utils.plan import solver  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.report import svg, writer  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import departures, report_timed, runner  # noqa: E402

HALF_MIG = [{"devices": "all", "mig-enabled": False},
            {"devices": [0, 2, 4, 6], "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]
ROWS = (("exclusive", "exclusive"), ("fractional", "fractional"), ("mig", "mig (static, half all-balanced)"),
        ("planned", "planned (static gpu_plan)"), ("replanned", "replanned (from whole GPUs)"),
        ("replanned+plan", "replanned (from the static plan)"))


def static_plan(nodes, pods, factor):
    """gpu_plan for the workload's demand, counts scaled so that it asks for ``factor`` x the nodes' GPUs."""
    gpus = sum(n.gpus for n in nodes)
    request = sum(p.num_gpu * p.gpu_milli for p in pods) / 1000.0
    plan_nodes = [{"name": n.name, "gpus": [{"model": whatif_planned.A100, "count": n.gpus}]} for n in nodes if n.gpus]
    t0 = time.time()
    plan = solver.plan(plan_demand.parse_request({
        "nodes": plan_nodes, "demand": whatif_planned.demand_of(pods, factor * gpus / request),
        "objective": "min_gpus", "solver": "heuristic"})).as_dict()
    return plan, time.time() - t0


def one_setting(csv_dir, workload, seeds, scoring, sample, inflation):
    """``{row: {"summary": combined, "curves": [...], "seconds": [...]}}`` over the seeds."""
    base = {"nodes_csv": os.path.join(csv_dir, "openb_node_list_gpu_node.csv"),
            "pods_csv": os.path.join(csv_dir, "openb_pod_list_%s.csv" % workload), "departures": True,
            "scoring": [scoring], "inflation": inflation, "sample_nodes": sample, "mig_shape": "a100_80gb"}
    nodes_all, pods = runner.load_inputs(runner.normalise(dict(base)))
    out = dict((key, {"summaries": [], "curves": [], "seconds": []}) for key, dummy in ROWS)
    plans = {}
    plan_s = []
    for seed in seeds:
        nodes = runner.sample(nodes_all, sample, seed)
        key = tuple(n.name for n in nodes)
        if key not in plans:
            plans[key], secs = static_plan(nodes, pods, 1.3)
            plan_s.append(secs)
        plan = plans[key]
        calls = (({"sharing": ["exclusive", "fractional", "mig", "planned", "replanned"], "plan": plan,
                   "mig_config": {"*": HALF_MIG}}, ["exclusive", "fractional", "mig", "planned", "replanned+plan"]),
                 ({"sharing": ["replanned"]}, ["replanned"]))
        for extra, names in calls:
            res = runner.run(dict(base, seeds=[seed], **extra))
            for name, run in zip(names, res["runs"]):
                out[name]["summaries"].append(run["summary"])
                out[name]["curves"].append(run["curve"])
                out[name]["seconds"].append(sum(run["replay_seconds"]))
    for key in out:
        r = out[key]
        r["summary"] = runner.combine(r["summaries"], seeds, departures.SUMMARY_FIELDS)
        r["curve"] = departures.mean_timeline(r["curves"])
    meta = {"gpus": sum(n.gpus for n in runner.sample(nodes_all, sample, seeds[0])), "pods": len(pods),
            "plan_seconds": plan_s}
    return out, meta


def table(out):
    runs = [{"sharing": label, "scoring": "", "summary": out[key]["summary"]} for key, label in ROWS]
    rows = [r[:1] + r[2:] + ["%.1f" % (sum(out[key]["seconds"]) / len(out[key]["seconds"]))]
            for r, (key, dummy) in zip(report_timed.rows(runs), ROWS)]
    headers = [h for h in report_timed.HEADERS if h != "scoring"] + ["s / replay"]
    return writer.table(headers, rows, ["l"] + ["r"] * (len(headers) - 1))


def target(out):
    re, st = out["replanned"]["summary"], out["planned"]["summary"]
    ok = re["served_pct"] >= st["served_pct"] and re["gpu_hours_held"] < st["gpu_hours_held"]
    text = ("target (replanned from whole GPUs vs static planned: served >= and fewer GPU-hours held): %s - served "
            "%.3f %% vs %.3f %%, GPU-h held %.1f vs %.1f (%+.2f %%), at %.2f GPUs reconfigured per day (%.1f in all)"
            % ("MET" if ok else "NOT MET", re["served_pct"], st["served_pct"], re["gpu_hours_held"],
               st["gpu_hours_held"], 100.0 * (re["gpu_hours_held"] - st["gpu_hours_held"]) / st["gpu_hours_held"],
               re["reconfigured_gpus_per_day"], re["reconfigured_gpus"]))
    return ok, text


def pictures(out, setting):
    held, reconf = [], []
    for key, label in ROWS:
        curve = out[key]["curve"]
        acc, pts = 0.0, []
        for a, b in zip(curve, curve[1:] + [None]):
            pts.append((a["hour"], round(acc, 1)))
            if b is not None:
                acc += a["held_gpus"] * (b["hour"] - a["hour"])
        held.append({"name": label, "points": pts})
        if key.startswith("replanned"):
            reconf.append({"name": label, "points": [(pt["hour"], pt["reconfigured_gpus"]) for pt in curve]})
    return {
        "whatif-replanned-%s-held.svg" % setting: svg.line_chart(
            held, "GPU-hours held so far (%s, default workload)" % setting, "hours since the first arrival",
            "GPU-hours held"),
        "whatif-replanned-%s-reconfigured.svg" % setting: svg.line_chart(
            reconf, "GPUs reconfigured so far (%s, default workload)" % setting, "hours since the first arrival",
            "GPUs reconfigured"),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--trace")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--workloads", default="default,gpushare40,gpuspec20")
    ap.add_argument("--scoring", default="kube-default")
    ap.add_argument("--loaded-nodes", type=int, default=24)
    ap.add_argument("--loaded-seeds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(whatif_sweep.TOP, ".build", "whatif", "replanned"))
    ap.add_argument("--img", help="also write the SVGs there (docs/img)")
    args = ap.parse_args(argv)
    csv_dir = whatif_sweep.trace_dir(args.trace)
    settings = [("protocol", None, 1.3, list(range(42, 42 + args.seeds)))]
    if args.loaded_nodes:
        settings.append(("loaded", args.loaded_nodes, 0.0, list(range(42, 42 + args.loaded_seeds))))
    md = ["# gpu_whatif with departures: static and re-planned MIG", ""]
    pics = {}
    t_all = time.time()
    for setting, sample, inflation, seeds in settings:
        for wl in args.workloads.split(","):
            t0 = time.time()
            out, meta = one_setting(csv_dir, wl, seeds, args.scoring, sample, inflation)
            head = ("## %s, %s: %d GPUs%s, %d pods, inflation %.1f, scoring %s, seeds %d..%d (%.0f s; gpu_plan %.2f s "
                    "per plan)" % (wl, setting, meta["gpus"], (" (a sample of %s nodes, seed %s)" % (sample, seeds[0]))
                                   if sample else "", meta["pods"], inflation, args.scoring, seeds[0], seeds[-1],
                                   time.time() - t0, sum(meta["plan_seconds"]) / len(meta["plan_seconds"])))
            print(head)
            print(table(out))
            md += [head, "", table(out).rstrip("\n"), ""]
            if wl == "default":
                pics.update(pictures(out, setting))
                if setting == "protocol":
                    dummy_met, text = target(out)
                    print(text)
                    md += [text, ""]
            sys.stdout.flush()
    print("total %.0f s" % (time.time() - t_all))
    md += ["![GPU-hours held](whatif-replanned-protocol-held.svg)", "",
           "![GPUs reconfigured](whatif-replanned-protocol-reconfigured.svg)", ""]
    written = writer.write_report(os.path.join(args.out, "whatif-replanned.md"), "\n".join(md) + "\n", pics)
    print("report: %s" % written["path"])
    if args.img:
        for name, text in sorted(pics.items()):
            with open(os.path.join(args.img, name), "w") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
