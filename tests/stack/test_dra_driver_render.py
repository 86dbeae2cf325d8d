"""NVIDIA's DRA driver with DynamicMIG as the device_plugin role renders it (device_plugin_gpu_allocation dra-dynamic).

The expected values were read in the driver's Helm chart, kubernetes-sigs/dra-driver-nvidia-gpu tag v0.4.1
(commit 764900e7833798a1528bd52a2af3e1b2d5f7a616, deployments/helm/dra-driver-nvidia-gpu): image
``registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu`` with tag ``v`` + appVersion 0.4.1, the ``gpus``
container running ``gpu-kubelet-plugin``, ``featureGates.DynamicMIG=true`` passed as ``FEATURE_GATES``, the kubelet
plugin's ClusterRole, no controller Deployment when compute domains are off. Every document is checked against the
Kubernetes OpenAPI schema in strict mode. Nothing here runs the driver (it needs a GPU).
"""
import glob
import os
import subprocess
import sys

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
PLAY = """\
- name: Render the device plugin role in dra-dynamic mode
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Render
      ansible.builtin.include_role:
        name: gpuops.k8s.device_plugin
      vars:
        device_plugin_mode: render
        device_plugin_gpu_allocation: dra-dynamic
        device_plugin_dra_profiles: [1g.10gb]
"""


def _render(tmp_path, extra=None):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    args = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", str(play),
            "-e", "device_plugin_render_dir=%s" % (tmp_path / "out")]
    if extra:
        (tmp_path / "extra.yml").write_text(yaml.safe_dump(extra))
        args += ["-e", "@%s" % (tmp_path / "extra.yml")]
    proc = subprocess.run(args, cwd=TOP, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    return proc.returncode, proc.stdout


def test_driver_daemonset_rbac_and_dynamic_mig_gate(tmp_path):
    rc, out = _render(tmp_path)
    assert rc == 0, out[-5000:]
    files = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "out" / "*.yaml")))
    assert files == ["dra-device-classes.yaml", "dra-driver.yaml"]
    with open(str(tmp_path / "out" / "dra-driver.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    assert [d["kind"] for d in docs] == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.37", strict=True)
    ns, sa, role, binding, ds = docs
    assert ns["metadata"]["name"] == "dra-driver-nvidia-gpu"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert sa["metadata"]["namespace"] == ds["metadata"]["namespace"] == "dra-driver-nvidia-gpu"
    pod = ds["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": "dra-driver-nvidia-gpu"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    verbs = dict((r["resources"][0], set(r["verbs"])) for r in role["rules"])
    assert {"create", "update", "delete"} <= verbs["resourceslices"]
    assert verbs["resourceclaims"] == {"get", "list", "watch"}
    image = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
    (init,) = pod["initContainers"]
    (gpus,) = pod["containers"]
    assert init["image"] == gpus["image"] == image
    assert init["command"] == ["bash", "/usr/bin/kubelet-plugin-prestart.sh"]
    assert gpus["name"] == "gpus" and "gpu-kubelet-plugin" in " ".join(gpus["command"] + gpus["args"])
    env = dict((e["name"], e.get("value")) for e in gpus["env"])
    assert env["FEATURE_GATES"] == "DynamicMIG=true"
    assert env["NVIDIA_MIG_CONFIG_DEVICES"] == "all" and env["IMAGE_NAME"] == image
    assert gpus["securityContext"]["privileged"] is True
    volumes = dict((v["name"], v) for v in pod["volumes"])
    for m in gpus["volumeMounts"] + init["volumeMounts"]:
        assert m["name"] in volumes
    assert volumes["plugins"]["hostPath"]["path"] == "/var/lib/kubelet/plugins"
    assert volumes["plugins-registry"]["hostPath"]["path"] == "/var/lib/kubelet/plugins_registry"
    assert pod["priorityClassName"] == "system-node-critical"
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize("gates,word", [
    ({"DynamicMIG": True, "MPSSupport": True}, "MPSSupport"),
    ({"DynamicMIG": False}, "needs DynamicMIG: true")])
def test_gates_the_driver_refuses_are_refused_before_anything_is_written(tmp_path, gates, word):
    rc, out = _render(tmp_path, {"device_plugin_dra_driver_feature_gates": gates})
    assert rc != 0
    assert word in out
    assert not glob.glob(str(tmp_path / "out" / "*.yaml"))
