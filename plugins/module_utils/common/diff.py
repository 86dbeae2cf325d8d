# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one builder of a module's ``diff`` (what ``--diff`` shows): named things before and after.

Every module that reports a diff builds it here, in one of two shapes Ansible's callback prints:

* :class:`DiffTracker` - named items (a node, a GPU) with their value before and after. ``as_dict()`` gives
  ``{"before": {name: value}, "after": {name: value}}`` (Ansible prints the two mappings as YAML and diffs them);
  ``as_text()`` gives one ``name: value`` line per item and the headers, for values that are one-line strings.
* :func:`text_diff` - one text (a file) before and after, with the headers that name it.

An item may be known on one side only (a node the plan adds, a GPU that was not read back): it appears on that side
only. Python 3.9 compatible; it needs nothing but the standard library.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

_MISSING = object()


class DiffTracker(object):
    """Named values before and after, in the order they were added (each side keeps its own order)."""

    def __init__(self) -> None:
        self._before: Dict[str, Any] = {}
        self._after: Dict[str, Any] = {}

    def add(self, name: str, before: Any = _MISSING, after: Any = _MISSING) -> None:
        """Record ``name``'s value before and/or after; a side left out is not recorded (the item is absent there)."""
        if before is not _MISSING:
            self._before[name] = before
        if after is not _MISSING:
            self._after[name] = after

    def has_changes(self) -> bool:
        """True when an item differs, or is on one side only."""
        return self._before != self._after

    def as_dict(self) -> Dict[str, Dict[str, Any]]:
        """``{"before": {name: value}, "after": {name: value}}`` (copies of the mappings)."""
        return {"before": dict(self._before), "after": dict(self._after)}

    def as_text(self, before_header: str, after_header: Optional[str] = None) -> Dict[str, str]:
        """One ``name: value`` line per item on each side, each side ending with a newline; the headers name the
        sides (``after_header`` defaults to ``before_header``)."""
        return text_diff(_lines(self._before), _lines(self._after), before_header, after_header)


def _lines(items: Dict[str, Any]) -> str:
    return "\n".join("%s: %s" % (name, value) for name, value in items.items()) + "\n"


def text_diff(before: str, after: str, before_header: str, after_header: Optional[str] = None) -> Dict[str, str]:
    """A text before and after (a file: ``""`` before it exists), as a module's diff with its headers."""
    return {"before": before, "after": after, "before_header": before_header,
            "after_header": before_header if after_header is None else after_header}
