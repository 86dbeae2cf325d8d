# -*- coding: utf-8 -*-
"""Slice diagrams."""
from ansible_collections.gpuops.k8s.plugins.module_utils.report import diagram as slice_diagram


def row(profile, start, size, gid, ci=0, **kw):
    out = {"profile": profile, "placement": {"start": start, "size": size}, "gpu_instance_id": gid,
           "compute_instance_id": ci}
    out.update(kw)
    return out


def gpu(index=0, model="h100_80gb", instances=(), **kw):
    out = {"index": index, "model": model, "mig_capable": True, "mig_mode_current": True, "mig_mode_pending": True,
           "instances": list(instances)}
    out.update(kw)
    return out


def test_cells_follow_placements():
    line = slice_diagram.render_gpu(gpu(instances=[row("3g.40gb", 0, 4, 1), row("2g.20gb", 4, 2, 2),
                                                   row("1g.10gb", 6, 1, 3)]))
    assert line == ("GPU0 h100_80gb [3g.40gb                            |2g.20gb          |1g.10gb |   \u00b7    ]"
                    "  6/7 compute")
    # every slice is 8 wide, separators between cells: 8 slices -> 8*8 + 7 characters
    inner = line[line.index("[") + 1:line.index("]")]
    assert len(inner) == 8 * 8 + 7


def test_busy_ci_split_and_free_slices():
    line = slice_diagram.render_gpu(gpu(instances=[
        row("1c.3g.40gb", 4, 4, 2, ci=0, busy=True), row("1c.3g.40gb", 4, 4, 2, ci=1),
        row("1c.3g.40gb", 4, 4, 2, ci=2)]))
    assert line.startswith("GPU0 h100_80gb [   \u00b7    |   \u00b7    |   \u00b7    |   \u00b7    |3g.40gb* 3x1c")
    assert line.endswith("3/7 compute")


def test_modes_and_non_mig():
    assert slice_diagram.render_gpu(gpu(model="l40s_48gb", mig_capable=False)) == \
        "GPU0 l40s_48gb [ full GPU (MIG not supported) ]"
    assert "MIG disabled" in slice_diagram.render_gpu(gpu(mig_mode_current=False, mig_mode_pending=False))
    assert "MIG enable pending reset" in slice_diagram.render_gpu(gpu(mig_mode_current=False, mig_mode_pending=True))
    assert "MIG disable pending reset" in slice_diagram.render_gpu(gpu(mig_mode_pending=False))


def test_gi_without_ci_and_a30_width():
    line = slice_diagram.render_gpu(gpu(model="a30_24gb", instances=[
        row("2g.12gb", 0, 2, 1, ci=None, compute_slices=None, has_compute_instance=False)]))
    assert "2g.12gb no CI" in line
    assert line.count("|") == 2  # 2-slice instance + two free slices on a 4-slice A30


def test_render_host_aligns_labels():
    lines = slice_diagram.render([gpu(0), gpu(1, model="h200_141gb")], host="node")
    assert lines[0] == "node:"
    assert lines[1].index("[") == lines[2].index("[")
