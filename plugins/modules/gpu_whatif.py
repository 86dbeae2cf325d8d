#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_whatif
short_description: Replay a GPU cluster trace under sharing modes and scheduling policies (utilisation what-if)
version_added: "0.1.0"
description:
  - Replays the pods of a GPU cluster trace (the Alibaba 2023 C(openb) schema, or lists) on a cluster
    model with CPU, memory, per-GPU milli and MIG slices, once per O(sharing) mode and O(scoring)
    policy, and reports the GPU allocation against the arrived workload, the fragmentation and what
    each mode would save - before anything is rolled out.
  - The protocol and metrics are those of the FGD paper's artefact (Weng et al., USENIX ATC '23,
    hkust-adsl/kubernetes-scheduler-simulator); docs/whatif.md has the definitions and the validation
    against it and against the real kube-scheduler.
  - Pure computation on the controller; the only change it makes is writing O(report) (only when its
    content differs). Needs numpy on the controller.
  - Bad input (missing column, non-numeric cell, GPU count 0 with gpu_milli > 0, unknown model in
    O(mig_config)) fails with the file, line and column, before anything is written.
author:
  - gpuops.k8s maintainers (@gpuops)
requirements:
  - numpy (controller)
notes:
  - The report (O(report)) of a directory is its C(whatif.md), with SVG plots beside it (allocation vs arrived
    workload per policy, fragmentation, served request).
extends_documentation_fragment:
  - gpuops.k8s.report
options:
  nodes_csv:
    description:
      - An openb node list (C(sn, cpu_milli, memory_mib, gpu, model)), e.g. C(openb_node_list_gpu_node.csv).
      - Mutually exclusive with O(nodes).
    type: path
  nodes:
    description:
      - Nodes as a list - gpu_plan's node list (C(name), C(gpus) a list of C(model) and C(count), C(cpu_milli),
        C(memory_mib), C(pods); C(cpu) and C(memory) as Kubernetes quantities also work) or host vars of the
        C(gpuops.k8s.gpu_nodes) inventory (C(gpuops_k8s_node_name), C(gpu_product), C(gpu_count)).
      - A node without CPU or memory facts is not limited in them. One GPU model per node.
    type: list
    elements: dict
  pods_csv:
    description:
      - An openb pod list (C(name, cpu_milli, memory_mib, num_gpu, gpu_milli), optional C(gpu_spec),
        C(creation_time), C(qos)), e.g. C(openb_pod_list_default.csv). Mutually exclusive with O(pods).
    type: path
  pods:
    description: Pods as a list of mappings with the CSV's keys.
    type: list
    elements: dict
  scoring:
    description:
      - Node scoring policies to compare (each is one replay per seed).
      - V(random), V(best-fit), V(packing), V(dot-product), V(clustering), V(fgd) (fragmentation gradient
        descent) as the artefact defines them; V(kube-default) - kube-scheduler's default
        NodeResourcesFit LeastAllocated + BalancedAllocation scores and node sampling.
    type: list
    elements: str
    choices: [random, best-fit, packing, dot-product, clustering, fgd, kube-default]
    default: [kube-default]
  sharing:
    description:
      - V(exclusive) - one pod per whole GPU, gpu_milli rounded up (the default device plugin).
      - V(fractional) - the trace's GPU sharing (time-slicing/MPS with gpu_milli).
      - V(mig) - GPUs partitioned as O(mig_config); each sharing request takes the smallest fitting slice.
      - V(planned) - the per-node MIG layouts of O(plan) (a gpuops.k8s.gpu_plan result); with O(departures=true) and
        no O(plan), the planner's layout for the O(planned_percentile) of each request class's concurrent demand.
      - V(hindsight) - (needs O(departures=true)) the planner's static layout for the peak concurrent demand of each
        request class over the replayed window, known in advance - the strongest static baseline.
      - V(replanned) - MIG layouts re-planned by the collection's planner while the trace runs (needs
        O(departures=true)) - every O(replan_every_h) hours and when pods pend, on empty GPUs only, at most
        O(replan_budget) GPUs per re-plan, each unavailable for O(reconfigure_s). Starts from O(plan), else
        O(mig_config), else whole GPUs. O(replan_scope) and O(replan_drain) choose per-GPU or per-node changes.
      - V(dra-first-fit) - dynamic MIG through DRA (needs O(departures=true)) - no fixed layout; a sharing pod gets
        the smallest MIG profile covering gpu_milli (as V(mig) maps it; O(mig_shape) for models without MIG),
        an instance made when its claim is allocated and destroyed when it leaves, at the scheduler's first fit -
        the first device, in the order NVIDIA's DRA driver publishes the node's slices (GPUs by minor, devices by
        name), whose counters still fit. Scorings V(packing) and V(fgd) do not go with it.
      - V(dra-steered) - the same, placed fragmentation-aware as the collection's steering taints make first fit
        do - the most used GPU that fits, and on it the placement after which the largest profiles stay
        placeable (docs/whatif.md).
    type: list
    elements: str
    choices: [exclusive, fractional, mig, planned, replanned, hindsight, dra-first-fit, dra-steered]
    default: [exclusive]
  inflation:
    description:
      - Arrivals continue, sampling pods of the trace with replacement (seeded), until the requested GPU
        reaches this multiple of the GPU capacity; a trace that requests more is thinned at random.
        V(0) replays the pods as given.
    type: float
    default: 1.3
  order:
    description:
      - Arrival order. V(shuffle) (the artefact's published runs), V(creation) (creation time, then
        name), V(file) (as listed).
    type: str
    choices: [shuffle, creation, file]
    default: shuffle
  seed:
    description: Seed of the order, the inflation, the node sample and the tie-breaking.
    type: int
    default: 42
  seeds:
    description: Several seeds; RV(summary) then holds means, spreads and per-seed values; RV(curve) the mean curve.
    type: list
    elements: int
  sample_nodes:
    description: Replay on this many nodes drawn at random (seeded) from the node list; inflation adapts to their capacity.
    type: int
  pods_per_node:
    description: Pod slots of nodes that give none (the trace gives none; Kubernetes' default is 110). Default unlimited.
    type: int
  mig_config:
    description:
      - For O(sharing=mig), the MIG layout per GPU model - a mapping from model to layout (key C(*) for every
        other model) or the path of a YAML file holding one. A layout is a mapping from profile to count,
        V(all-balanced), C(all-<profile>), V(all-disabled) or a list of mig-parted v1 entries (devices,
        mig-enabled, mig-devices).
      - Models the catalog knows as MIG-capable use their own profiles; other models (all the trace's) are
        treated as shaped like O(mig_shape) - an explicit assumption.
    type: raw
  mig_shape:
    description: Catalog model whose MIG geometry non-MIG models get under V(mig) and V(planned).
    type: str
    default: a100_80gb
  plan:
    description:
      - For O(sharing=planned), the result of gpuops.k8s.gpu_plan (or its C(plan)) - C(mig_parted_config)
        and C(node_configs), a list of C(node) and C(mig_config). Nodes it does not name keep whole GPUs.
    type: dict
  prices:
    description: USD per GPU-hour by model (overrides the catalog's prices; trace models have none).
    type: dict
  tie_break:
    description:
      - Among equally scored nodes, V(rank) takes the node first in a seeded random order fixed for the replay
        (the artefact's scheduler), V(random) one at random each time (kube-scheduler). V(auto) - V(random)
        for V(kube-default), V(rank) otherwise.
    type: str
    choices: [auto, rank, random]
    default: auto
  percentage_of_nodes_to_score:
    description: For V(kube-default), kube-scheduler's percentageOfNodesToScore; default its adaptive value.
    type: int
  typical_threshold:
    description: Share of the pods (%) the typical pod shapes of the fragmentation measure cover.
    type: float
    default: 95
  departures:
    description:
      - Replay over the trace's time - pods arrive at C(creation_time) and leave at C(deletion_time) (a pod
        without one stays); a pod that does not fit waits in a FIFO queue, retried whenever resources free, and
        still leaves at its C(deletion_time); pods deleted while pending or pending at the trace's end are
        never placed. Every pod needs a C(creation_time) (the openb C(multigpu*) lists have none).
      - V(false) - the FGD protocol (pods arrive one by one and never leave).
      - RV(summary) then holds GPU-hours held and served, pending times and reconfigurations; RV(curve) is a timeline.
    type: bool
    default: false
  replan_every_h:
    description: For O(sharing=replanned), hours between periodic re-plans (> 0).
    type: float
    default: 6
  replan_min_interval_h:
    description:
      - For O(sharing=replanned), the debounce of the re-plans that pending pods start - at most one per this
        many hours (>= 0).
    type: float
    default: 0.5
  replan_budget:
    description:
      - For O(sharing=replanned), the GPUs whose MIG layout may change per re-plan - a number (>= 0) or a
        percentage of the cluster's GPUs such as V(5%) (in (0, 100], at least 1 GPU).
    type: raw
    default: 5%
  reconfigure_s:
    description: For O(sharing=replanned), seconds a reconfigured GPU is unavailable (>= 0). Only empty GPUs are reconfigured.
    type: float
    default: 120
  replan_scope:
    description:
      - For O(sharing=replanned), V(gpu) - one empty GPU changes while its node's other GPUs run pods (what DRA
        dynamic MIG allows); V(node) - the planner gets whole nodes and a node's changing GPUs are reconfigured
        together, as mig-parted applies a node's config, after they are drained (O(replan_drain)).
    type: str
    choices: [gpu, node]
    default: gpu
  replan_drain:
    description:
      - For O(replan_scope=node), how the GPUs that change are emptied - V(requeue) evicts their pods at once (back
        to the pending queue, keeping their deletion time); V(wait) cordons them and starts the change when their
        last pod has left.
    type: str
    choices: [requeue, wait]
    default: requeue
  planned_percentile:
    description:
      - For O(sharing=planned) with O(departures=true) and no O(plan), the time-weighted percentile (0, 100] of each
        request class's concurrent demand that the planner sizes the layout for.
    type: float
    default: 95
  priorities:
    description:
      - With O(departures=true), pod priorities from the trace's C(qos) - a mapping C(qos) to integer, or V(default)
        (C(LS) and C(Guaranteed) 1000, C(Burstable) 500, C(BE) 0). A pod without C(qos) gets 0; a C(qos) the
        mapping does not name fails, naming the values it has.
      - The pending queue is then retried highest priority first, and a pod that fits nowhere preempts pods of lower
        priority as kube-scheduler's DefaultPreemption does (the victims go back to the pending queue). RV(summary)
        gains C(evictions) and C(by_priority) (pods, served_pct, pods_never_placed, start_delay_p95_s,
        pods_preempted per priority).
      - Omitted - every pod has priority 0 and nothing is preempted.
    type: raw
  autoscaler:
    description:
      - With O(departures=true), elastic capacity with Cluster Autoscaler semantics - a pool of C(max_nodes) nodes
        (default the node sample's count; node groups are its node shapes) of which C(min_nodes) (default 0) are up at
        the start; a pending pod makes the autoscaler ask for a node of the group that fits it with the least waste,
        Ready after C(scale_up_delay_s) (default 300); a node empty for C(scale_down_after_s) (default 600) is
        removed. RV(summary) gains C(scale_ups), C(scale_downs), C(nodes_peak); C(gpu_hours_provisioned) follows
        the nodes up or booting.
    type: dict
  window:
    description:
      - With O(departures=true), the replayed time. V(active) (the default) - from the first arrival to the last
        deletion of the replayed pods; when at most 5 % of the pods were created before the trace's first deletion
        (a recording that began with them running - the openb lists' 33 pods from hour 0 to 2,768), they arrive at
        that first deletion. Every rate and mean (held GPUs, utilisation, per day) is over the window.
      - V(whole) - from the first creation time to the trace's end (3,584 hours on the openb lists).
    type: str
    choices: [active, whole]
  load_factor:
    description:
      - With O(departures=true), arrivals compressed by this factor towards the window's start, every pod's life
        kept, so that concurrent demand scales by about the factor (in (0, 1000]; 1 changes nothing).
    type: float
    default: 1
  cluster_gpus:
    description:
      - Replay on a sample of about this many GPUs, stratified by GPU model (the node list's mix) and nested across
        sizes for one seed (a larger sample holds every node of a smaller one), so that capacity grows with it.
        The workload (O(inflation)) stays that of the whole node list. With O(capacity_search), the largest size
        searched. Mutually exclusive with O(sample_nodes).
    type: int
  capacity_search:
    description:
      - With O(departures=true), for each O(sharing) x O(scoring) run and seed, the fewest GPUs of the nested
        samples (see O(cluster_gpus)) whose replay meets the target - a mapping with any of C(served_pct) (GPU-time
        served of the GPU-time requested, >=), C(start_delay_p95_s) (95th percentile of the wait of the pods
        placed, <=), C(never_placed_pct) (pods never placed, <=); an empty mapping means C(served_pct) 99.
      - Bisection over the sizes (to 5 % of the GPUs), starting from the previous seed's answer; a replay stops
        early once the target can no longer be met. A target not met with every node is reported as
        C(met=false), not as an error. C(runs[].capacity) and RV(capacity) hold the answer.
    type: dict
  baseline:
    description:
      - The run the paired differences (RV(paired)) are taken against - a O(sharing) value (one O(scoring)) or
        C(sharing/scoring). Default the first run.
    type: str
seealso:
  - module: gpuops.k8s.mig_partition
"""

EXAMPLES = r"""
- name: FGD against best-fit and random on the Alibaba 2023 trace (the paper's headline experiment)
  gpuops.k8s.gpu_whatif:
    nodes_csv: /data/alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv
    pods_csv: /data/alibaba-gpu-2023/csv/openb_pod_list_default.csv
    scoring: [random, best-fit, fgd]
    sharing: fractional
    seeds: [42, 43, 44]
    report: /tmp/whatif
  register: whatif

- name: What would time-slicing or MIG buy on our own nodes, with today's scheduler?
  gpuops.k8s.gpu_whatif:
    nodes: "{{ plan_nodes }}"
    pods: "{{ recent_pods }}"
    scoring: kube-default
    sharing: [exclusive, fractional, mig]
    mig_config:
      a100_80gb: all-balanced

- name: Pods that come and go, and MIG layouts re-planned every 6 hours, against the static ones
  gpuops.k8s.gpu_whatif:
    nodes_csv: /data/alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv
    pods_csv: /data/alibaba-gpu-2023/csv/openb_pod_list_default.csv
    departures: true
    sharing: [exclusive, fractional, planned, replanned]
    plan: "{{ trace_plan }}"
    replan_every_h: 6
    replan_budget: 5%
    reconfigure_s: 120
    report: /tmp/whatif-replanned

- name: How many GPUs does each strategy need to serve 99 % of the work, at 4 x the trace's arrival rate?
  gpuops.k8s.gpu_whatif:
    nodes_csv: /data/alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv
    pods_csv: /data/alibaba-gpu-2023/csv/openb_pod_list_default.csv
    departures: true
    inflation: 0
    load_factor: 4
    sharing: [exclusive, fractional, dra-first-fit, dra-steered]
    seeds: [42, 43, 44, 45, 46, 47, 48, 49, 50, 51]
    capacity_search: {served_pct: 99}
    baseline: exclusive
    prices: {G2: 1.2, T4: 0.35, P100: 0.9, V100M16: 1.5, V100M32: 1.8, A10: 0.8, G3: 1.5}
    report: /tmp/whatif-capacity
  register: capacity
"""

RETURN = r"""
curve:
  description:
    - Allocation against arrived workload of the first O(sharing) x O(scoring) run, per integer percent.
    - With O(departures=true), a timeline instead - hour (since the first arrival), held_gpus, allocated_gpus,
      pending_pods, running_pods, reconfiguring_gpus, reconfigured_gpus (so far); at most 600 points.
  returned: success
  type: list
  elements: dict
  sample: [{arrived_pct: 100, allocated_pct: 95.27, frag_pct: 4.73, frag_ratio_pct: 99.1, served_pct: 95.27}]
summary:
  description:
    - Of the first run - allocated_pct_at_100, served_pct_at_100, frag_pct_at_100, fragmented_gpu_milli,
      unscheduled_pods_at_100, unscheduled_pods (whole replay), gpu_hours_saved (per hour, vs whole GPUs for
      the same pods), cost_per_hour, cost_per_served_gpu_hour, cost_saved_per_hour (null without prices).
    - With O(departures=true) - gpu_hours_held (GPUs with a pod or being reconfigured, over time),
      gpu_hours_allocated, gpu_hours_requested, gpu_hours_served, served_pct, pods_placed, pods_never_placed,
      pods_deleted_pending, pods_waited, pending_median_s, pending_p95_s (over the pods placed),
      pending_waited_median_s, pending_waited_p95_s (over those that waited), held_gpus_mean, held_gpus_peak,
      gpu_hours_reconfiguring, reconfigured_gpus, reconfigured_gpus_per_day, replans, planner_calls,
      planner_seconds, trace_hours; gpu_hours_provisioned (the provisioned GPUs integrated over the window),
      utilisation_pct (requested / provisioned GPU-time), held_pct (held / provisioned GPU-time),
      node_hours_held (nodes with a pod, over time), served_pods_pct (pods placed, of the pods) and by_class
      (per class - whole, shared, multi-gpu, cpu, short (< 1 h), long, qos:<value> - pods, served_pct,
      served_pods_pct, start_delay_p95_s, pods_never_placed);
      with O(priorities) evictions, by_priority and by_class entries priority:<value>; with O(autoscaler)
      scale_ups, scale_downs, nodes_peak, pool_nodes; with O(replan_scope=node) drain_evictions and drain_wait_s;
      for V(planned) without O(plan) and V(hindsight) planned_for (percentile, demand per class).
    - With O(seeds) - means, plus spread (stdev, min, max per field), seeds and per_seed.
  returned: success
  type: dict
  sample: {allocated_pct_at_100: 95.27, unscheduled_pods: 2430, gpu_hours_saved: 1318.8}
departures:
  description: True when the replay ran with O(departures) (absent otherwise).
  returned: when O(departures=true)
  type: bool
  sample: true
runs:
  description:
    - Every run - scoring, sharing, curve, summary, replay_seconds (per seed).
    - With O(capacity_search), also capacity - gpus, nodes, met (every seed met the target), met_seeds,
      usd_per_hour (null without prices), utilisation_pct, held_pct, node_hours_held, served_pct, served_pods_pct,
      start_delay_p95_s, never_placed_pct, gpu_hours_provisioned, replays (means over the seeds, with spread and
      per_seed); summary and by_class are then those at the size found; curve is empty.
  returned: success
  type: list
  elements: dict
capacity:
  description: With O(capacity_search), each run's capacity (see RV(runs)) by run name (sharing, or sharing/scoring).
  returned: when O(capacity_search)
  type: dict
  sample: {exclusive: {gpus: 244.5, nodes: 44, met: true, usd_per_hour: 244.5, utilisation_pct: 14.89,
                       held_pct: 17.25, node_hours_held: 22541.5}}
target:
  description: The service target of O(capacity_search).
  returned: when O(capacity_search)
  type: dict
  sample: {served_pct: 99.0}
paired:
  description:
    - With O(departures=true), two runs or more and two seeds or more - the paired differences over the seeds
      against C(baseline) (O(baseline)), per run and field - mean, sd, ci95 (95 % interval, Student's t), n and
      verdict (none when the interval holds 0, else higher or lower). C(differences) - served_pct,
      served_pods_pct, utilisation_pct, gpu_hours_held (also relative, gpu_hours_held_rel_pct), pending_p95_s;
      with O(capacity_search) C(capacity) - gpus, usd_per_hour, utilisation_pct, held_pct, served_pct,
      served_pods_pct (gpus and utilisation_pct also relative, in %).
  returned: when O(departures=true) with several runs and seeds
  type: dict
  sample: {baseline: exclusive, capacity: {fractional: {gpus_rel_pct: {mean: -9.4, ci95: [-12.0, -6.8], verdict: lower}}}}
cluster:
  description: Nodes, GPU nodes, GPUs and GPUs by model replayed on (sampled, when O(sample_nodes)).
  returned: success
  type: dict
  sample: {nodes: 1213, gpu_nodes: 1213, gpus: 6212, gpus_by_model: {G2: 4392, T4: 842}}
workload:
  description: Pods read, arrivals replayed, pods added or removed by the inflation, order, seeds.
  returned: success
  type: dict
  sample: {pods: 8152, arrivals: 10771, added_by_inflation: 2619, removed_by_inflation: 0}
  # with departures also trace_end_hours, window, load_factor
prices:
  description: USD per GPU-hour used for each GPU model (O(prices), else the catalog); null for a model without a price.
  returned: success
  type: dict
  sample: {a100_80gb: 3.5, T4: null}
timing:
  description: Seconds spent reading the inputs, per run replaying, and in total.
  returned: success
  type: dict
  sample: {load_seconds: 0.2, replay_seconds: {fractional/fgd: 1.1}, total_seconds: 1.5}
report:
  description: The report written (path, files, changed_files); null without O(report).
  returned: success
  type: dict
  sample: {path: /tmp/whatif/whatif.md, files: [/tmp/whatif/whatif.md], changed_files: []}
"""


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.k8s.plugins.module_utils.common import deps
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine, report, runner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes_csv=dict(type="path"),
            nodes=dict(type="list", elements="dict"),
            pods_csv=dict(type="path"),
            pods=dict(type="list", elements="dict"),
            scoring=dict(type="list", elements="str", default=["kube-default"], choices=list(whatif_engine.SCORINGS)),
            sharing=dict(type="list", elements="str", default=["exclusive"], choices=list(runner.SHARINGS)),
            inflation=dict(type="float", default=1.3),
            order=dict(type="str", default="shuffle", choices=["shuffle", "creation", "file"]),
            seed=dict(type="int", default=42),
            seeds=dict(type="list", elements="int"),
            sample_nodes=dict(type="int"),
            pods_per_node=dict(type="int"),
            mig_config=dict(type="raw"),
            mig_shape=dict(type="str", default="a100_80gb"),
            plan=dict(type="dict"),
            prices=dict(type="dict"),
            tie_break=dict(type="str", default="auto", choices=["auto", "rank", "random"]),
            percentage_of_nodes_to_score=dict(type="int"),
            typical_threshold=dict(type="float", default=95),
            departures=dict(type="bool", default=False),
            replan_every_h=dict(type="float", default=6.0),
            replan_min_interval_h=dict(type="float", default=0.5),
            replan_budget=dict(type="raw", default="5%"),
            reconfigure_s=dict(type="float", default=120.0),
            replan_scope=dict(type="str", default="gpu", choices=["gpu", "node"]),
            replan_drain=dict(type="str", default="requeue", choices=["requeue", "wait"]),
            planned_percentile=dict(type="float", default=95.0),
            priorities=dict(type="raw"),
            autoscaler=dict(type="dict"),
            window=dict(type="str", choices=["active", "whole"]),
            load_factor=dict(type="float", default=1.0),
            cluster_gpus=dict(type="int"),
            capacity_search=dict(type="dict"),
            baseline=dict(type="str"),
            report=dict(type="path"),
            report_title=dict(type="str"),
        ),
        mutually_exclusive=[("nodes_csv", "nodes"), ("pods_csv", "pods")],
        required_one_of=[("nodes_csv", "nodes"), ("pods_csv", "pods")],
        supports_check_mode=True,
    )
    deps.check_requirements(module, "numpy")
    p = dict(module.params)
    try:
        result = runner.run(p)
        written = None
        diff = None
        if p["report"]:
            markdown, pictures = report.render(result, p["report_title"])
            written, diff = report.writer.write_report_diff(p["report"], markdown, pictures, check_mode=module.check_mode,
                                                            diff=module._diff, default_name="whatif.md")
    except GpuOpsError as e:
        module.fail_json(msg=e.msg, **e.details)
    result.pop("params", None)
    out = dict(result, changed=bool(written and written["changed"]), report=written)
    if diff is not None and written and written["changed"]:
        out["diff"] = diff
    module.exit_json(**out)


if __name__ == "__main__":
    main()
