# -*- coding: utf-8 -*-
"""Report pictures (SVG), Markdown tables, the idempotent report writer and the progress bar."""
import io
import os
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.report import slices, svg, writer

NS = "{http://www.w3.org/2000/svg}"


def parse(doc):
    root = ET.fromstring(doc)
    assert root.tag == NS + "svg"
    return root


def texts(root):
    return [t.text for t in root.iter(NS + "text")]


def test_line_chart_draws_each_series_through_its_points_in_order():
    series = [{"name": "random", "points": [(0, 0), (50, 40), (100, 86)]},
              {"name": "fgd", "points": [(0, 0), (100, 95)], "dashed": True}]
    doc = svg.line_chart(series, "GPU allocation", "arrived workload (%)", "allocated (%)",
                         x_range=(0, 100), y_range=(0, 100), hlines=[(95, "paper: FGD 95 %")])
    root = parse(doc)
    lines = list(root.iter(NS + "polyline"))
    assert len(lines) == 2
    first = [tuple(float(v) for v in p.split(",")) for p in lines[0].get("points").split()]
    assert len(first) == 3
    # x grows left to right, a higher y is drawn higher (smaller SVG y)
    assert first[0][0] < first[1][0] < first[2][0]
    assert first[0][1] > first[1][1] > first[2][1]
    assert lines[0].get("stroke") == svg.PALETTE[0] and lines[1].get("stroke") == svg.PALETTE[1]
    assert lines[1].get("stroke-dasharray") and not lines[0].get("stroke-dasharray")
    labels = texts(root)
    assert "random" in labels and "fgd" in labels and "paper: FGD 95 %" in labels
    assert "100" in labels and "0" in labels
    # the same input gives the same bytes (reports are rewritten only when they change)
    assert doc == svg.line_chart(series, "GPU allocation", "arrived workload (%)", "allocated (%)",
                                 x_range=(0, 100), y_range=(0, 100), hlines=[(95, "paper: FGD 95 %")])


def test_bar_chart_heights_are_proportional_and_labelled():
    doc = svg.bar_chart(["A100 80GB", "L40S"], [{"name": "one GPU per replica", "values": [40, 10]},
                                                {"name": "plan", "values": [20, None]}],
                        "GPUs per model", "GPUs")
    root = parse(doc)
    bars = [r for r in root.iter(NS + "rect") if r.get("fill") in svg.PALETTE and float(r.get("width")) > 14]
    assert len(bars) == 3  # None draws no bar
    heights = sorted(float(b.get("height")) for b in bars)
    assert heights[2] == pytest.approx(2 * heights[1], rel=0.02)
    assert heights[2] == pytest.approx(4 * heights[0], rel=0.02)
    assert {"40", "20", "10", "A100 80GB", "L40S", "plan"} <= set(texts(root))


def test_escaping():
    root = parse(svg.bar_chart(["<a & b>"], [{"name": "x\"y", "values": [1]}], "t", "y"))
    assert "<a & b>" in texts(root) and 'x"y' in texts(root)


def gpu(index, model, instances, mig=True):
    return {"index": index, "model": model, "mig_capable": mig, "mig_mode_current": mig,
            "instances": instances}


def inst(profile, start, size, gid, **kw):
    row = {"profile": profile, "placement": {"start": start, "size": size}, "gpu_instance_id": gid,
           "compute_instance_id": 0}
    row.update(kw)
    return row


def test_slice_diagram_blocks_span_their_placements():
    rows = slices.host_rows([("node-1", [
        gpu(0, "a100_80gb", [inst("3g.40gb", 0, 4, 1), inst("1g.10gb", 6, 1, 2)]),
        gpu(1, "l40s_48gb", [], mig=False),
    ])])
    assert rows[0] == {"separator": "node-1"}
    assert rows[1]["slots"] == 8 and rows[1]["note"] == "4/7 compute"
    assert [(b["start"], b["size"], b["kind"]) for b in rows[1]["blocks"]] == [(0, 4, "3g.40gb"), (6, 1, "1g.10gb")]
    assert rows[2]["slots"] == 0 and rows[2]["note"] == "no MIG"
    root = parse(svg.slice_diagram(rows, "node-1 layout", slot_width=50))
    coloured = [r for r in root.iter(NS + "rect") if r.get("rx") == "3"]
    widths = sorted(float(r.get("width")) for r in coloured)
    # 1g (1 slice), 3g (4 slices) and the whole L40S (8 slice widths)
    assert widths == [pytest.approx(48), pytest.approx(198), pytest.approx(398)]
    assert "node-1" in texts(root) and "3g.40gb" in texts(root)


def test_slice_diagram_shows_a_gpu_instance_without_compute_instance_as_broken():
    row = slices.gpu_row(gpu(0, "h100_80gb", [inst("2g.20gb", 0, 2, 3, has_compute_instance=False,
                                                   compute_instance_id=None)]))
    assert row["blocks"] == [{"start": 0, "size": 2, "label": "2g.20gb no CI", "kind": "broken"}]
    assert row["note"] == "0/7 compute"
    root = parse(svg.slice_diagram([row], "t"))
    assert any(r.get("fill") == "#f4c7c3" for r in root.iter(NS + "rect"))


def test_table():
    out = writer.table(["model", "GPUs"], [["A100|80", 3]], align=["l", "r"])
    assert out == "| model | GPUs |\n|---|---:|\n| A100\\|80 | 3 |\n"


def test_write_report_is_idempotent_and_honours_check_mode(tmp_path):
    target = str(tmp_path / "out")
    pics = {"plan-nodes.svg": "<svg/>\n"}
    dry = writer.write_report(target, "# Plan\n", pics, check_mode=True)
    assert dry["changed"] and not os.path.exists(target)
    assert dry["path"] == os.path.join(target, "report.md")
    first = writer.write_report(target, "# Plan\n", pics)
    assert first["changed"] and sorted(first["changed_files"]) == sorted(first["files"])
    assert open(os.path.join(target, "plan-nodes.svg")).read() == "<svg/>\n"
    mtime = os.stat(first["path"]).st_mtime_ns
    again = writer.write_report(target, "# Plan\n", pics)
    assert not again["changed"] and again["changed_files"] == []
    assert os.stat(first["path"]).st_mtime_ns == mtime
    changed = writer.write_report(target, "# Plan v2\n", pics)
    assert changed["changed_files"] == [first["path"]]
    md = writer.write_report(str(tmp_path / "x" / "plan.md"), "a", {})
    assert md["path"] == str(tmp_path / "x" / "plan.md") and os.path.isfile(md["path"])


def test_write_report_diff_gives_the_markdown_before_and_after_only_when_it_changes(tmp_path):
    target = str(tmp_path / "plan.md")
    written, diff = writer.write_report_diff(target, "# Plan\n", {"a.svg": "<svg/>"}, diff=True)
    assert written["changed"] and diff == {"before": "", "after": "# Plan\n", "before_header": target, "after_header": target}
    written, diff = writer.write_report_diff(target, "# Plan\n", {"a.svg": "<svg/>"}, diff=True)
    assert not written["changed"] and diff is None
    written, diff = writer.write_report_diff(target, "# Plan v2\n", {}, check_mode=True, diff=True)
    assert written["changed_files"] == [target] and diff["before"] == "# Plan\n" and diff["after"] == "# Plan v2\n"
    assert open(target).read() == "# Plan\n"
    written, diff = writer.write_report_diff(target, "# Plan v3\n", {})
    assert written["changed"] and diff is None and open(target).read() == "# Plan v3\n"


def test_write_report_refuses_bad_names_and_unwritable_places(tmp_path):
    with pytest.raises(GpuOpsError, match="relative"):
        writer.write_report(str(tmp_path), "x", {"../evil.svg": "x"})
    with pytest.raises(GpuOpsError, match="a path is required"):
        writer.write_report("", "x")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(GpuOpsError, match="cannot write the report"):
        writer.write_report(str(blocker / "sub"), "x")


def test_progress_prints_the_start_then_a_line_per_ten_percent_off_a_terminal():
    out = io.StringIO()
    clock = iter(range(100)).__next__
    progress = writer.Progress(40, label="sweep", stream=out, clock=clock)
    for _step in range(40):
        progress.step()
    lines = out.getvalue().splitlines()
    # the first step (it started), then one line per 10 %
    assert len(lines) == 11
    assert lines[0].startswith("[#" + "." * 29 + "]  1/40   2%")
    assert lines[-1].startswith("[" + "#" * 30 + "] 40/40 100%")
    assert lines[1].startswith("[" + "#" * 3 + "." * 27 + "]  4/40  10%") and lines[1].endswith("sweep")
    quiet = io.StringIO()
    writer.Progress(5, stream=quiet, enabled=False).step(5)
    assert quiet.getvalue() == ""
