"""The verbs that act on runs and on approvals, grouped under their noun.

``fsm runs`` lists runs and ``fsm runs show|history|audit|resume|fork|export|prune`` acts
on them; ``fsm approvals`` lists what runs wait on and ``fsm approvals approve|deny|sweep``
decides or expires it. The handovers (``fsm handovers``), the users (``fsm users``) and
the signing keys (``fsm keys``) are groups of their own. Each verb is one function, under
its noun and at the top level (``fsm show``, ``fsm approve``): both spellings work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from fsm.cli import evidence, exits, inspect, ops, sandbox
from fsm.cli.app import app

#: noun → (the listing it runs without a command, its verbs: (name, function, epilog)).
NOUNS: dict[str, tuple[Callable[..., Any], list[tuple[str, Callable[..., Any], str | None]]]] = {
    "runs": (inspect.runs_cmd, [
        ("show", inspect.show_cmd, None),
        ("history", inspect.history_cmd, None),
        ("audit", inspect.audit_cmd, None),
        ("resume", ops.resume_cmd, exits.HELP),
        ("fork", sandbox.fork_cmd, None),
        ("export", evidence.export_cmd, None),
        ("prune", evidence.prune_cmd, None),
    ]),
    "approvals": (inspect.approvals_cmd, [
        ("approve", ops.approve_cmd, exits.HELP),
        ("deny", ops.deny_cmd, exits.HELP),
        ("sweep", ops.sweep_cmd, None),
    ]),
}

for _noun, (_listing, _verbs) in NOUNS.items():
    _group = typer.Typer(invoke_without_command=True, rich_markup_mode=None)
    _group.callback()(_listing)
    for _name, _fn, _epilog in _verbs:
        _group.command(_name, epilog=_epilog)(_fn)
    app.add_typer(_group, name=_noun)
