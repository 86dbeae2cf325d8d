"""kubernetes.core against the real API server: apply, then a second apply reports changed: false."""
import json
import os
import subprocess
import sys
import textwrap

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _playbook(tmp_path, ns):
    path = tmp_path / "apply.yml"
    path.write_text(textwrap.dedent("""\
        - name: Apply a manifest with kubernetes.core.k8s
          hosts: localhost
          gather_facts: false
          vars:
            ansible_connection: local
            ansible_python_interpreter: "{{ ansible_playbook_python }}"
          tasks:
            - name: Namespace, quota and deployment
              kubernetes.core.k8s:
                kubeconfig: "{{ kubeconfig }}"
                apply: true
                state: present
                definition:
                  - apiVersion: v1
                    kind: Namespace
                    metadata: {name: "%(ns)s"}
                  - apiVersion: v1
                    kind: ResourceQuota
                    metadata: {name: gpu, namespace: "%(ns)s"}
                    spec: {hard: {requests.nvidia.com/gpu: "2"}}
                  - apiVersion: apps/v1
                    kind: Deployment
                    metadata: {name: trainer, namespace: "%(ns)s"}
                    spec:
                      replicas: 1
                      selector: {matchLabels: {app: trainer}}
                      template:
                        metadata: {labels: {app: trainer}}
                        spec:
                          containers:
                            - name: main
                              image: registry.k8s.io/pause:3.10
                              resources: {limits: {nvidia.com/gpu: 1}}
        """ % {"ns": ns}))
    return path


def _run(playbook, kubeconfig):
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOWS="1")
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", "localhost,", str(playbook),
                           "-e", "kubeconfig=" + kubeconfig], cwd=TOP, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_k8s_apply_twice_reports_no_change(k8s_cluster, tmp_path, unique):
    ns = "e2e-apply-" + unique
    pb = _playbook(tmp_path, ns)
    try:
        first = _run(pb, k8s_cluster.kubeconfig)
        assert first["stats"]["localhost"]["changed"] == 1
        task = first["plays"][0]["tasks"][0]["hosts"]["localhost"]
        assert task["changed"] is True
        second = _run(pb, k8s_cluster.kubeconfig)
        assert second["stats"]["localhost"]["changed"] == 0
        assert second["plays"][0]["tasks"][0]["hosts"]["localhost"]["changed"] is False
        hard = k8s_cluster.core.read_namespaced_resource_quota("gpu", ns).spec.hard
        assert hard == {"requests.nvidia.com/gpu": "2"}
    finally:
        k8s_cluster.core.delete_namespace(ns)
