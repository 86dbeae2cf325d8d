"""`ansible-builder create` turns decision-environment/ (the rulebook's image) into a build context offline."""
import os
import shutil
import subprocess
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def test_ansible_builder_create_offline(tmp_path):
    de = tmp_path / "de"
    shutil.copytree(os.path.join(TOP, "decision-environment"), str(de), ignore=shutil.ignore_patterns("*.tar.gz"))
    build = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", TOP, "--output-path",
                            str(tmp_path), "--force"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, check=False)
    assert build.returncode == 0, build.stdout
    tarball = [f for f in os.listdir(str(tmp_path)) if f.endswith(".tar.gz")][0]
    shutil.copy(str(tmp_path / tarball), str(de / "gpuops-k8s.tar.gz"))
    env = dict(os.environ, no_proxy="*", HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    proc = subprocess.run([os.path.join(BIN, "ansible-builder"), "create", "-f", str(de / "decision-environment.yml"),
                           "-c", str(tmp_path / "context"), "--output-filename", "Containerfile"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout
    containerfile = (tmp_path / "context" / "Containerfile").read_text()
    assert "ansible-core==2.19.14" in containerfile and "ansible-runner==2.4.1" in containerfile
    assert "JAVA_HOME" in containerfile
    build_dir = tmp_path / "context" / "_build"
    assert (build_dir / "collections" / "gpuops-k8s.tar.gz").is_file()
    assert "ansible-rulebook==1.3.2" in (build_dir / "requirements.txt").read_text()
    assert "java-17-openjdk-headless [platform:rpm]" in (build_dir / "bindep.txt").read_text()
    reqs = yaml.safe_load((build_dir / "requirements.yml").read_text())
    assert {"name": "kubernetes.core", "version": "6.6.0"} in reqs["collections"]
    # the rulebook ships in the collection the image installs
    listing = subprocess.run(["tar", "-tzf", str(tmp_path / tarball)], stdout=subprocess.PIPE,
                             universal_newlines=True, check=True).stdout.split()
    assert "extensions/eda/rulebooks/gpu_health_alerts.yml" in listing
