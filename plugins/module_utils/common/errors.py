# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one exception type every gpuops.k8s module turns into ``fail_json``."""

from __future__ import annotations

from typing import Any, Dict


class GpuOpsError(Exception):
    """A failure with a message meant for the user.

    ``details`` is a dict merged into the module's ``fail_json`` result (for example the
    GPUs as they are after a fault halfway, or the list of valid profiles).
    """

    def __init__(self, msg: str, **details: Any) -> None:
        super(GpuOpsError, self).__init__(msg)
        self.msg: str = msg
        self.details: Dict[str, Any] = details

    def __str__(self) -> str:
        return self.msg
