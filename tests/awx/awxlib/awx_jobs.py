# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch the job templates of awx/job_templates.yml the way AWX does, with ansible-runner and no AWX server.

What AWX does for a job (awx/main/tasks/jobs.py, RunJob) and what is done here:

* **inventory**: AWX imports an SCM inventory source with ``ansible-inventory --list --export`` (group vars stay
  on their groups) and, for each job, writes it back as an executable script ``inventory/hosts`` printing JSON
  (hosts ordered by name, ``remote_tower_enabled`` / ``remote_tower_id`` host vars). Same here, from
  inventories/sim/hosts.yml, with the inventory-level variables an AWX admin sets on the inventory.
* **slicing**: a template with ``job_slice_count`` N > 1 becomes a workflow of N jobs run in parallel; job k
  gets the hosts ``sorted(hosts)[k-1::N]`` (Inventory.get_sliced_hosts) and the effective N is
  ``min(N, number of hosts)``. Slices share nothing.
* **extra vars** (``env/extravars``): the survey answers over the survey's defaults, then AWX's meta vars
  (``awx_job_id``, ``awx_job_template_name``, and ``awx_workflow_job_id`` / ``awx_workflow_job_name`` for the
  jobs of a workflow - a sliced job is a workflow named after its template).
* **command line** (``env/cmdline``): ``--check`` for job type check, ``-u root`` (AWX's default user),
  ``--diff`` when the template has diff mode, ``-l`` when a limit is given.
* **project**: AWX checks the project out into the private data dir; here the tracked parts of this checkout that
  a job reads (playbooks/, inventories/) are copied there. Collections come only from the execution
  environment (tests/awx/awxlib/environments.py), never from this checkout.

Runner writes ``artifacts/<ident>/status``, ``rc`` and ``job_events/*.json``; :class:`JobResult` reads them as
AWX's job page shows them: status, changed tasks per host, failed and unreachable hosts, the recap.
"""
import glob
import json
import os
import shlex
import shutil
import subprocess
import time

import yaml

from . import environments

TOP = environments.TOP
AWX_DIR = os.path.join(TOP, "awx")


def job_templates():
    with open(os.path.join(AWX_DIR, "job_templates.yml")) as f:
        return yaml.safe_load(f)["gpuops_awx_job_templates"]


def survey(template):
    with open(os.path.join(AWX_DIR, "surveys", template["survey"] + ".yml")) as f:
        return yaml.safe_load(f)


def survey_extra_vars(template, answers=None):
    """Extra vars AWX sends for a survey launched with ``answers`` (variable -> value as typed in the form):
    every question's default unless answered; integer/float answers become numbers, the rest stays text (a
    multiplechoice "true" is the string "true"). A required question without default or answer refuses the launch,
    as AWX does."""
    answers = dict(answers or {})
    out = {}
    for q in survey(template)["spec"]:
        var = q["variable"]
        if var in answers:
            value = answers.pop(var)
        elif "default" in q and q["default"] not in (None, ""):
            value = q["default"]
        elif q.get("required"):
            raise ValueError("%s: survey question %s (%s) is required and has no default"
                             % (template["name"], q["question_name"], var))
        else:
            continue
        if q["type"] == "integer":
            value = int(value)
        elif q["type"] == "float":
            value = float(value)
        elif q["type"] in ("text", "textarea", "password", "multiplechoice"):
            value = str(value)
            if q["type"] == "multiplechoice" and value not in [str(c) for c in q["choices"]]:
                raise ValueError("%s: %r is not a choice of %s" % (template["name"], value, var))
        out[var] = value
    if answers:
        raise ValueError("%s: no survey question for %s" % (template["name"], ", ".join(sorted(answers))))
    return out


def export_inventory(env, source, playbook_dir=None):
    """What AWX stores when it imports ``source``: ``ansible-inventory --list --export`` run in the EE."""
    argv = [os.path.join(env.bin, "ansible-inventory"), "-i", source, "--list", "--export",
            "--playbook-dir", playbook_dir or os.path.dirname(source)]
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                         env=env.env(ANSIBLE_HOME=os.path.join(environments.CACHE, "ansible-home")), check=True)
    return json.loads(out.stdout)


def inventory_hosts(data):
    return sorted((data.get("_meta") or {}).get("hostvars", {}))


def sliced_hosts(hosts, slice_number, slice_count):
    """AWX's Inventory.get_sliced_hosts on hosts ordered by name."""
    hosts = sorted(hosts)
    if slice_count > 1 and slice_number > 0:
        return hosts[slice_number - 1::slice_count]
    return hosts


def effective_slice_count(template_count, hosts):
    """JobTemplate.get_effective_slice_ct: never more slices than hosts."""
    return max(1, min(int(template_count), len(hosts)))


def awx_inventory(data, inventory_vars=None, slice_number=1, slice_count=1):
    """The JSON AWX's inventory script prints for a job: the stored groups and vars, only the slice's hosts,
    the inventory variables on ``all``, the towervars on each host."""
    data = json.loads(json.dumps(data))
    keep = set(sliced_hosts(inventory_hosts(data), slice_number, slice_count))
    hostvars = data.setdefault("_meta", {}).setdefault("hostvars", {})
    for name in list(hostvars):
        if name not in keep:
            del hostvars[name]
    for index, name in enumerate(sorted(keep)):
        hostvars[name] = dict(hostvars[name], remote_tower_enabled="true", remote_tower_id=index + 1)
    for group, body in data.items():
        if group != "_meta" and isinstance(body, dict) and "hosts" in body:
            body["hosts"] = [h for h in body["hosts"] if h in keep]
    if inventory_vars:
        data.setdefault("all", {}).setdefault("vars", {}).update(inventory_vars)
    return data


class JobResult(object):
    """A finished runner job as AWX shows it."""

    def __init__(self, name, pdd, ident, wall_s, slice_number=1, slice_count=1):
        self.name = name
        self.pdd = pdd
        self.ident = ident
        self.wall_s = wall_s
        self.slice_number = slice_number
        self.slice_count = slice_count
        art = os.path.join(pdd, "artifacts", ident)
        self.artifacts = art
        self.status = self._read(art, "status")
        rc = self._read(art, "rc")
        self.rc = int(rc) if rc not in (None, "") else None
        self.events = []
        for path in glob.glob(os.path.join(art, "job_events", "*.json")):
            with open(path) as f:
                self.events.append(json.load(f))
        self.events.sort(key=lambda e: e.get("counter", 0))
        stats = [e for e in self.events if e.get("event") == "playbook_on_stats"]
        self.stats = stats[-1]["event_data"] if stats else {}

    @staticmethod
    def _read(art, name):
        path = os.path.join(art, name)
        if not os.path.isfile(path):
            return None
        with open(path) as f:
            return f.read().strip()

    def host_events(self, kind=None):
        out = [e for e in self.events if e.get("event", "").startswith("runner_on_")]
        return [e for e in out if kind is None or e["event"] == kind]

    @property
    def hosts(self):
        """Hosts that ran at least one task (what AWX's job host summaries list)."""
        return sorted(set(e["event_data"].get("host") for e in self.host_events() if e["event_data"].get("host")))

    @property
    def changed_tasks(self):
        """"host: task" of every task that reported changed."""
        out = set()
        for e in self.host_events("runner_on_ok"):
            data = e["event_data"]
            if (data.get("res") or {}).get("changed"):
                out.add("%s: %s" % (data.get("host"), data.get("task")))
        return sorted(out)

    @property
    def failed_hosts(self):
        return sorted(set(e["event_data"].get("host") for e in self.host_events("runner_on_failed")
                          if not e["event_data"].get("ignore_errors")))

    @property
    def unreachable_hosts(self):
        return sorted(set(e["event_data"].get("host") for e in self.host_events("runner_on_unreachable")))

    def failures(self):
        lines = []
        for e in self.host_events("runner_on_failed") + self.host_events("runner_on_unreachable"):
            data = e["event_data"]
            res = data.get("res") or {}
            lines.append("%s: %s: %s" % (data.get("host"), data.get("task"), res.get("msg") or res))
        return lines

    def results(self, task_suffix):
        """{host: res} of the tasks whose name ends with ``task_suffix`` (last wins)."""
        out = {}
        for e in self.host_events():
            data = e["event_data"]
            if (data.get("task") or "").endswith(task_suffix):
                out[data.get("host")] = dict(data.get("res") or {}, _event=e["event"])
        return out

    def summary(self):
        counts = {}
        for e in self.events:
            counts[e.get("event")] = counts.get(e.get("event"), 0) + 1
        return {
            "job": self.name, "slice": "%d/%d" % (self.slice_number, self.slice_count), "status": self.status,
            "rc": self.rc, "wall_s": round(self.wall_s, 1), "events": len(self.events),
            "hosts": self.hosts, "changed_tasks": len(self.changed_tasks), "failed_hosts": self.failed_hosts,
            "unreachable_hosts": self.unreachable_hosts,
            "recap": dict((k, self.stats.get(k) or {}) for k in ("ok", "changed", "failures", "dark", "skipped")),
            "event_counts": counts,
        }

    def __repr__(self):
        return "JobResult(%s)" % json.dumps(self.summary())


class Launcher(object):
    """Runs job templates against one stored inventory in one execution environment."""

    def __init__(self, env, inventory_data, work_dir, inventory_vars=None, job_env=None):
        self.env = env
        self.inventory_data = inventory_data
        self.work_dir = work_dir
        self.inventory_vars = dict(inventory_vars or {})
        self.job_env = dict(job_env or {})
        self._next_id = 100

    def _job_id(self):
        self._next_id += 1
        return self._next_id

    def prepare(self, template, extra_vars, limit=None, job_type="run", slice_number=1, slice_count=1,
                workflow_id=None):
        """Write the private data dir of one job; returns (pdd, ident, cmdline)."""
        job_id = self._job_id()
        ident = str(job_id)
        pdd = os.path.join(self.work_dir, "job-%s" % ident)
        os.makedirs(os.path.join(pdd, "env"))
        os.makedirs(os.path.join(pdd, "inventory"))
        project = os.path.join(pdd, "project")
        for part in ("playbooks", "inventories"):
            shutil.copytree(os.path.join(TOP, part), os.path.join(project, part),
                            ignore=shutil.ignore_patterns("rendered", "__pycache__"))
        inventory = awx_inventory(self.inventory_data, self.inventory_vars, slice_number, slice_count)
        script = os.path.join(pdd, "inventory", "hosts")
        with open(script, "w") as f:
            f.write("#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(%r)\n" % json.dumps(inventory))
        os.chmod(script, 0o700)
        meta = {"awx_job_id": job_id, "tower_job_id": job_id, "awx_job_launch_type": "manual",
                "awx_job_template_name": template["name"], "awx_job_template_id": 1,
                "awx_inventory_name": "GPU fleet", "awx_inventory_id": 1}
        if workflow_id is not None:
            meta.update({"awx_workflow_job_id": workflow_id, "awx_workflow_job_name": template["name"],
                         "awx_workflow_job_launch_type": "manual"})
        all_vars = dict(extra_vars)
        all_vars.update(meta)
        with open(os.path.join(pdd, "env", "extravars"), "w") as f:
            yaml.safe_dump(all_vars, f)
        with open(os.path.join(pdd, "env", "settings"), "w") as f:
            json.dump({"idle_timeout": 0, "job_timeout": 900, "suppress_ansible_output": True}, f)
        cmdline = []
        if job_type == "check":
            cmdline.append("--check")
        cmdline += ["-u", "root"]
        if template.get("diff_mode"):
            cmdline.append("--diff")
        if limit:
            if not template.get("ask_limit_on_launch"):
                raise ValueError("%s does not ask for a limit on launch" % template["name"])
            cmdline += ["-l", limit]
        with open(os.path.join(pdd, "env", "cmdline"), "w") as f:
            f.write(" ".join(shlex.quote(a) for a in cmdline))
        return pdd, ident, cmdline

    def start(self, template, extra_vars, limit=None, job_type="run", slice_number=1, slice_count=1,
              workflow_id=None):
        """Start one job (ansible-runner of the EE); returns a handle for :meth:`wait`."""
        pdd, ident, _cmd = self.prepare(template, extra_vars, limit, job_type, slice_number, slice_count, workflow_id)
        home = os.path.join(pdd, "home")
        os.makedirs(home)
        env = self.env.env(HOME=home, ANSIBLE_HOME=os.path.join(home, ".ansible"),
                           ANSIBLE_LOCAL_TEMP=os.path.join(home, ".ansible", "tmp"),
                           ANSIBLE_REMOTE_TMP=os.path.join(home, ".ansible", "remote-tmp"),
                           ANSIBLE_RETRY_FILES_ENABLED="False", ANSIBLE_FORCE_COLOR="False", **self.job_env)
        argv = [os.path.join(self.env.bin, "ansible-runner"), "run", pdd, "-p", template["playbook"],
                "--ident", ident]
        log = open(os.path.join(pdd, "runner.log"), "w")
        proc = subprocess.Popen(argv, cwd=pdd, env=env, stdout=log, stderr=subprocess.STDOUT)
        return {"proc": proc, "log": log, "pdd": pdd, "ident": ident, "t0": time.time(), "template": template,
                "slice": (slice_number, slice_count)}

    def wait(self, handle, timeout=900):
        try:
            handle["proc"].wait(timeout=timeout)
        finally:
            handle["log"].close()
        wall = time.time() - handle["t0"]
        return JobResult(handle["template"]["name"], handle["pdd"], handle["ident"], wall, *handle["slice"])

    def launch(self, template, extra_vars, **kw):
        return self.wait(self.start(template, extra_vars, **kw))

    def launch_sliced(self, template, extra_vars, slice_count, **kw):
        """A sliced job as AWX runs it: a workflow of min(N, hosts) jobs in parallel, job k on slice k."""
        count = effective_slice_count(slice_count, inventory_hosts(self.inventory_data))
        if count == 1:  # AWX runs a plain job, no workflow
            return [self.launch(template, extra_vars, **kw)]
        workflow_id = self._job_id()
        handles = [self.start(template, extra_vars, slice_number=k, slice_count=count, workflow_id=workflow_id, **kw)
                   for k in range(1, count + 1)]
        return [self.wait(h) for h in handles]
