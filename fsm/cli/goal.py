"""The goal of a new run: given as text, read from standard input (``-``) or a file
(``@FILE``); never empty."""

from __future__ import annotations

import sys
from pathlib import Path

from fsm.errors import UsageError

GOAL_HELP = ("the user's request, the run's first message; - reads it from standard input, "
             "@FILE from a file (@@text for a request that starts with @)")


def read_goal(goal: str) -> str:
    """The goal as given, from standard input (``-``) or from a file (``@FILE``)."""
    if goal == "-":
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"the goal on standard input is not valid UTF-8 ({exc})") from None
        where = "on standard input"
    elif goal.startswith("@") and not goal.startswith("@@"):
        path = Path(goal[1:])
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"the goal file {str(path)!r} is not valid UTF-8 ({exc})") from None
        except OSError as exc:
            raise UsageError(f"cannot read the goal from {str(path)!r}: "
                             f"{exc.strerror or exc}") from None
        where = f"in {str(path)!r}"
    else:
        text, where = goal.removeprefix("@") if goal.startswith("@@") else goal, "given"
    if not text.strip():
        raise UsageError(f"the goal {where} is empty: give the user's request as text, "
                         "- to read it from standard input, or @FILE")
    return text.removesuffix("\n")
