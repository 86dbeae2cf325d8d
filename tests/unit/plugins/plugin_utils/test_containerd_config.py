# -*- coding: utf-8 -*-
"""containerd drop-in: carries the main file's CRI section, keeps runc, schema 2 vs 3, valid TOML."""

import tomllib

import pytest

from ansible_collections.gpuops.k8s.plugins.plugin_utils.containerd_config import (
    ContainerdConfigError,
    dumps,
    nvidia_dropin,
)

DEBIAN_MAIN = """
version = 2
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""
V16 = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
V17 = "containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da"
V20 = "containerd containerd.io v2.0.5 fb4c30d4ede3531652d86197bf3fc9515e5276d9"


def test_dropin_keeps_main_cri_settings_and_runc():
    out = tomllib.loads(nvidia_dropin(DEBIAN_MAIN, V16, default=True))
    cri = out["plugins"]["io.containerd.grpc.v1.cri"]
    assert out["version"] == 2
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert cri["containerd"]["runtimes"]["nvidia"]["options"] == {
        "SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}
    assert cri["containerd"]["runtimes"]["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert "enable_cdi" not in cri  # containerd 1.6 has no CDI switch
    assert "io.containerd.internal.v1.opt" not in out["plugins"]


def test_existing_runc_and_settings_win_over_defaults():
    main = DEBIAN_MAIN + """
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
"""
    cri = tomllib.loads(nvidia_dropin(main, V17, cdi=True))["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["containerd"]["runtimes"]["runc"]["options"] == {"SystemdCgroup": False}
    assert "default_runtime_name" not in cri["containerd"]
    assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert cri["containerd"]["runtimes"]["nvidia-cdi"]["options"]["BinaryName"].endswith(".cdi")


def test_containerd2_uses_schema_3():
    out = tomllib.loads(nvidia_dropin("", V20, default=True, cdi=True))
    assert out["version"] == 3
    cri = out["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["containerd"]["runtimes"]["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert cri["enable_cdi"] is True


def test_bad_main_config_is_reported():
    with pytest.raises(ContainerdConfigError) as e:
        nvidia_dropin("version = [", V16)
    assert "not valid TOML" in str(e.value)


def test_dumps_round_trip():
    data = {"version": 2, "a": {"b c": {"x": [1, 2], "y": "q\"uote", "z": False}, "n": 1.5}}
    assert tomllib.loads(dumps(data)) == data
