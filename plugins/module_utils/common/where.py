# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The place of an input value, as every error message names it.

One :class:`Where` for the three kinds of place the collection's inputs have: a position in a file
(``mig.yml, line 4, column 1``), a CSV cell (``pods.csv, line 3, column 5 (gpu_milli)``: the line and the
header's column by name) and an option path (``plan.node_configs[2]``, ``pods[3].cpu_milli``).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, NoReturn, Optional, Sequence

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


class Where(object):
    """A file position (``line``, ``column``), a CSV row (``line`` and its ``header``) or an option ``path``."""

    def __init__(self, source: str, line: Optional[int] = None, column: Optional[int] = None,
                 path: Optional[str] = None, header: Optional[Sequence[str]] = None) -> None:
        self.source = source
        self.line = line
        self.column = column
        self.path = path
        self.header = list(header) if header is not None else None

    def _field_column(self, field: Optional[str]) -> Optional[int]:
        if field is None or self.header is None or field not in self.header:
            return None
        return self.header.index(field) + 1

    def text(self, field: Optional[str] = None) -> str:
        """The place as a message names it; ``field`` a CSV column (by name) or a key below the path."""
        if self.header is not None and self.line is not None:
            out = "%s, line %d" % (self.source, self.line)
            col = self._field_column(field)
            if col is not None:
                out += ", column %d (%s)" % (col, field)
            elif self.column is not None:
                out += ", column %d" % self.column
            return out
        if self.line is not None:
            if self.column is None:
                return "%s, line %d" % (self.source, self.line)
            return "%s, line %d, column %d" % (self.source, self.line, self.column)
        base = self.path if self.path is not None else self.source
        return "%s.%s" % (base, field) if field is not None else base

    def named(self) -> str:
        """The source and the path in it (``mig.yaml: mig-configs[a][0]``); the source alone without a path."""
        return "%s: %s" % (self.source, self.path) if self.path else self.source

    def details(self, field: Optional[str] = None) -> Dict[str, Any]:
        """The place as GpuOpsError details: source, line, column (a number) and column_name (a CSV column)."""
        out: Dict[str, Any] = {"source": self.source}
        if self.line is not None:
            out["line"] = self.line
        col = self._field_column(field)
        if col is not None:
            out["column"] = col
        elif self.column is not None:
            out["column"] = self.column
        if field is not None:
            out["column_name"] = field
        return out

    def fail(self, message: str, field: Optional[str] = None, **details: Any) -> NoReturn:
        """Raise ``GpuOpsError("<place>: <message>")`` with the place in its details."""
        out = dict(details)
        out.update(self.details(field))
        raise GpuOpsError("%s: %s" % (self.text(field), message), **out)
