# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make bench-capacity` (docs/whatif.md, "How many GPUs does each strategy need?"): gpu_whatif's capacity search
per strategy on loaded workloads of the Alibaba 2023 trace, and the seed's claims confirmed or refuted.

    python benchmarks/whatif_capacity.py [--trace DIR] [--seeds 10] [--workloads default:4,gpushare40:4,gpuspec20:4]
        [--strategies exclusive,fractional,mig,planned,replanned,dra-first-fit,dra-steered,...] [--other-strategies exclusive,fractional,elastic]
        [--sizes 1,16] [--served 99] [--cache DIR [--cached-only]]
        [--scoring kube-default] [--out DIR] [--img DIR]

Per workload (``name:load_factor``): ``departures: true``, ``window: active``, the trace as given (``inflation:
0``) with arrivals compressed by the load factor, and for each strategy the fewest GPUs of the nested node
samples (seeds 42..) that serve ``--served`` % of the requested GPU-time (``capacity_search``), and at that size
USD/h (a flat 1 USD per GPU-hour: the trace's models have no price, so USD/h reads as GPUs), utilisation
(requested / provisioned GPU-time), GPUs held, served by GPU-time and by pod count and by class. Paired
differences against ``exclusive`` (today's default: whole GPUs, kube-default) with 95 % intervals over the seeds.
``--sizes``: more load factors of the default workload (``exclusive`` and ``fractional`` only) for the seed's
size-bucket table. Strategies: ``exclusive``, ``fractional``, static ``mig`` (half the GPUs of each node
all-balanced), static ``planned`` (gpu_plan for the workload's pod counts, as benchmarks/whatif_replanned.py),
``replanned`` (from whole GPUs), dynamic MIG through DRA ``dra-first-fit`` and ``dra-steered`` (whatif/dra.py); the
ideal per seed (the same pods perfectly divisible into one pool: capacity.ideal_gpus) and dra-steered paired against
dra-first-fit (what steering buys); the options of branch capstrat (``priorities``, ``autoscaler``, sharing
``hindsight``, ``replan_scope``) are added when runner.DEFAULTS has them (EXTRA below).

Writes whatif-capacity.md and whatif-capacity-<workload>.svg into --out (and the SVGs into --img).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whatif_sweep  # noqa: E402  (sets up the collection path; trace_dir)
import whatif_replanned  # noqa: E402  (HALF_MIG, static_plan)

from ansible_collections.gpuops.k8s.plugins.module_utils.report import svg, writer  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import runner, stats  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import capacity, load, prepare  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine  # noqa: E402

FLAT_PRICE = 1.0
CACHED_ONLY = False
CACHE = None  # --cache: results per workload, load factor, strategy and seeds, reused by later runs
# strategy -> (label, extra gpu_whatif params); "plan" is filled in per workload
BASE_STRATEGIES = {
    "exclusive": ("exclusive (whole GPUs, today's default)", {"sharing": ["exclusive"]}),
    "fractional": ("fractional (time-slicing / MPS)", {"sharing": ["fractional"]}),
    "mig": ("mig (static, half all-balanced)", {"sharing": ["mig"], "mig_config": {"*": whatif_replanned.HALF_MIG}}),
    "planned": ("planned (static gpu_plan, pod counts)", {"sharing": ["planned"]}),
    "replanned": ("replanned (from whole GPUs)", {"sharing": ["replanned"]}),
    "dra-first-fit": ("dra-first-fit (dynamic MIG, scheduler's first fit)", {"sharing": ["dra-first-fit"]}),
    "dra-steered": ("dra-steered (dynamic MIG, steered placements)", {"sharing": ["dra-steered"]}),
}
# the strategies of branch capstrat (issue 33, section 3), run when the collection has their options: name ->
# (label, params, the runner.DEFAULTS key or runner.SHARINGS value they need). Extend here.
EXTRA = {
    "planned-p95": ("planned (static, sized by concurrent demand p95)", {"sharing": ["planned"]}, "planned_percentile"),
    "hindsight": ("hindsight (best static layout)", {"sharing": ["hindsight"]}, "hindsight"),
    "replanned-node": ("replanned, node-level (drain: requeue)", {"sharing": ["replanned"], "replan_scope": "node",
                                                                  "replan_drain": "requeue"}, "replan_scope"),
    "priority": ("exclusive + priorities and preemption", {"sharing": ["exclusive"], "priorities": "default"},
                 "priorities"),
    "elastic": ("exclusive + autoscaler", {"sharing": ["exclusive"], "autoscaler": {}}, "autoscaler"),
    "combined": ("fractional + priorities + autoscaler", {"sharing": ["fractional"], "priorities": "default",
                                                          "autoscaler": {}}, "autoscaler"),
}
FIELDS = ("gpus", "usd_per_hour", "utilisation_pct", "held_pct", "served_pct", "served_pods_pct")


def strategies(names):
    out = []
    for n in names:
        if n in BASE_STRATEGIES:
            out.append((n,) + BASE_STRATEGIES[n])
        elif n in EXTRA:
            label, extra, option = EXTRA[n]
            if _has(option):
                out.append((n, label, extra))
            else:
                print("skipped %s: this branch has no option %r (issue 33 section 3, branch capstrat)" % (n, option))
        else:
            raise SystemExit("unknown strategy %s; known: %s" % (n, ", ".join(list(BASE_STRATEGIES) + list(EXTRA))))
    return out


def _has(option):
    return option in runner.DEFAULTS or option in runner.SHARINGS


def one_workload(csv_dir, workload, factor, seeds, strats, served, scoring):
    base = {"nodes_csv": os.path.join(csv_dir, "openb_node_list_gpu_node.csv"),
            "pods_csv": os.path.join(csv_dir, "openb_pod_list_%s.csv" % workload), "departures": True,
            "inflation": 0.0, "window": "active", "load_factor": factor, "scoring": [scoring], "seeds": seeds,
            "capacity_search": {"served_pct": served}, "mig_shape": "a100_80gb"}
    norm = runner.normalise(dict(base))
    nodes_all, pods = runner.load_inputs(norm)
    models = sorted(set(n.model for n in nodes_all if n.model))
    base["prices"] = dict((m, FLAT_PRICE) for m in models)
    out = {}
    for name, label, extra in strats:
        key = CACHE and os.path.join(CACHE, "%s-x%g-%s-%s-%d-%g-%s.json" % (workload, factor, name, scoring, seeds[0],
                                                                            served, len(seeds)))
        if key and os.path.exists(key):
            with open(key) as f:
                out[name] = json.load(f)
            print("  %-45s (cached: %s)" % (label, key))
            continue
        if CACHED_ONLY:
            print("  %-45s not in the cache: left out (--cached-only)" % label)
            continue
        params = dict(base, **extra)
        if name == "planned":
            params["plan"], dummy = whatif_replanned.static_plan(nodes_all, pods, 1.3)
        t0, c0 = time.time(), time.process_time()
        res = runner.run(params)
        run = res["runs"][0]
        out[name] = {"label": label, "capacity": run["capacity"], "summary": run["summary"],
                     "seconds": time.time() - t0, "cpu_seconds": time.process_time() - c0}
        if key:
            os.makedirs(CACHE, exist_ok=True)
            with open(key, "w") as f:
                json.dump(out[name], f)
        cap = run["capacity"]
        print("  %-45s GPUs %7.1f (%s)  util %6.2f %%  served %.3f %%  met %d/%d  %.0f s (CPU %.0f s), %.1f replays/seed" % (
            label, cap["gpus"], ", ".join(str(c["gpus"]) for c in cap.get("per_seed", [cap])), cap["utilisation_pct"],
            cap["served_pct"], cap.get("met_seeds", int(cap["met"])), len(seeds), out[name]["seconds"],
            out[name]["cpu_seconds"], cap["replays"]))
        sys.stdout.flush()
    return out, {"gpus": sum(n.gpus for n in nodes_all), "pods": len(pods), "ideal": ideal(norm, nodes_all, pods)}


def ideal(p, nodes_all, pods):
    """Per seed, the fewest GPUs at which the same pods (the search's arrival sequence), perfectly divisible into
    one pool, meet the target (capacity.ideal_gpus), and the peak concurrent request."""
    total = whatif_engine.Cluster(nodes_all).total_milli
    got, peaks = [], []
    for seed in p["seeds"]:
        seq, dummy_rng, dummy_a, dummy_r = prepare.arrivals_for(pods, total, p, seed)
        seq, end = load.retime(seq, p["window"], p["load_factor"])
        got.append(capacity.ideal_gpus(seq, end, p["capacity_search"]))
        peaks.append(capacity.peak_request(seq))
    return {"gpus": stats.mean_ci(got), "peak": stats.mean_ci(peaks), "per_seed": got}


def steering(out):
    """dra-steered against dra-first-fit, paired over the seeds (what steering buys)."""
    if "dra-steered" not in out or "dra-first-fit" not in out:
        return None
    per_run = dict((k, per_seed(out[k]["capacity"])) for k in ("dra-first-fit", "dra-steered"))
    return stats.paired(per_run, "dra-first-fit", FIELDS, relative=("gpus", "utilisation_pct"))["dra-steered"]


def per_seed(cap):
    return cap.get("per_seed") or [cap]


def paired(out, baseline="exclusive"):
    if baseline not in out:
        return {}
    per_run = dict((k, per_seed(v["capacity"])) for k, v in out.items())
    return stats.paired(per_run, baseline, FIELDS, relative=("gpus", "utilisation_pct"))


def sd(cap, f):
    s = (cap.get("spread") or {}).get(f)
    return " ± %.1f" % s["stdev"] if s else ""


def table(out, diffs):
    headers = ["strategy", "GPUs needed", "vs exclusive: GPUs % [95 % CI]", "USD / h", "utilisation %",
               "utilisation vs exclusive, % [CI]", "held %", "served % GPU-time", "served % pods", "shared pods %",
               "short pods %", "met"]
    rows = []
    for k, v in out.items():
        c, s = v["capacity"], v["summary"]
        d = diffs.get(k, {})
        bc = s.get("by_class") or {}
        rows.append([v["label"], "%.1f%s" % (c["gpus"], sd(c, "gpus")),
                     stats.fmt(d.get("gpus_rel_pct"), "%+.1f") if d else "baseline",
                     "%.1f" % c["usd_per_hour"] if c["usd_per_hour"] is not None else "n/a",
                     "%.2f%s" % (c["utilisation_pct"], sd(c, "utilisation_pct")),
                     stats.fmt(d.get("utilisation_pct_rel_pct"), "%+.1f") if d else "baseline",
                     "%.2f" % c["held_pct"], "%.3f" % c["served_pct"], "%.3f" % c["served_pods_pct"],
                     "%.2f" % bc["shared"]["served_pods_pct"] if "shared" in bc else "n/a",
                     "%.2f" % bc["short"]["served_pods_pct"] if "short" in bc else "n/a",
                     "%d/%d" % (c.get("met_seeds", int(c["met"])), len(per_seed(c)))])
    return writer.table(headers, rows, ["l"] + ["r"] * (len(headers) - 1))


def _ci(d):
    return stats.fmt(d, "%+.1f")


def claims(results, sizes):
    """The seed's claims, each confirmed or refuted from the default workload's figures."""
    out, diffs = results
    if "exclusive" not in out:
        return "(no exclusive baseline)\n"
    ex = out["exclusive"]["capacity"]
    u = stats.mean_ci([c["utilisation_pct"] for c in per_seed(ex)])
    lines = []

    def verdict_in(ci, lo, hi):
        if ci["ci95"] is None:
            return "n/a"
        a, b = ci["ci95"]
        if a >= lo and b <= hi:
            return "confirmed"
        if b < lo or a > hi:
            return "refuted"
        return "not decided (the interval straddles the claim)"

    lines.append(("clusters run at 30-40 % (today's default sized for the target)",
                  "exclusive: utilisation %s %% (95 %% CI %s), GPUs held %.1f %%" % (
                      "%.2f" % u["mean"], u["ci95"], ex["held_pct"]), verdict_in(u, 30, 40)))

    def lift(name, claim_pct, what):
        if name not in diffs:
            return (what, "not in this run (strategy %s not run)" % name, "cannot answer here")
        d = diffs[name]["utilisation_pct_rel_pct"]
        g = diffs[name]["gpus_rel_pct"]
        v = d["verdict"]
        if v is None:
            verdict = "n/a"
        elif v == "none":
            verdict = "refuted: no difference inside the noise"
        elif d["ci95"][0] <= claim_pct <= d["ci95"][1]:
            verdict = "confirmed (the interval holds +%d %%)" % claim_pct
        elif d["ci95"][1] < claim_pct:
            verdict = "refuted: smaller (%s)" % ("a loss" if d["ci95"][1] < 0 else "a gain below the claim")
        else:
            verdict = "refuted: larger"
        return (what, "utilisation %s %% relative, GPUs needed %s %%" % (_ci(d), _ci(g)), verdict)

    lines.append(lift("mig", 35, "MIG +35 % (static, half all-balanced)"))
    lines.append(lift("planned", 35, "MIG +35 % (static gpu_plan layout)"))
    lines.append(lift("planned-p95", 35, "MIG +35 % (static layout sized by concurrent demand)"))
    lines.append(lift("hindsight", 35, "MIG +35 % (hindsight-best static layout)"))
    lines.append(lift("replanned", 35, "MIG +35 % (re-planned layouts, per GPU)"))
    lines.append(lift("replanned-node", 35, "MIG +35 % (re-planned layouts, per node as mig-parted)"))
    lines.append(lift("fractional", 25, "time-slicing +25 %"))
    lines.append(lift("priority", 15, "priority scheduling +15 %"))
    lines.append(lift("elastic", 10, "elastic capacity +10 %"))
    lines.append(lift("combined", 50, "combined +50 % (fractional + priorities + autoscaler)"))
    best = max((k for k in out if k != "exclusive"), key=lambda k: out[k]["capacity"]["utilisation_pct"], default=None)
    if best:
        b = out[best]["capacity"]
        bu = stats.mean_ci([c["utilisation_pct"] for c in per_seed(b)])
        lines.append(("combined +50 %% / above 80 %% (best measured: %s)" % best,
                      "utilisation %s %% relative; %.2f %% (CI %s)" % (
                          _ci(diffs[best]["utilisation_pct_rel_pct"]), bu["mean"], bu["ci95"]),
                      "above 80 %%: %s" % ("yes" if bu["ci95"] and bu["ci95"][0] > 80 else "no")))
    if sizes:
        parts = []
        for factor, res in sorted(sizes.items()):
            for k in ("exclusive", "fractional"):
                if k in res:
                    c = res[k]["capacity"]
                    parts.append("load x%g %s: %.0f GPUs, %.1f %%" % (factor, k, c["gpus"], c["utilisation_pct"]))
        lines.append(("by size: <8 GPUs 60 %, 8-32 75 %, 32-128 80 %, >128 85 %+", "; ".join(parts),
                      "see the table: utilisation at the size each load needs"))
    return writer.table(["the seed says", "measured (default workload)", "verdict"], [list(x) for x in lines],
                        ["l", "l", "l"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--trace")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--workloads", default="default:4,gpushare40:4,gpuspec20:4")
    ap.add_argument("--strategies", default="exclusive,fractional,mig,replanned,planned-p95,hindsight,"
                                            "replanned-node,dra-first-fit,dra-steered,priority,elastic,combined",
                    help="those of EXTRA run only where the collection has their option; planned (the static plan "
                         "for the pod counts) names nodes of the whole cluster, so it cannot run on the search's "
                         "node samples: planned-p95 plans each sample")
    ap.add_argument("--other-strategies", default="exclusive,fractional,elastic",
                    help="the strategies of the workloads other than default (keeps the bench near 15 min of CPU)")
    ap.add_argument("--sizes", default="", help="more load factors of the default workload, e.g. 1,16 ('': none)")
    ap.add_argument("--served", type=float, default=99.0)
    ap.add_argument("--scoring", default="kube-default")
    ap.add_argument("--out", default=os.path.join(whatif_sweep.TOP, ".build", "whatif", "capacity"))
    ap.add_argument("--img", help="also write the SVGs there (docs/img)")
    ap.add_argument("--cache", help="keep each strategy's result there and reuse it (runs in parallel fill it)")
    ap.add_argument("--cached-only", action="store_true", help="report only what --cache holds")
    args = ap.parse_args(argv)
    global CACHE, CACHED_ONLY
    CACHE = args.cache
    CACHED_ONLY = args.cached_only
    csv_dir = whatif_sweep.trace_dir(args.trace)
    seeds = list(range(42, 42 + args.seeds))
    strats = strategies(args.strategies.split(","))
    md = ["# How many GPUs does each strategy need? (gpu_whatif capacity_search)", "",
          "Target: served >= %g %% of the requested GPU-time; seeds %d..%d; scoring %s; window active; inflation 0; "
          "USD/h at a flat %.2f USD per GPU-hour (the trace's models have no price)." % (
              args.served, seeds[0], seeds[-1], args.scoring, FLAT_PRICE), ""]
    pics = {}
    t_all = time.time()
    default = None
    for item in [x for x in args.workloads.split(",") if x.strip()]:
        wl, factor = item.split(":")
        t0 = time.time()
        print("## %s, load factor %s" % (wl, factor))
        mine = strats if wl == "default" else strategies(args.other_strategies.split(","))
        out, meta = one_workload(csv_dir, wl, float(factor), seeds, mine, args.served, args.scoring)
        diffs = paired(out)
        head = "## %s, load factor %s: %d pods, searched up to %d GPUs (%.0f s)" % (
            wl, factor, meta["pods"], meta["gpus"], time.time() - t0)
        print(head)
        print(table(out, diffs))
        ide = meta["ideal"]
        notes = ["Ideal (the same pods, perfectly divisible into one pool, meet the target): %.1f GPUs (95 %% CI %s; "
                 "per seed %s); peak concurrent request %.1f GPUs." % (
                     ide["gpus"]["mean"], ide["gpus"]["ci95"], ", ".join(str(g) for g in ide["per_seed"]),
                     ide["peak"]["mean"])]
        st = steering(out)
        if st:
            notes.append("dra-steered vs dra-first-fit, paired: GPUs %s (%s), %s %% relative; utilisation %s %% "
                         "relative (%s)." % (stats.fmt(st["gpus"], "%+.1f"), st["gpus"]["verdict"],
                                             stats.fmt(st["gpus_rel_pct"], "%+.1f"),
                                             stats.fmt(st["utilisation_pct_rel_pct"], "%+.1f"),
                                             st["utilisation_pct_rel_pct"]["verdict"]))
        print("\n".join(notes))
        md += [head, "", table(out, diffs).rstrip("\n"), ""] + notes + [""]
        name = "whatif-capacity-%s.svg" % wl
        pics[name] = svg.bar_chart([v["label"].split(" (")[0] for v in out.values()],
                                   [{"name": "GPUs needed (mean of %d seeds)" % len(seeds),
                                     "values": [v["capacity"]["gpus"] for v in out.values()]}],
                                   "GPUs needed for %g %% served, %s x%s" % (args.served, wl, factor), "GPUs")
        md += ["![GPUs needed, %s](%s)" % (wl, name), ""]
        if wl == "default" and default is None:
            default = (out, diffs)
        sys.stdout.flush()
    sizes = {}
    for factor in [float(x) for x in args.sizes.split(",") if x.strip()]:
        t0 = time.time()
        print("## default, load factor %g (size buckets)" % factor)
        sizes[factor], dummy = one_workload(csv_dir, "default", factor, seeds,
                                            [s for s in strats if s[0] in ("exclusive", "fractional")], args.served,
                                            args.scoring)
        print("   %.0f s" % (time.time() - t0))
    if default:
        md += ["## The seed's claims", "", claims(default, sizes).rstrip("\n"), ""]
        print(claims(default, sizes))
    md += ["Total %.0f s." % (time.time() - t_all), ""]
    print("total %.0f s" % (time.time() - t_all))
    written = writer.write_report(os.path.join(args.out, "whatif-capacity.md"), "\n".join(md) + "\n", pics)
    print("report: %s" % written["path"])
    if args.img:
        for name, text in sorted(pics.items()):
            with open(os.path.join(args.img, name), "w") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
