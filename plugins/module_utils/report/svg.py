# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SVG pictures for the collection's reports (planner, what-if): one style, no dependencies.

Three kinds of picture, each a pure function returning the SVG document as a string:

* :func:`line_chart` - series of (x, y) points on linear axes (what-if: allocation vs arrived workload);
* :func:`bar_chart` - grouped bars per category (planner: GPUs or cost per model, before/after);
* :func:`slice_diagram` - one row per GPU, its memory slices and the MIG instances or shares on them
  (the picture of :mod:`diagram`'s text slice diagrams).

Output is deterministic (same input, same bytes: numbers are rounded to 0.1 px, no timestamps or
random ids), so a report written twice is unchanged the second time. Colours are the Okabe-Ito
palette (readable with colour-vision deficiencies); a series or block kind keeps its colour by order
of first appearance. Python 3.9 compatible.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
GRID = "#d9d9d9"
AXIS = "#333333"
TEXT = "#222222"
MUTED = "#777777"
FREE_FILL = "#f2f2f2"
FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


def esc(text: str) -> str:
    """Text escaped for SVG/XML content and attribute values."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _n(value):
    """A coordinate with at most one decimal, without a trailing .0."""
    value = round(float(value), 1)
    if value == int(value):
        return str(int(value))
    return "%.1f" % value


class Canvas(object):
    """A minimal SVG document builder (elements are appended in drawing order)."""

    def __init__(self, width: int, height: int, title: Optional[str] = None) -> None:
        self.width = width
        self.height = height
        self.parts = []
        self.title = title

    def rect(self, x: float, y: Any, w: float, h: Any, fill: str, stroke: Optional[str] = None, rx: int = 0,
             opacity: Optional[float] = None) -> None:
        attrs = 'x="%s" y="%s" width="%s" height="%s" fill="%s"' % (_n(x), _n(y), _n(max(w, 0)), _n(max(h, 0)), fill)
        if stroke:
            attrs += ' stroke="%s"' % stroke
        if rx:
            attrs += ' rx="%s"' % _n(rx)
        if opacity is not None:
            attrs += ' fill-opacity="%s"' % _n(opacity)
        self.parts.append("<rect %s/>" % attrs)

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = AXIS, width: int = 1,
             dash: Optional[str] = None) -> None:
        attrs = 'x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"' % (
            _n(x1), _n(y1), _n(x2), _n(y2), stroke, _n(width))
        if dash:
            attrs += ' stroke-dasharray="%s"' % dash
        self.parts.append("<line %s/>" % attrs)

    def polyline(self, points: List[Tuple[float, float]], stroke: str, width: int = 2,
                 dash: Optional[str] = None) -> None:
        if not points:
            return
        attrs = 'points="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"' % (
            " ".join("%s,%s" % (_n(x), _n(y)) for x, y in points), stroke, _n(width))
        if dash:
            attrs += ' stroke-dasharray="%s"' % dash
        self.parts.append("<polyline %s/>" % attrs)

    def text(self, x: float, y: Any, content: str, size: int = 12, anchor: str = "start", fill: str = TEXT,
             weight: Optional[str] = None, rotate: Optional[int] = None) -> None:
        attrs = 'x="%s" y="%s" font-size="%s" text-anchor="%s" fill="%s"' % (_n(x), _n(y), _n(size), anchor, fill)
        if weight:
            attrs += ' font-weight="%s"' % weight
        if rotate is not None:
            attrs += ' transform="rotate(%s %s %s)"' % (_n(rotate), _n(x), _n(y))
        self.parts.append("<text %s>%s</text>" % (attrs, esc(content)))

    def render(self) -> str:
        head = ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>'
                % (self.width, self.height, self.width, self.height, FONT))
        body = ['<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>' % (self.width, self.height)]
        if self.title:
            body.insert(0, "<title>%s</title>" % esc(self.title))
        return "\n".join([head] + body + self.parts + ["</svg>"]) + "\n"


def nice_ticks(low: float, high: float, count: int = 5) -> List[Any]:
    """Round tick values covering [low, high] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / float(max(count, 1))
    power = 10 ** math.floor(math.log10(raw))
    step = power
    for mult in (1, 2, 2.5, 5, 10):
        step = mult * power
        if step >= raw:
            break
    start = math.floor(low / step + 1e-9) * step
    ticks = []
    value = start
    while value <= high + step * 1e-6:
        if value >= low - step * 1e-6:
            ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt_tick(value):
    if abs(value - round(value)) < 1e-9:
        return "%d" % int(round(value))
    return ("%.2f" % value).rstrip("0").rstrip(".")


def _legend(canvas, names, x, y, dashes=None):
    """A vertical legend at (x, y): a short line in the series colour, then its name."""
    for i, name in enumerate(names):
        yy = y + i * 18
        dash = dashes[i] if dashes else None
        canvas.line(x, yy - 4, x + 22, yy - 4, stroke=PALETTE[i % len(PALETTE)], width=3, dash=dash)
        canvas.text(x + 28, yy, name, size=12)


def line_chart(series: List[Dict[str, Any]], title: str, x_label: str, y_label: str,
               x_range: Optional[Tuple[int, int]] = None, y_range: Optional[Tuple[int, int]] = None, width: int = 760,
               height: int = 420, hlines: Optional[List[Tuple[int, str]]] = None) -> str:
    """Lines through each series' points.

    ``series``: list of ``{"name": str, "points": [(x, y), ...], "dashed": bool}``. ``x_range`` /
    ``y_range``: ``(low, high)``, default from the data. ``hlines``: ``[(y, label)]`` reference lines
    drawn dashed in grey (a target, a published figure). The legend lists the series in order.
    """
    series = [s for s in series if s.get("points")]
    xs = [p[0] for s in series for p in s["points"]]
    ys = [p[1] for s in series for p in s["points"]] + [h[0] for h in (hlines or [])]
    x_lo, x_hi = x_range if x_range else (min(xs or [0]), max(xs or [1]))
    y_lo, y_hi = y_range if y_range else (min(ys + [0]), max(ys or [1]))
    legend_w = 16 + max([len(str(s["name"])) for s in series] or [0]) * 7 + 34
    left, right, top, bottom = 64, 20 + legend_w, 40, 52
    pw, ph = width - left - right, height - top - bottom
    canvas = Canvas(width, height, title)
    canvas.text(left, 24, title, size=15, weight="bold")

    def px(x):
        return left + (x - x_lo) / float(x_hi - x_lo or 1) * pw

    def py(y):
        return top + ph - (y - y_lo) / float(y_hi - y_lo or 1) * ph

    for tick in nice_ticks(y_lo, y_hi):
        canvas.line(left, py(tick), left + pw, py(tick), stroke=GRID)
        canvas.text(left - 6, py(tick) + 4, _fmt_tick(tick), size=11, anchor="end", fill=MUTED)
    for tick in nice_ticks(x_lo, x_hi, 8):
        canvas.line(px(tick), top + ph, px(tick), top + ph + 4)
        canvas.text(px(tick), top + ph + 18, _fmt_tick(tick), size=11, anchor="middle", fill=MUTED)
    canvas.line(left, top + ph, left + pw, top + ph)
    canvas.line(left, top, left, top + ph)
    canvas.text(left + pw / 2.0, height - 12, x_label, size=12, anchor="middle")
    canvas.text(16, top + ph / 2.0, y_label, size=12, anchor="middle", rotate=-90)
    for y, label in hlines or []:
        canvas.line(left, py(y), left + pw, py(y), stroke=MUTED, dash="6 4")
        canvas.text(left + pw - 4, py(y) - 4, label, size=10, anchor="end", fill=MUTED)
    dashes = []
    for i, s in enumerate(series):
        dash = "7 4" if s.get("dashed") else None
        dashes.append(dash)
        pts = [(px(x), py(y)) for x, y in s["points"]]
        canvas.polyline(pts, PALETTE[i % len(PALETTE)], dash=dash)
    _legend(canvas, [s["name"] for s in series], left + pw + 16, top + 12, dashes)
    return canvas.render()


def bar_chart(categories: List[str], series: List[Dict[str, Any]], title: str, y_label: str, width: int = 760,
              height: int = 420, value_format: str = "%.0f") -> str:
    """Grouped bars: for each category one bar per series, the value printed above it.

    ``categories``: list of labels; ``series``: ``[{"name": str, "values": [number per category]}]``
    (None draws no bar).
    """
    values = [v for s in series for v in s["values"] if v is not None]
    y_hi = max(values + [0]) * 1.12 or 1.0
    legend_w = 16 + max([len(str(s["name"])) for s in series] or [0]) * 7 + 34
    left, right, top, bottom = 64, 20 + legend_w, 40, 64
    pw, ph = width - left - right, height - top - bottom
    canvas = Canvas(width, height, title)
    canvas.text(left, 24, title, size=15, weight="bold")

    def py(y):
        return top + ph - y / float(y_hi) * ph

    for tick in nice_ticks(0, y_hi):
        if tick > y_hi:
            continue
        canvas.line(left, py(tick), left + pw, py(tick), stroke=GRID)
        canvas.text(left - 6, py(tick) + 4, _fmt_tick(tick), size=11, anchor="end", fill=MUTED)
    group_w = pw / float(max(len(categories), 1))
    bar_w = min(48.0, group_w * 0.8 / max(len(series), 1))
    for ci, cat in enumerate(categories):
        gx = left + ci * group_w + (group_w - bar_w * len(series)) / 2.0
        for si, s in enumerate(series):
            value = s["values"][ci]
            if value is None:
                continue
            x = gx + si * bar_w
            canvas.rect(x + 1, py(value), bar_w - 2, top + ph - py(value), PALETTE[si % len(PALETTE)])
            canvas.text(x + bar_w / 2.0, py(value) - 4, value_format % value, size=10, anchor="middle")
        canvas.text(left + ci * group_w + group_w / 2.0, top + ph + 18, cat, size=11, anchor="middle")
    canvas.line(left, top + ph, left + pw, top + ph)
    canvas.line(left, top, left, top + ph)
    canvas.text(16, top + ph / 2.0, y_label, size=12, anchor="middle", rotate=-90)
    lx, ly = left + pw + 16, top + 12
    for i, s in enumerate(series):
        canvas.rect(lx, ly + i * 18 - 10, 14, 12, PALETTE[i % len(PALETTE)])
        canvas.text(lx + 20, ly + i * 18, s["name"], size=12)
    return canvas.render()


def slice_diagram(rows: List[Dict[str, Any]], title: str, slot_width: int = 56, row_height: int = 26) -> str:
    """One row per GPU: its memory slices as cells, each block (MIG instance or share) spanning its slices.

    ``rows``: ``[{"label": "node-1 GPU0 A100-80GB", "slots": 8, "blocks": [{"start": 0, "size": 4,
    "label": "3g.40gb", "kind": "3g.40gb"}], "note": "6/7 compute"}]``. ``slots`` is the number of
    memory slices (8 on A100/H100/H200, 4 on A30); a GPU without MIG has ``slots`` 0 or None and is
    drawn as one cell (its blocks, if any, share the width: time-slicing or MPS replicas). Blocks of
    the same ``kind`` (default: their label) share a colour; ``"kind": "free"`` or uncovered slices
    are drawn light grey, ``"kind": "broken"`` hatched red (e.g. a GPU instance without a compute
    instance). A row with ``"separator": "node-2"`` draws a group heading instead.
    """
    label_w = 14 + max([len(str(r.get("label", r.get("separator", "")))) for r in rows] or [0]) * 7
    max_slots = max([r.get("slots") or 8 for r in rows if "separator" not in r] or [8])
    note_w = 12 + max([len(str(r.get("note", ""))) for r in rows] or [0]) * 7
    width = int(label_w + max_slots * slot_width + note_w + 24)
    height = int(44 + len(rows) * row_height + 40)
    canvas = Canvas(width, height, title)
    canvas.text(12, 24, title, size=15, weight="bold")
    colours = {}
    legend = []
    y = 40
    x0 = label_w + 12
    for row in rows:
        if "separator" in row:
            canvas.text(12, y + row_height - 9, row["separator"], size=12, weight="bold")
            y += row_height
            continue
        slots = row.get("slots") or 0
        full_w = max_slots * slot_width
        canvas.text(12, y + row_height - 9, row.get("label", ""), size=11)
        if slots:
            cell = full_w / float(max_slots)
            for s in range(slots):
                canvas.rect(x0 + s * cell + 1, y + 2, cell - 2, row_height - 6, FREE_FILL, stroke=GRID)
        else:
            cell = None
            canvas.rect(x0 + 1, y + 2, full_w - 2, row_height - 6, FREE_FILL, stroke=GRID)
        blocks = row.get("blocks") or []
        for bi, block in enumerate(blocks):
            kind = block.get("kind") or block.get("label") or ""
            if cell is not None and block.get("start") is not None:
                bx, bw = x0 + block["start"] * cell, block.get("size", 1) * cell
            else:
                share = full_w / float(max(len(blocks), 1))
                bx, bw = x0 + bi * share, share
            if kind == "free":
                continue
            if kind == "broken":
                fill = "#f4c7c3"
                stroke = "#D55E00"
            else:
                if kind not in colours:
                    colours[kind] = PALETTE[len(colours) % len(PALETTE)]
                    legend.append(kind)
                fill, stroke = colours[kind], "#ffffff"
            canvas.rect(bx + 1, y + 2, bw - 2, row_height - 6, fill, stroke=stroke, rx=3,
                        opacity=0.85 if kind != "broken" else None)
            text = str(block.get("label", ""))
            max_chars = int(bw / 6.5)
            if max_chars >= 2:
                if len(text) > max_chars:
                    text = text[:max_chars - 1] + u"\u2026"
                canvas.text(bx + bw / 2.0, y + row_height - 10, text, size=10, anchor="middle",
                            fill="#ffffff" if kind != "broken" else "#8a1c0f")
        if row.get("note"):
            canvas.text(x0 + full_w + 10, y + row_height - 9, row["note"], size=11, fill=MUTED)
        y += row_height
    lx = 12
    for kind in legend:
        canvas.rect(lx, y + 12, 12, 12, colours[kind], rx=2)
        canvas.text(lx + 16, y + 22, kind, size=11)
        lx += 34 + len(kind) * 7
    canvas.width = max(canvas.width, int(lx))
    return canvas.render()
