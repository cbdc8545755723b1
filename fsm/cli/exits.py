"""The exit status of every ``fsm`` command, in one place.

Scripts can trust these: a command that drives a run (``run``, ``resume``, ``approve``,
``deny``) exits with the code of the status the run stopped in.
"""

from __future__ import annotations

#: Done, or stopped normally to wait for a person or for the customer.
OK = 0
#: An error the command reports on one ``error:`` line (run not found, damaged database),
#: or a check that failed (``fsm audit``, ``fsm verify``).
ERROR = 1
#: A bad argument, option or input; nothing was done.
USAGE = 2
FAILED = 3
BUDGET_EXHAUSTED = 4
HANDED_OVER = 5
MODEL_UNAVAILABLE = 6
#: The model server refuses the run's request every time (see docs/reference/statuses.md).
MODEL_REFUSED = 7
#: Interrupted (Ctrl-C).
INTERRUPTED = 130

BY_STATUS: dict[str, int] = {
    "done": OK,
    "awaiting_approval": OK,
    "running": OK,
    "failed": FAILED,
    "budget_exhausted": BUDGET_EXHAUSTED,
    "handed_over": HANDED_OVER,
    "model_unavailable": MODEL_UNAVAILABLE,
    "model_refused": MODEL_REFUSED,
    "awaiting_customer": OK,
}


def for_status(status: str) -> int:
    """The exit code of a run that stopped in ``status``."""
    return BY_STATUS.get(status, ERROR)


#: The table shown by ``--help`` (typer keeps the line breaks of an epilog in \b blocks).
HELP = (
    "Exit status: 0 done or waiting for a person or the customer; 1 error; 2 usage error; "
    "3 failed; 4 budget exhausted; 5 handed over; 6 model unavailable; 7 model refused the "
    "request; 130 interrupted (Ctrl-C: the run stays resumable)."
)
