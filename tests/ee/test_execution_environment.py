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
    # the controller-side extras of gpu_plan / gpu_whatif
    assert "scipy==1.17.1" in (build_dir / "requirements.txt").read_text()
    assert "numpy==2.4.6" in (build_dir / "requirements.txt").read_text()
    # nvidia-ml-py belongs on the GPU hosts, not in the controller image
    assert "nvidia-ml-py" not in (build_dir / "requirements.txt").read_text()


def test_collection_declares_its_controller_python_requirements(tmp_path):
    """ansible-builder's introspection (what an EE build runs on the installed collection) finds the
    controller-side packages, the planner's scipy among them, and nothing meant for GPU hosts."""
    build = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", TOP, "--output-path",
                            str(tmp_path), "--force"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, check=False)
    assert build.returncode == 0, build.stdout
    tarball = [f for f in os.listdir(str(tmp_path)) if f.endswith(".tar.gz")][0]
    inst = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", str(tmp_path / tarball),
                           "-p", str(tmp_path / "coll"), "--no-deps", "--offline", "--force"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert inst.returncode == 0 and "installed successfully" in inst.stdout, inst.stdout
    proc = subprocess.run([os.path.join(BIN, "ansible-builder"), "introspect", "--sanitize", str(tmp_path / "coll")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout
    data = yaml.safe_load(proc.stdout.split("---", 1)[1])
    names = sorted(line.split("#")[0].split(">=")[0].strip() for line in data["python"])
    assert names == ["jmespath", "jsonpatch", "kubernetes", "numpy", "scipy"]
    assert all("from collection gpuops.k8s" in line for line in data["python"])
