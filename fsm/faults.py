"""Named fault points: ``FSM_FAULT=<point>@<step>`` kills the process right there.

Crash tests set the variable, let the process die with SIGKILL at an exact place,
then resume the run in a new process and check the ledger and the log.
"""

from __future__ import annotations

import os
import signal


def fault(point: str, step: int) -> None:
    """Kill this process with SIGKILL if ``FSM_FAULT`` names ``point`` at ``step``."""
    spec = os.environ.get("FSM_FAULT")
    if not spec:
        return
    for item in spec.split(","):
        name, _, at = item.partition("@")
        if name == point and (at in ("", "*") or at == str(step)):
            os.kill(os.getpid(), signal.SIGKILL)
