"""Run every integration target (tests/integration/targets/<name>/tasks/main.yml) with a real
ansible-playbook against the simulator. A target asserts its own expectations with
ansible.builtin.assert; this wrapper fails when the play fails or asserts nothing.

Targets whose `aliases` file contains `disabled` or `unsupported` are not collected (say why in
the aliases file). A target may ship `vars.yml`; the temporary directory is passed as
`gpuops_test_dir`.
"""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = os.path.join(HERE, "targets")


def _targets():
    out = []
    for name in sorted(os.listdir(TARGETS)) if os.path.isdir(TARGETS) else []:
        tasks = os.path.join(TARGETS, name, "tasks", "main.yml")
        if name.startswith("setup_") or not os.path.isfile(tasks):
            continue
        aliases = os.path.join(TARGETS, name, "aliases")
        words = open(aliases).read().split() if os.path.isfile(aliases) else []
        if "disabled" in words or "unsupported" in words:
            continue
        out.append(name)
    return out


@pytest.mark.parametrize("target", _targets())
def test_target(target, tmp_path):
    play = tmp_path / "play.yml"
    play.write_text(
        "- name: Integration target %s\n"
        "  hosts: localhost\n"
        "  connection: local\n"
        "  gather_facts: false\n"
        "  vars:\n"
        "    ansible_python_interpreter: %s\n"
        "    gpuops_test_dir: %s\n"
        "  roles:\n"
        "    - %s\n" % (target, sys.executable, tmp_path, os.path.join(TARGETS, target))
    )
    env = dict(os.environ)
    env["ANSIBLE_ROLES_PATH"] = TARGETS
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", str(play)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
        timeout=900, check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-6000:]
    recap = re.search(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", out)
    assert recap, out[-3000:]
    assert int(recap.group(4)) == 0, out[-6000:]
    # a target must check something: count the assert tasks that ran
    assert out.count("All assertions passed") > 0, "target %s ran no assertion" % target
