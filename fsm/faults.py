"""Named fault points: ``FSM_FAULT=<point>@<step>`` kills the process right there.

Crash tests set the variable, let the process die with SIGKILL at an exact place,
then resume the run in a new process and check the ledger and the log.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from typing import Any

_NAME = "FSM_FAULT"


def _raw_environ() -> tuple[Mapping[Any, Any], Any]:
    """Where ``os.environ`` keeps its values, and the variable's key there: a step passes
    three fault points, and ``os.environ.get`` encodes the name each time. The variable
    is still read on every call, so a process may set it at any time."""
    data = getattr(os.environ, "_data", None)
    encodekey = getattr(os.environ, "encodekey", None)
    if isinstance(data, dict) and callable(encodekey):
        return data, encodekey(_NAME)
    return os.environ, _NAME


_ENVIRON, _KEY = _raw_environ()


def fault(point: str, step: int) -> None:
    """Kill this process with SIGKILL if ``FSM_FAULT`` names ``point`` at ``step``."""
    raw = _ENVIRON.get(_KEY)
    if not raw:
        return
    spec = os.fsdecode(raw)  # as os.environ decodes it
    for item in spec.split(","):
        name, _, at = item.partition("@")
        if name == point and (at in ("", "*") or at == str(step)):
            os.kill(os.getpid(), signal.SIGKILL)
