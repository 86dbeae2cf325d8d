# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing reports (Markdown plus SVG pictures) and showing progress of long runs.

* :func:`table` - a Markdown table;
* :func:`report_paths` / :func:`write_report` - where a report goes and writing it so that a second
  run with the same content changes nothing (each file is compared first, then replaced atomically);
  in check mode it says what would change and writes nothing;
* :func:`write_report_diff` - :func:`write_report` plus the Markdown's before/after for a module's
  ``--diff`` output;
* :class:`Progress` - a progress bar on a terminal, a line every 10 % otherwise.

Python 3.9 compatible, standard library only.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common import diff as diff_helper
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

DEFAULT_NAME = "report.md"


def table(headers: List[str], rows: List[Any], align: Optional[List[str]] = None) -> str:
    """A Markdown table. ``align``: one of ``l``, ``r``, ``c`` per column (default: left)."""
    align = align or ["l"] * len(headers)
    marks = {"l": "---", "r": "---:", "c": ":---:"}

    def cell(value):
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join(marks.get(a, "---") for a in align) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def report_paths(path: str, default_name: str = DEFAULT_NAME) -> Tuple[str, str]:
    """``(markdown_file, directory)`` for a report ``path``.

    A path ending in ``.md`` is the Markdown file itself (pictures go beside it); any other path is
    a directory that receives ``default_name`` and the pictures.
    """
    if not path:
        raise GpuOpsError("report: a path is required (a directory, or a file ending in .md)")
    path = os.path.abspath(os.path.expanduser(str(path)))
    if path.lower().endswith(".md"):
        return path, os.path.dirname(path)
    return os.path.join(path, default_name), path


def _read(path):
    try:
        with io.open(path, "rb") as f:
            return f.read()
    except (IOError, OSError):
        return None


def _atomic_write(path, data):
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_report(path: str, markdown: str, pictures: Optional[Dict[str, Any]] = None, check_mode: bool = False,
                 default_name: str = DEFAULT_NAME) -> Dict[str, Any]:
    """Write a report: ``markdown`` (text) and ``pictures`` (``{file name: SVG text}``, names relative
    to the Markdown file, which refers to them by those names).

    Returns ``{"path": markdown file, "files": [every file of the report], "changed_files": [...],
    "changed": bool}``. Files whose content is already right are not touched; with ``check_mode``
    nothing is written and ``changed_files`` says what would be.
    """
    md_path, directory = report_paths(path, default_name)
    files = [(md_path, markdown)]
    for name in sorted(pictures or {}):
        if os.path.isabs(name) or os.path.normpath(name).startswith(".."):
            raise GpuOpsError("report picture name %r must be relative to the report directory" % name)
        files.append((os.path.join(directory, name), (pictures or {})[name]))
    changed = []
    for file_path, text in files:
        data = text.encode("utf-8") if not isinstance(text, bytes) else text
        if _read(file_path) != data:
            changed.append(file_path)
    if changed and not check_mode:
        try:
            for file_path, text in files:
                if file_path in changed:
                    parent = os.path.dirname(file_path)
                    if not os.path.isdir(parent):
                        os.makedirs(parent)
                    _atomic_write(file_path, text.encode("utf-8") if not isinstance(text, bytes) else text)
        except (IOError, OSError) as e:
            raise GpuOpsError("cannot write the report to %s: %s" % (directory, e), report_dir=directory)
    return {"path": md_path, "files": [item[0] for item in files], "changed_files": changed, "changed": bool(changed)}


def write_report_diff(path: str, markdown: str, pictures: Optional[Dict[str, Any]] = None, check_mode: bool = False,
                      diff: bool = False, default_name: str = DEFAULT_NAME) -> Tuple[Any, ...]:
    """:func:`write_report`, and with ``diff`` the Markdown file's ``{"before", "after", "before_header",
    "after_header"}`` for a module's diff output (the file as it was, or ``""``).

    Returns ``(written, diff)``; ``diff`` is None without ``diff`` or when no file of the report changes.
    """
    md_path = report_paths(path, default_name)[0]
    before = None
    if diff:
        before = _read(md_path)
    written = write_report(path, markdown, pictures, check_mode=check_mode, default_name=default_name)
    if not (diff and written["changed"]):
        return written, None
    before = before.decode("utf-8") if before is not None else ""
    return written, diff_helper.text_diff(before, markdown, md_path)


class Progress(object):
    """Progress of ``total`` steps on ``stream`` (default stderr).

    On a terminal it redraws one bar (``[#####.....]  12/40  30%  label``); otherwise (CI logs,
    pipes) it prints a line each time another ``every_pct`` percent is done, so logs stay short.
    ``enabled=False`` makes every call a no-op (modules: never write to stdout).
    """

    def __init__(self, total: int, label: str = "", stream: Any = None, width: int = 30, every_pct: int = 10,
                 enabled: bool = True, clock: Any = time.time) -> None:
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.every_pct = every_pct
        self.enabled = enabled
        self.done = 0
        self._clock = clock
        self._start = clock()
        self._last_pct = -1
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def _line(self, note):
        frac = min(self.done / float(self.total), 1.0)
        filled = int(round(frac * self.width))
        elapsed = self._clock() - self._start
        return "[%s%s] %*d/%d %3d%%  %5.1fs  %s%s" % (
            "#" * filled, "." * (self.width - filled), len(str(self.total)), self.done, self.total,
            int(frac * 100), elapsed, self.label, (" " + note) if note else "")

    def step(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if not self.enabled:
            return
        pct = int(100 * self.done / self.total)
        if self._tty:
            self.stream.write("\r" + self._line(note) + "\033[K")
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()
        elif pct // self.every_pct > self._last_pct // self.every_pct or self.done >= self.total:
            if self.done >= self.total and self._last_pct >= 100:
                return
            self.stream.write(self._line(note) + "\n")
            self.stream.flush()
        self._last_pct = pct

    def elapsed(self) -> float:
        return self._clock() - self._start
