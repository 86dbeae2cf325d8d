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


def _run(playbook, kubeconfig, *extra, **kw):
    """ansible-playbook with the JSON callback; returns its parsed report."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOWS="1")
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", "localhost,", str(playbook),
                           "-e", "kubeconfig=" + kubeconfig] + list(extra), cwd=TOP, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == kw.get("expect_rc", 0), proc.stdout[-4000:] + proc.stderr[-4000:]
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


def test_sim_gpu_node_module_acts_as_device_plugin(k8s_cluster, tmp_path, unique):
    """gpuops.k8s.sim_gpu_node in a real playbook: create, idempotence, MIG change, check mode, delete."""
    node = "e2e-mod-" + unique
    pb = tmp_path / "node.yml"
    pb.write_text(textwrap.dedent("""\
        - name: Publish a simulated host on its kwok node
          hosts: localhost
          gather_facts: false
          vars:
            ansible_connection: local
            ansible_python_interpreter: "{{ ansible_playbook_python }}"
            layout: {"1g.10gb": 7}
          tasks:
            - name: Node as the device plugin would publish it
              gpuops.k8s.sim_gpu_node:
                kubeconfig: "{{ kubeconfig }}"
                name: "%(node)s"
                gpus: [{model: a100_80gb, count: 8}]
                mig_strategy: mixed
                mig_config: "{{ layout }}"
              register: published
            - name: Read it back through kubernetes.core
              kubernetes.core.k8s_info:
                kubeconfig: "{{ kubeconfig }}"
                kind: Node
                name: "%(node)s"
              register: info
            - name: Check what the scheduler sees
              when: not ansible_check_mode
              ansible.builtin.assert:
                that:
                  - info.resources[0].status.allocatable['nvidia.com/mig-1g.10gb'] == '56'
                  - info.resources[0].metadata.labels['nvidia.com/mig.strategy'] == 'mixed'
                  - published.capacity['nvidia.com/mig-1g.10gb'] == '56'
        """ % {"node": node}))
    try:
        first = _run(pb, k8s_cluster.kubeconfig)
        assert first["plays"][0]["tasks"][0]["hosts"]["localhost"]["changed"] is True
        second = _run(pb, k8s_cluster.kubeconfig)
        assert second["plays"][0]["tasks"][0]["hosts"]["localhost"]["changed"] is False
        assert second["stats"]["localhost"]["failures"] == 0

        # a MIG change in check mode reports the change and leaves the node alone
        checked = _run(pb, k8s_cluster.kubeconfig, "-e", '{"layout": {"3g.40gb": 2}}', "--check", "--diff")
        task = checked["plays"][0]["tasks"][0]["hosts"]["localhost"]
        assert task["changed"] is True
        assert k8s_cluster.core.read_node(node).status.allocatable["nvidia.com/mig-1g.10gb"] == "56"
    finally:
        from lib import gpu_nodes
        gpu_nodes.delete_node(k8s_cluster.core, node)


def test_sim_lab_playbook_publishes_every_host(k8s_cluster):
    """playbooks/lab/sim_k8s_nodes.yml on inventories/sim: one kwok node per simulated host, idempotent."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", KUBECONFIG=k8s_cluster.kubeconfig)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inventories/sim/hosts.yml",
           "playbooks/lab/sim_k8s_nodes.yml"]
    for dummy in range(2):
        proc = subprocess.run(cmd, cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    stats = json.loads(proc.stdout)["stats"]
    assert set(stats) == {"dgx-a100-01", "hgx-h100-01", "hgx-h200-01", "l40s-01"}
    assert all(s["changed"] == 0 and s["failures"] == 0 for s in stats.values()), stats
    node = k8s_cluster.core.read_node("hgx-h200-01")
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H200"
    assert node.metadata.labels["nvidia.com/cuda.driver-version.full"] == "550.127.08"
