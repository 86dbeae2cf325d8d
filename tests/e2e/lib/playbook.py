"""One way for the e2e tests (and hack/ scripts) to run ansible-playbook and read what it did.

    from lib import playbook

    run = playbook.run("playbooks/plan.yml", extra_vars={"plan_demand": [...]}, kubeconfig=kc, check=True)
    run.rc, run.ok            # exit status; ok: rc == 0
    run.report                # the ansible.posix.json callback's report (dict), None if it printed no JSON
    run.stats["localhost"]    # {"ok": .., "changed": .., "failures": .., ...}
    run.result("Plan")        # the result of the last task named "Plan" on localhost (KeyError if none)
    run.results(host)         # [(task name, result), ...] in run order
    run.by_host("Plan")       # {host: result} of the tasks called "Plan" (or "<role> : Plan")
    run.changed(host)         # names of the tasks that changed something; run.all_changed(): "host: task"
    run.failure(host)         # (task, message) of the first failed task, (None, None) if none failed
    run.failures()            # "host: task: message" per failed task (loop items included)
    run.output                # stdout + stderr as printed
    run.text                  # every message the run printed (debug/fail/assert msgs, module msgs), one per
                              # line, for `"Rollout stopped" in run.text`; the raw output when there is no JSON

    play = playbook.localhost_play("Apply", tasks=[...])      # the localhost play header, as a dict
    text = playbook.localhost_yaml("Apply", "  tasks:\n ...")  # ... or as YAML text before the play's body
    path = playbook.write(tmp_path, [play])                     # a uniquely named playbook file

Results come from the JSON stdout callback (ansible.posix.json), never from the default callback's text.
``run(..., expect_rc=0)`` asserts the exit status and shows the failed tasks when it differs; pass
``expect_rc=None`` to check it yourself. ``kubeconfig`` sets KUBECONFIG and K8S_AUTH_KUBECONFIG (kubernetes.core);
``extra_vars`` (a dict) travels in a JSON file (``-e @file``), so any value survives quoting.
"""
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
LOCAL_VARS = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}


def localhost_play(name, tasks=None, roles=None, variables=None, **keys):
    """A play on localhost over the local connection with the controller's Python (no facts)."""
    play = {"name": name, "hosts": "localhost", "gather_facts": False, "vars": dict(LOCAL_VARS, **(variables or {}))}
    play.update(keys)
    if roles is not None:
        play["roles"] = roles
    if tasks is not None:
        play["tasks"] = tasks
    return play


def localhost_yaml(name, body):
    """The YAML text of a localhost play called ``name``: the header, then ``body``, the play's keys (its least
    indented lines, e.g. "tasks:\n  - ..."; lines indented deeper before them continue the play's ``vars``)."""
    return ("- name: %s\n  hosts: localhost\n  gather_facts: false\n  vars:\n    ansible_connection: local\n"
            "    ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n" % name) + textwrap.indent(textwrap.dedent(body), "  ")


def write(directory, plays, prefix="play"):
    """Write ``plays`` (a list of dicts, or YAML text) to a new file in ``directory``; returns its path."""
    path = os.path.join(str(directory), "%s-%s.yml" % (prefix, uuid.uuid4().hex[:6]))
    with open(path, "w") as f:
        f.write(plays if isinstance(plays, str) else json.dumps(plays, indent=1))
    return path


def env_for(kubeconfig=None, env=None):
    """The environment of a run: this process's, the JSON callback, the kubeconfig and ``env`` on top."""
    e = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOWS="1")
    e.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(TOP, ".build", "collections"))
    e.setdefault("ANSIBLE_HOME", os.path.join(TOP, ".cache", "ansible"))
    e.setdefault("ANSIBLE_LOCAL_TEMP", os.path.join(TOP, ".cache", "ansible", "tmp-local"))
    if kubeconfig:
        e["KUBECONFIG"] = e["K8S_AUTH_KUBECONFIG"] = str(kubeconfig)
    e.update(env or {})
    return e


def run(playbook, inventory="localhost,", extra_vars=None, args=(), kubeconfig=None, env=None, cwd=None,
        check=False, diff=False, timeout=900, expect_rc=0):
    """ansible-playbook ``playbook`` (a path, relative paths from the repository's top) -> Run."""
    cwd = str(cwd or TOP)
    cmd = [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(playbook)]
    if extra_vars:
        varfile = os.path.join(cwd, ".vars-%s.json" % uuid.uuid4().hex[:8])
        with open(varfile, "w") as f:
            json.dump(extra_vars, f)
        cmd += ["-e", "@" + varfile]
    else:
        varfile = None
    cmd += (["--check"] if check else []) + (["--diff"] if diff else []) + [str(a) for a in args]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env_for(kubeconfig, env), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, check=False)
    finally:
        if varfile:
            os.unlink(varfile)
    result = Run(cmd, proc.returncode, proc.stdout, proc.stderr, round(time.time() - t0, 1))
    if expect_rc is not None:
        assert result.rc == expect_rc, "ansible-playbook %s: rc %d, expected %d\n%s" % (
            playbook, result.rc, expect_rc, result.explain())
    return result


class Run(object):
    """What one ansible-playbook run did (see the module's docstring)."""

    def __init__(self, cmd, rc, stdout, stderr, seconds):
        self.cmd, self.rc, self.stdout, self.stderr, self.seconds = cmd, rc, stdout, stderr, seconds
        try:
            self.report = json.loads(stdout)
        except ValueError:
            self.report = None

    @property
    def ok(self):
        return self.rc == 0

    @property
    def stats(self):
        return (self.report or {}).get("stats", {})

    def results(self, host="localhost"):
        """[(task name, result)] of ``host`` in run order (all hosts' with host=None: (host, name, result))."""
        out = []
        for play in (self.report or {}).get("plays", []):
            for task in play.get("tasks", []):
                for h, res in task.get("hosts", {}).items():
                    if host is None:
                        out.append((h, task["task"]["name"], res))
                    elif h == host:
                        out.append((task["task"]["name"], res))
        return out

    def result(self, name, host="localhost"):
        """The result of the last task called ``name`` on ``host``."""
        found = [res for n, res in self.results(host) if n == name]
        if not found:
            raise KeyError("no task %r on %s in this run; tasks: %s" % (
                name, host, sorted(set(n for n, _r in self.results(host)))))
        return found[-1]

    def by_host(self, name):
        """{host: result} of the tasks called ``name`` (or ``<role> : name``); the last one wins."""
        found = {}
        for host, n, res in self.results(None):
            if n == name or n.endswith(" : " + name):
                found[host] = res
        return found

    def changed(self, host="localhost"):
        """Names of the tasks that changed something on ``host``, in run order."""
        return [n for n, res in self.results(host) if res.get("changed")]

    def all_changed(self):
        """Sorted "host: task" of every task that changed something."""
        return sorted(set("%s: %s" % (h, n) for h, n, res in self.results(None) if res.get("changed")))

    def failure(self, host="localhost"):
        """(task name, message) of the first failed task on ``host``; (None, None) when none failed."""
        for name, res in self.results(host):
            if res.get("failed"):
                return name, res.get("msg", "")
        return None, None

    def failures(self):
        lines = []
        for host, name, res in self.results(None):
            if res.get("failed") or res.get("unreachable"):
                items = [str(i.get("msg", "")) for i in res.get("results", []) if isinstance(i, dict) and i.get("failed")]
                lines.append("%s: %s: %s" % (host, name, " | ".join(items) or res.get("msg", "")))
        return lines

    @property
    def output(self):
        """stdout and stderr as printed (the JSON report, then warnings)."""
        return self.stdout + self.stderr

    @property
    def text(self):
        if self.report is None:
            return self.stdout + self.stderr
        lines = []
        for _h, _n, res in self.results(None):
            _messages(res, lines)
        return "\n".join(lines)

    def explain(self):
        """Why a run failed, for an assertion message."""
        if self.report is None:
            return "no JSON report:\n%s\n%s" % (self.stdout[-4000:], self.stderr[-3000:])
        return "\n".join(self.failures()) + "\n" + self.stderr[-3000:]


def _messages(value, lines):
    if isinstance(value, dict):
        for key, v in value.items():
            if key == "msg" and isinstance(v, str):
                lines.append(v)
            elif key == "msg" and isinstance(v, list):
                lines.extend(str(x) for x in v)
            elif isinstance(v, (dict, list)):
                _messages(v, lines)
    elif isinstance(value, list):
        for v in value:
            _messages(v, lines)
