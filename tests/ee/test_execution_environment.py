"""`ansible-builder create` turns execution-environment/ into a build context offline."""
import os
import shutil
import subprocess
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def test_ansible_builder_create_offline(tmp_path):
    ee = tmp_path / "ee"
    shutil.copytree(os.path.join(TOP, "execution-environment"), str(ee),
                    ignore=shutil.ignore_patterns("context", "*.tar.gz"))
    # the collection tarball the EE installs
    build = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", TOP, "--output-path",
                            str(tmp_path), "--force"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, check=False)
    assert build.returncode == 0, build.stdout
    tarball = [f for f in os.listdir(str(tmp_path)) if f.endswith(".tar.gz")]
    assert tarball == ["gpuops-k8s-%s.tar.gz" % yaml.safe_load(open(os.path.join(TOP, "galaxy.yml")))["version"]]
    shutil.copy(str(tmp_path / tarball[0]), str(ee / "gpuops-k8s.tar.gz"))
    env = dict(os.environ, no_proxy="*", HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    proc = subprocess.run([os.path.join(BIN, "ansible-builder"), "create", "-f", str(ee / "execution-environment.yml"),
                           "-c", str(tmp_path / "context"), "--output-filename", "Containerfile"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout
    containerfile = (tmp_path / "context" / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="quay.io/rockylinux/rockylinux:9-minimal"' in containerfile
    assert "ansible-core==2.19.14" in containerfile
    assert "helm" in containerfile
    build_dir = tmp_path / "context" / "_build"
    assert (build_dir / "collections" / "gpuops-k8s.tar.gz").is_file()
    reqs = yaml.safe_load((build_dir / "requirements.yml").read_text())
    assert {"name": "kubernetes.core", "version": "6.6.0"} in reqs["collections"]
    assert "kubernetes==37.0.2" in (build_dir / "requirements.txt").read_text()
    # nvidia-ml-py belongs on the GPU hosts, not in the controller image
    assert "nvidia-ml-py" not in (build_dir / "requirements.txt").read_text()
