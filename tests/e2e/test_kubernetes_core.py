"""kubernetes.core against the real API server: apply, then a second apply reports changed: false."""
from lib import gpu_nodes, playbook


def _playbook(tmp_path, ns):
    path = tmp_path / "apply.yml"
    path.write_text(playbook.localhost_yaml("Apply a manifest with kubernetes.core.k8s", ("""\
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
        """ % {"ns": ns})))
    return path


def _run(pb, kubeconfig, extra_vars=None, **kw):
    """ansible-playbook with the JSON callback; returns its parsed report."""
    return playbook.run(pb, kubeconfig=kubeconfig, extra_vars=dict(extra_vars or {}, kubeconfig=kubeconfig), **kw).report


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
    pb.write_text(playbook.localhost_yaml("Publish a simulated host on its kwok node", ("""\
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
        """ % {"node": node})))
    try:
        first = _run(pb, k8s_cluster.kubeconfig)
        assert first["plays"][0]["tasks"][0]["hosts"]["localhost"]["changed"] is True
        second = _run(pb, k8s_cluster.kubeconfig)
        assert second["plays"][0]["tasks"][0]["hosts"]["localhost"]["changed"] is False
        assert second["stats"]["localhost"]["failures"] == 0

        # a MIG change in check mode reports the change and leaves the node alone
        checked = _run(pb, k8s_cluster.kubeconfig, {"layout": {"3g.40gb": 2}}, check=True, diff=True)
        task = checked["plays"][0]["tasks"][0]["hosts"]["localhost"]
        assert task["changed"] is True
        assert k8s_cluster.core.read_node(node).status.allocatable["nvidia.com/mig-1g.10gb"] == "56"
    finally:
        gpu_nodes.delete_node(k8s_cluster.core, node)


def test_sim_lab_playbook_publishes_every_host(k8s_cluster):
    """playbooks/lab/sim_k8s_nodes.yml on inventories/sim: one kwok node per simulated host, idempotent."""
    for dummy in range(2):
        run = playbook.run("playbooks/lab/sim_k8s_nodes.yml", inventory="inventories/sim/hosts.yml",
                           kubeconfig=k8s_cluster.kubeconfig)
    stats = run.stats
    assert set(stats) == {"dgx-a100-01", "hgx-h100-01", "hgx-h200-01", "l40s-01"}
    assert all(s["changed"] == 0 and s["failures"] == 0 for s in stats.values()), stats
    node = k8s_cluster.core.read_node("hgx-h200-01")
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H200"
    assert node.metadata.labels["nvidia.com/cuda.driver-version.full"] == "550.127.08"
