# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The declarative MIG partitioner behind gpuops.k8s.mig_partition.

``run_mig_partition(nvml, params, check_mode=False, diff=False)``:

1. parse the mig-parted config (``config_file`` + ``config``) or the inline ``layout``;
2. read every GPU (gpu_state.read_host) and walk the config over them (mig_config.resolve);
3. plan every matched GPU with its live NVML profiles (catalog fallback) and validate ALL GPUs
   before anything changes (unknown profile, too many instances, slices, placements, busy
   instances without ``force``);
4. unless in check mode: per GPU, change MIG mode where needed (Ampere: the change stays pending
   until a GPU reset -> ``reset_required``, the instances are created on a later run once the mode
   is active; Hopper and newer: at once), destroy the instances the plan releases, create the
   missing ones at explicit placements;
5. report ``gpus`` (as gpu_info), ``actions``, ``reset_required``, ``resources`` (what the device
   plugin advertises with the mixed strategy), ``diagram`` and, with ``diff``, before/after per
   GPU uuid.

The GPUs' changes are independent: a failing NVML call stops the rest of its own GPU only, the run goes on
with the other GPUs (unless the error is host-wide: no driver, library or permission, see HOST_WIDE) and
fails at the end. The error carries the GPUs as they are now, which actions completed, failed (one per
failed GPU) and were not attempted, and per GPU done / failed / not attempted, so a re-run redoes the
failed GPUs only and converges from there.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.common import diff as diff_helper
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.report import diagram as slice_diagram
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.backend import lock_unless_check
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import errors as nvml_errors
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import NvmlError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import retry as nvml_retry

MUTATING = ("set_mig_mode", "destroy", "create")


def _label(gpu):
    return "GPU %s (%s)" % (gpu["index"], gpu.get("model") or gpu.get("name") or "unknown model")


def _model(gpu):
    return gpu_catalog.lookup_model(gpu.get("model"), gpu.get("name")) or gpu_catalog.lookup_model(gpu.get("name"))


def _profiles(nvml, gpu):
    """Live NVML profiles (gpu_state falls back to the catalog where NVML cannot list them)."""
    profiles = list(gpu_state.live_profiles(nvml, gpu["index"]) or [])
    if not profiles:
        model = _model(gpu)
        profiles = list(model.profiles) if model else []
    return profiles


def _geometry(gpu, profiles):
    model = _model(gpu)
    if model is not None and model.memory_slices:
        return model.memory_slices, model.compute_slices
    return mig_plan.layout_geometry(profiles)


def _placement(start, size):
    return {"start": start, "size": size}


class GpuWork(object):
    """The plan of one GPU and what predicting/applying it needs."""

    def __init__(self, gpu: Dict[str, Any], desired: Any, profiles: List[Any], plan: Any, mode_action: Optional[str],
                 deferred: bool) -> None:
        self.gpu = gpu
        self.desired = desired
        self.profiles = profiles
        self.pmap = mig_plan.profile_map(profiles)
        self.plan = plan
        self.mode_action = mode_action  # None, "enable_mig" or "disable_mig"
        self.deferred = deferred  # creates wait for a GPU reset (Ampere mode change)
        self._memo = {}

    def _once(self, kind, build):
        # the same action dicts are reported and executed (execution fills in gpu_instance_id)
        if kind not in self._memo:
            self._memo[kind] = build()
        return self._memo[kind]

    def _base(self, action, **kw):
        out = {"gpu": self.gpu["index"], "uuid": self.gpu.get("uuid"), "action": action}
        out.update(kw)
        return out

    def _devices(self, profile, cis):
        p = self.pmap.get(profile)
        return mig_plan.mig_device_names(profile, cis, p.compute_slices if p else mig_instances.gi_slices(profile))

    def keep_actions(self) -> List[Dict[str, Any]]:
        return self._once("keep", self._keep_actions)

    def destroy_actions(self) -> List[Dict[str, Any]]:
        return self._once("destroy", self._destroy_actions)

    def create_actions(self) -> List[Dict[str, Any]]:
        return self._once("create", self._create_actions)

    def mode_actions(self) -> List[Dict[str, Any]]:
        return self._once("mode", self._mode_actions)

    def _keep_actions(self):
        return [self._base("keep", profile=k.profile, placement=_placement(k.start, k.size),
                           gpu_instance_id=k.gpu_instance_id, mig_devices=self._devices(k.profile, k.compute_instances),
                           busy=k.busy)
                for k in self.plan.keep]

    def _destroy_actions(self):
        """Busy (forced) instances first: if NVML still refuses them, nothing else on the GPU changed."""
        forced = set(id(f) for f in self.plan.forced)
        ordered = [d for d in self.plan.destroy if id(d) in forced] + \
            [d for d in self.plan.destroy if id(d) not in forced]
        return [self._base("destroy", profile=d.profile, placement=_placement(d.start, d.size),
                           gpu_instance_id=d.gpu_instance_id, mig_devices=self._devices(d.profile, d.compute_instances),
                           busy=d.busy, forced=id(d) in forced)
                for d in ordered]

    def _create_actions(self):
        out = []
        for t, start in self.plan.create:
            p = self.pmap[t.profile]
            a = self._base("create", profile=t.profile, placement=_placement(start, p.memory_slices),
                           compute_instances=list(t.compute_instances), mig_devices=self._devices(t.profile, t.compute_instances))
            if self.deferred:
                a["after_reset"] = True
            out.append(a)
        return out

    def _mode_actions(self):
        if not self.mode_action:
            return []
        return [self._base("set_mig_mode", enabled=self.mode_action == "enable_mig")]

    def ordered_actions(self) -> List[Dict[str, Any]]:
        """keep, then the order of execution: disable = destroys then mode; enable = mode, destroys, creates."""
        if self.mode_action == "disable_mig":
            return self.keep_actions() + self.destroy_actions() + self.mode_actions()
        return self.keep_actions() + self.mode_actions() + self.destroy_actions() + self.create_actions()

    def predict(self) -> Dict[str, Any]:
        """The gpu facts after the plan (for check mode and deferred layouts)."""
        gpu = copy.deepcopy(self.gpu)
        needs_reset = _needs_reset(self.gpu)
        if self.mode_action:
            want = self.mode_action == "enable_mig"
            gpu["mig_mode_pending"] = want
            if not needs_reset or gpu.get("mig_mode_current") == want:
                gpu["mig_mode_current"] = want
        if not gpu.get("mig_mode_current"):
            gpu["instances"] = [] if not self.gpu.get("mig_mode_current") else gpu.get("instances", [])
            if self.mode_action == "disable_mig":
                gpu["instances"] = []
            return gpu
        kept_ids = set(k.gpu_instance_id for k in self.plan.keep)
        rows = [r for r in gpu.get("instances") or [] if r.get("gpu_instance_id") in kept_ids]
        for t, start in self.plan.create:
            p = self.pmap[t.profile]
            for n, name in enumerate(self._devices(t.profile, t.compute_instances)):
                rows.append({"profile": name, "gpu_instance_profile": t.profile,
                             "placement": _placement(start, p.memory_slices),
                             "gpu_instance_id": None, "compute_instance_id": None,
                             "compute_slices": t.compute_instances[n], "uuid": None,
                             "memory_mib": p.memory_mib, "planned": True, "busy": False})
        gpu["instances"] = rows
        return gpu


def _needs_reset(gpu):
    model = _model(gpu)
    return bool(model and gpu_catalog.mig_mode_needs_reset(model))


def plan_host(nvml: Any, gpus: List[Dict[str, Any]], entries: List[Any], force: bool = False,
              skipped: Optional[List[Any]] = None) -> List[GpuWork]:
    """Validate and plan every GPU the config matches. Raises GpuOpsError listing every problem."""
    desired = mig_config.resolve(entries, gpus, skipped)
    works = []
    errors = []
    for gpu in gpus:
        d = desired.get(gpu["index"])
        if d is None:
            continue
        label = _label(gpu)
        try:
            profiles = _profiles(nvml, gpu) if gpu.get("mig_capable") else []
            memory_slices, compute_slices = _geometry(gpu, profiles)
            current_mode = bool(gpu.get("mig_mode_current"))
            pending_mode = gpu.get("mig_mode_pending")
            if pending_mode is None:
                pending_mode = current_mode
            current = mig_instances.instances_from_gpu(gpu) if current_mode else []
            if d.mig_enabled:
                targets = mig_plan.targets_from_mig_devices(d.mig_devices, profiles, label)
                mode_action = None if pending_mode else "enable_mig"
                deferred = not current_mode and _needs_reset(gpu)
            else:
                targets = []
                mode_action = "disable_mig" if (current_mode or pending_mode) else None
                deferred = False
            plan = mig_plan.plan_gpu(profiles, current, targets, force=force, memory_slices=memory_slices,
                                     compute_slices=compute_slices, label=label)
            pids = sorted(set(p.get("pid") for p in gpu.get("processes") or []))
            if mode_action and pids:
                # NVML refuses a MIG mode change while processes use the GPU (IN_USE): say so up front
                raise GpuOpsError("%s: MIG mode cannot be %s while processes run on the GPU (PIDs %s); stop them "
                                  "first" % (label, "enabled" if mode_action == "enable_mig" else "disabled",
                                             ", ".join(str(p) for p in pids)), pids=pids)
            works.append(GpuWork(gpu, d, profiles, plan, mode_action, deferred))
        except GpuOpsError as e:
            err = {"gpu": gpu["index"], "uuid": gpu.get("uuid"), "msg": e.msg}
            err.update(e.details)
            errors.append(err)
    if errors:
        details = {"errors": errors, "changed": False}
        # details every failing GPU shares (valid_profiles of one model, ...) also at the top
        for k, v in errors[0].items():
            if k == "msg" or (len(errors) > 1 and k in ("gpu", "uuid")):
                continue
            if all(e.get(k) == v for e in errors):
                details[k] = v
        raise GpuOpsError("invalid MIG layout, nothing was changed: %s" % "; ".join(e["msg"] for e in errors),
                          **details)
    return works


def resources(gpus: List[Dict[str, Any]], strategy: str = "mixed") -> Dict[str, Any]:
    """Extended resources the NVIDIA device plugin advertises for these GPUs (mixed strategy).

    Split compute instances (``1c.3g.40gb``) are left out, as the plugin and gpu_node_labels do
    (gpu_catalog.is_advertised_mig_device).
    """
    out = Counter()
    for gpu in gpus:
        if gpu.get("lost"):
            continue
        if gpu.get("mig_capable") and gpu.get("mig_mode_current"):
            for row in gpu.get("instances") or []:
                if not mig_instances.row_is_mig_device(row):
                    continue  # a GPU instance without compute instance is no device
                if not gpu_catalog.is_advertised_mig_device(row["profile"]):
                    continue
                out[gpu_catalog.resource_name(row["profile"], strategy)] += 1
        else:
            out["nvidia.com/gpu"] += 1
    return dict(sorted(out.items()))


def _summary(gpu):
    rows = []
    for inst in mig_instances.instances_from_gpu(gpu):
        cis = ""
        if inst.compute_instances and inst.compute_instances != (mig_instances.gi_slices(inst.profile),):
            cis = " [%s]" % ",".join("%dc" % c for c in inst.compute_instances)
        rows.append("%s @%s:%s%s" % (inst.profile, inst.start, inst.size, cis))
    return {"index": gpu["index"], "model": gpu.get("model"), "mig_mode_current": bool(gpu.get("mig_mode_current")),
            "mig_mode_pending": bool(gpu.get("mig_mode_pending")), "instances": sorted(rows)}


def _diff(before, after, indexes):
    tracker = diff_helper.DiffTracker()
    for g in before:
        if g["index"] in indexes:
            tracker.add(g.get("uuid") or str(g["index"]), before=_summary(g))
    for g in after:
        if g["index"] in indexes:
            tracker.add(g.get("uuid") or str(g["index"]), after=_summary(g))
    return tracker.as_dict()


def _reread(nvml):
    try:
        return gpu_state.read_host(nvml)["gpus"], None
    except GpuOpsError as e:
        return None, str(e)


def _err_text(e):
    if isinstance(e, NvmlError):
        return "%s (NVML error %s)" % (e, getattr(e, "value", "?"))
    return str(e)


# NVML errors that say the host, not one GPU, cannot be changed (no driver, no library, no permission): the
# run stops there and the GPUs after the failing one are not attempted. Any other error fails its GPU only.
HOST_WIDE = (nvml_errors.UNINITIALIZED, nvml_errors.NO_PERMISSION, nvml_errors.DRIVER_NOT_LOADED,
             nvml_errors.LIBRARY_NOT_FOUND, nvml_errors.FUNCTION_NOT_FOUND, nvml_errors.LIB_RM_VERSION_MISMATCH)


def _host_wide(error):
    return isinstance(error, NvmlError) and error.value in HOST_WIDE


def _apply(nvml, works, completed, policy, retries):
    """Execute every GPU's actions in order; ``completed`` collects the done ones, ``retries`` the transient
    errors tried again (nvml.retry ``policy``). The GPUs' changes are independent: a GPU whose action fails
    (``_Halt``) stops there and the next GPU goes on, unless the error is host-wide (HOST_WIDE), which stops
    the run. Returns (the GPU indexes whose mode change waits for a reset, the ``_Halt`` of every failed GPU
    in order, the indexes of the GPUs not attempted)."""
    # the changes are loaded here only: check mode never changes a GPU
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import mig_changes  # pylint: disable=import-outside-toplevel
    run = _Runner(nvml, completed, policy, retries)
    waiting = set()
    halts = []
    for n, w in enumerate(works):
        try:
            _apply_gpu(run, w, mig_changes, waiting)
        except _Halt as h:
            halts.append(h)
            if _host_wide(h.error):
                return waiting, halts, [x.gpu["index"] for x in works[n + 1:]]
            continue  # the other GPUs' changes do not depend on this one
    return waiting, halts, []


def _apply_gpu(run, w, mig_changes, waiting):
    """One GPU's actions in order; the first that fails raises ``_Halt`` and the rest of the GPU is not attempted."""
    idx = w.gpu["index"]
    if w.mode_action == "disable_mig":
        for a in w.destroy_actions():
            run(a, mig_changes.destroy_instance, (idx, a["gpu_instance_id"]),
                mig_changes.settle_destroy, (idx, a["gpu_instance_id"], a["placement"]))
        a = w.mode_actions()[0]
        res = run(a, mig_changes.set_mig_mode, (idx, False), mig_changes.settle_mig_mode, (idx, False))
        if res and res.get("current"):
            waiting.add(idx)
        return
    active = bool(w.gpu.get("mig_mode_current"))
    if w.mode_action == "enable_mig":
        a = w.mode_actions()[0]
        res = run(a, mig_changes.set_mig_mode, (idx, True), mig_changes.settle_mig_mode, (idx, True))
        active = bool(res and res.get("current"))
    if not active:
        waiting.add(idx)
        return
    for a in w.destroy_actions():
        run(a, mig_changes.destroy_instance, (idx, a["gpu_instance_id"]),
            mig_changes.settle_destroy, (idx, a["gpu_instance_id"], a["placement"]))
    for a in w.create_actions():
        p = w.pmap[a["profile"]]
        args = (idx, p, a["placement"]["start"], list(a["compute_instances"]))
        made = run(a, mig_changes.create_instance, args, mig_changes.settle_create, args)
        if made:
            ids = [m.get("gpu_instance_id") for m in made if isinstance(m, dict)]
            if ids:
                a["gpu_instance_id"] = ids[0]


class _Runner(object):
    """Runs one planned action with retries of transient NVML errors; a failure halts its GPU (``_Halt``)."""

    def __init__(self, nvml, completed, policy, retries):
        self.nvml = nvml
        self.completed = completed
        self.policy = policy
        self.retries = retries

    def __call__(self, action, fn, args, settle, settle_args):
        def on_retry(err, attempt, delay):
            entry = dict((k, action[k]) for k in ("gpu", "action", "profile", "gpu_instance_id") if k in action)
            entry.update(error=err.name, nvml_call=err.call, attempt=attempt, backoff_s=delay)
            self.retries.append(entry)
        try:
            out = nvml_retry.call(self.policy, lambda: fn(self.nvml, *args),
                                  lambda: settle(self.nvml, *settle_args), on_retry)
        except GpuOpsError as e:
            # NVML calls that changed the GPU before the failure (a CI destroyed before its GI, a GI
            # created before its CI) are completed actions too: the run did change the host
            for step in e.details.pop("nvml_changes", None) or []:
                done = dict((k, action[k]) for k in ("gpu", "uuid", "profile", "placement") if k in action)
                done.update(step)
                done["part_of"] = action["action"]
                self.completed.append(done)
            raise _Halt(action, e)
        self.completed.append(action)
        return out


class _Halt(Exception):
    def __init__(self, action, error):
        super(_Halt, self).__init__(str(error))
        self.action = action
        self.error = error


def _failed_action(h):
    failed = dict(h.action)
    failed["error"] = _err_text(h.error)
    if isinstance(h.error, NvmlError):
        failed["nvml_return"] = getattr(h.error, "value", None)
    if getattr(h.error, "details", None):
        failed["error_details"] = dict(h.error.details)  # e.g. rolled_back of a half-made instance
    return failed


def _what(action):
    return "%s of %s on GPU %s" % (action["action"], action.get("profile") or "MIG mode", action["gpu"])


def _failure(nvml, works, changes, planned, completed, halts, skipped_gpus, retries, waiting):
    """The GpuOpsError of a run in which one or more GPUs failed: the GPUs as they are now, every action done,
    each failed GPU's failed action, what was not attempted and, per GPU, done / failed / not attempted."""
    now, read_error = _reread(nvml)
    failed_actions = [_failed_action(h) for h in halts]
    failed_gpus = [h.action["gpu"] for h in halts]
    stopped = set(failed_gpus) | set(skipped_gpus)
    done_ids = set(id(a) for a in completed)
    failed_ids = set(id(h.action) for h in halts)
    not_attempted = [dict(a) for a in changes
                     if a["gpu"] in stopped and id(a) not in done_ids and id(a) not in failed_ids]
    completed = [dict(a) for a in completed]
    gpu_results = []
    for w in works:
        idx = w.gpu["index"]
        entry = {"gpu": idx, "uuid": w.gpu.get("uuid"),
                 "completed": len([a for a in completed if a["gpu"] == idx]),
                 "not_attempted": len([a for a in not_attempted if a["gpu"] == idx])}
        if idx in failed_gpus:
            fa = failed_actions[failed_gpus.index(idx)]
            entry.update(status="failed", error=fa["error"], failed_action=fa["action"])
        elif idx in skipped_gpus:
            entry["status"] = "not_attempted"
        elif any(a["gpu"] == idx for a in changes):
            entry["status"] = "done"
        else:
            entry["status"] = "unchanged"
        gpu_results.append(entry)
    done = [r["gpu"] for r in gpu_results if r["status"] == "done"]
    details = {"changed": bool(completed), "completed": completed, "failed_action": failed_actions[0],
               "failed_actions": failed_actions, "failed_gpus": failed_gpus, "not_attempted_gpus": list(skipped_gpus),
               "gpu_results": gpu_results, "not_attempted": not_attempted, "actions": planned,
               "nvml_retries": retries}
    if now is not None:
        # a mode change made on a GPU (done or failed later) that waits for a reset
        worked = set(w.gpu["index"] for w in works)
        mode_waits = set(g["index"] for g in now if bool(g.get("mig_mode_current")) != bool(g.get("mig_mode_pending")))
        waiting = set(waiting) | (mode_waits & worked)
        details["gpus"] = now
        details["resources"] = resources(now)
        details["diagram"] = slice_diagram.render(now)
    else:
        details["read_error"] = read_error
    details["reset_required"] = bool(waiting)
    details["reset_required_gpus"] = sorted(waiting)
    where = "; at ".join("%s: %s" % (_what(h.action), fa["error"]) for h, fa in zip(halts, failed_actions))
    others = "GPU(s) %s done" % ", ".join(str(i) for i in done) if done else "no other GPU changed"
    if skipped_gpus:
        others += ", GPU(s) %s not attempted (host-wide error)" % ", ".join(str(i) for i in skipped_gpus)
    return GpuOpsError(
        "MIG partitioning stopped at %s; %d action(s) completed, %d not attempted; failed GPU(s): %s; %s; "
        "the GPUs are reported as they are now, run again to converge"
        % (where, len(completed), len(not_attempted), ", ".join(str(i) for i in failed_gpus), others),
        **details)


def run_mig_partition(nvml: Any, params: Dict[str, Any], check_mode: bool = False,
                      diff: bool = False) -> Dict[str, Any]:
    """Plan and (unless ``check_mode``) apply; outside check mode the whole read-plan-apply runs under
    the host lock (nvml.host_lock), so two runs on one host never interleave their changes."""
    what = "gpuops.k8s.mig_partition %s" % (params.get("config") or ("config file %s" % params["config_file"]
                                                                     if params.get("config_file") else "inline layout"))
    with lock_unless_check(nvml, what, check_mode):
        return _run_mig_partition(nvml, params, bool(check_mode), diff)


def _run_mig_partition(nvml, params, check_mode, diff):
    entries = mig_config.entries_from_params(params)
    force = bool(params.get("force"))
    before = gpu_state.read_host(nvml)["gpus"]
    warnings = []
    missing = params.get("missing_gpus") or ("fail" if params.get("layout") is not None else "warn")
    if missing not in ("fail", "warn"):
        raise GpuOpsError("missing_gpus must be fail or warn, got %r" % (missing,))
    absent = mig_config.check_absent(entries, before, strict=missing == "fail", warnings=warnings)
    policy = nvml_retry.policy_from_params(params, nvml)
    retries = []
    skipped = []
    works = plan_host(nvml, before, entries, force=force, skipped=skipped)
    planned = []
    for w in works:
        planned.extend(w.ordered_actions())
    # creates that wait for a GPU reset (Ampere mode change pending) are no change of this run
    changes = [a for a in planned if a["action"] in MUTATING and not a.get("after_reset")]
    matched = set(w.gpu["index"] for w in works)
    predicted = dict((w.gpu["index"], w.predict()) for w in works)
    changed = bool(changes)

    if check_mode or not changed:
        after = [predicted.get(g["index"], g) for g in before]
        waiting = set(i for i, g in predicted.items()
                      if bool(g.get("mig_mode_current")) != bool(g.get("mig_mode_pending", g.get("mig_mode_current"))))
    else:
        completed = []
        waiting, halts, skipped_gpus = _apply(nvml, works, completed, policy, retries)
        if halts:
            raise _failure(nvml, works, changes, planned, completed, halts, skipped_gpus, retries, waiting)
        after = gpu_state.read_host(nvml)["gpus"]
        for g in after:
            if g["index"] in matched and bool(g.get("mig_mode_current")) != bool(g.get("mig_mode_pending")):
                waiting.add(g["index"])
        # layouts waiting for a reset: show the deferred creates as planned, the mode as pending
        for a in planned:
            if a["action"] == "create" and a["gpu"] not in waiting:
                a.pop("after_reset", None)
    for a in planned:
        if a["action"] == "create" and a["gpu"] in waiting:
            a["after_reset"] = True

    result = {
        "changed": changed,
        "gpus": after,
        "actions": planned,
        "reset_required": bool(waiting),
        "reset_required_gpus": sorted(waiting),
        "skipped_gpus": skipped,
        "absent_gpus": absent,
        "warnings": warnings,
        "nvml_retries": retries,
        "resources": resources(after),
        "diagram": slice_diagram.render(after),
    }
    if diff:
        result["diff"] = _diff(before, after, matched)
    return result
